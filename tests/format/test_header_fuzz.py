"""Differential fuzzing: mutated headers are accepted by us exactly when upstream accepts them."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as hs

import pysafetensors
from pysafetensors.errors import HeaderError

st = pytest.importorskip("safetensors")

EXAMPLES = int(os.environ.get("PYSAFETENSORS_EXAMPLES", "60")) * 3

_BASE_HEADER = {
    "__metadata__": {"format": "pt", "k": "v"},
    "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
    "b": {"dtype": "I8", "shape": [3], "data_offsets": [16, 19]},
    "s": {"dtype": "F4", "shape": [2], "data_offsets": [19, 20]},
}
_DATA = bytes(range(20))
# Tokens that make plausible JSON mutations; any of them may land anywhere.
_TOKENS = [b"{", b"}", b"[", b"]", b",", b":", b'"', b"0", b"1", b"-", b"-0", b"1.0", b"1e2", b"null", b"true",
           b"\\u0000", b"\\ud800", b" ", b"\n", b"\xff", b"\xc3\xa9", b'"dtype"', b'"shape"', b'"data_offsets"',
           b'"__metadata__"', b'"F32"', b'"U8"', b'"F4"', b"18446744073709551616", b"20", b"19", b"16"]


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except (st.SafetensorError, HeaderError) as e:
        return "error", type(e).__name__
    except Exception as e:  # noqa: BLE001 - anything else is a finding
        return "crash", f"{type(e).__name__}: {e}"


def _read(lib: Any, data: bytes) -> list[tuple[str, dict[str, Any]]]:
    return sorted((n, {"dtype": d["dtype"], "shape": list(d["shape"]), "data": bytes(d["data"])})
                  for n, d in lib.deserialize(data))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=hs.lists(
        hs.tuples(hs.sampled_from(["insert", "delete", "replace"]), hs.integers(0, 10_000), hs.sampled_from(_TOKENS)),
        min_size=1,
        max_size=3,
    ),
    fix_length=hs.booleans(),
    data_delta=hs.integers(-2, 2),
)
def test_mutated_headers_agree_with_upstream(edits: list[tuple[str, int, bytes]], fix_length: bool,
                                              data_delta: int) -> None:
    header = bytearray(json.dumps(_BASE_HEADER, separators=(",", ":")).encode())
    for op, pos, token in edits:
        pos %= len(header) + 1
        if op == "insert":
            header[pos:pos] = token
        elif op == "delete":
            del header[pos : pos + len(token)]
        else:
            header[pos : pos + len(token)] = token
    data = _DATA[: len(_DATA) + data_delta] if data_delta <= 0 else _DATA + b"\x00" * data_delta
    n = len(header) if fix_length else len(header) + 1
    blob = n.to_bytes(8, "little") + bytes(header) + data
    up = _outcome(lambda: _read(st, blob))
    ours = _outcome(lambda: _read(pysafetensors, blob))
    event(up[0] + " " + (str(ours[1]) if ours[0] == "error" else ""))
    assert ours[0] != "crash", ours
    assert ours[0] == up[0], (blob, up, ours)
    if up[0] == "ok":
        assert ours[1] == up[1]


_json_values = hs.recursive(
    hs.one_of(
        hs.none(), hs.booleans(), hs.integers(-3, 40), hs.sampled_from([2**64 - 1, 2**64, 2**63, -(2**63)]),
        hs.floats(allow_nan=False, allow_infinity=False, width=32), hs.sampled_from(["F32", "I8", "U8", "F4", "x", ""]),
    ),
    lambda children: hs.one_of(hs.lists(children, max_size=3), hs.dictionaries(hs.sampled_from(
        ["dtype", "shape", "data_offsets", "F32", "x"]), children, max_size=3)),
    max_leaves=6,
)


def _dump(obj: Any, dup: str | None) -> bytes:
    """Compact JSON; ``dup`` repeats one top-level key (first copy holds the original value)."""
    text = json.dumps(obj, separators=(",", ":"))
    if dup is not None and dup in obj:
        first = json.dumps({dup: _BASE_HEADER.get(dup, {})}, separators=(",", ":"))[1:-1]
        text = "{" + first + "," + text[1:] if len(obj) else text
    return text.encode()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    target=hs.sampled_from(["__metadata__", "w", "b", "s", "new"]),
    field=hs.sampled_from([None, "dtype", "shape", "data_offsets", "extra", "k"]),
    value=_json_values,
    drop=hs.booleans(),
    dup=hs.sampled_from([None, "w", "b", "__metadata__"]),
    data_delta=hs.integers(-1, 1),
)
def test_structured_header_edits_agree_with_upstream(
    target: str, field: str | None, value: Any, drop: bool, dup: str | None, data_delta: int
) -> None:
    obj: dict[str, Any] = json.loads(json.dumps(_BASE_HEADER))
    if field is None:
        if drop:
            obj.pop(target, None)
        else:
            obj[target] = value
    elif isinstance(obj.get(target), dict):
        if drop:
            obj[target].pop(field, None)
        else:
            obj[target][field] = value
    header = _dump(obj, dup)
    data = _DATA[: len(_DATA) + data_delta] if data_delta <= 0 else _DATA + b"\x00"
    blob = len(header).to_bytes(8, "little") + header + data
    up = _outcome(lambda: _read(st, blob))
    ours = _outcome(lambda: _read(pysafetensors, blob))
    event(up[0] + " " + (str(ours[1]) if ours[0] == "error" else ""))
    assert ours[0] != "crash", ours
    assert ours[0] == up[0], (blob, up, ours)
    if up[0] == "ok":
        assert ours[1] == up[1]
