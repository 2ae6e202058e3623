"""Numbers whose exponent passes decimal's own limits (security round 3, item 9a).

The differential fuzz found ``deserialize(b"\\t\\0\\0\\0\\0\\0\\0\\0" + b"1e9999999")`` raising
``decimal.Overflow`` (and ``1e8446744073709551615`` ``decimal.InvalidOperation``): the number
rules measured every large token with ``decimal``, whose exponents stop near 10**18 (and whose
default context overflows past 999,999).  Upstream says "invalid JSON in header: number out of
range"; so must every path here: the rules, the json and msgspec fast paths (which step aside),
``parse_header``, ``deserialize`` and ``safe_open``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pysafetensors
from pysafetensors.errors import InvalidHeaderJson
from pysafetensors.format import header as header_mod

upstream = pytest.importorskip("safetensors")

_VALID = '"dtype":"U8","shape":[1],"data_offsets":[0,1]'
HEADERS = [
    "1e9999999", "1e8446744073709551615", " -1E+99999999 ", "1E99999999999999999999999", "[1e9999999]",
    '{"a":{' + _VALID + ',"x":1e9999999}}', '{"a":{' + _VALID + ',"x":[1e8446744073709551615]}}',
    '{"__metadata__":{"a":1e9999999}}', '{"a":{"dtype":"U8","shape":[1e9999999],"data_offsets":[0,1]}}',
    '{"a":0e99999999999999999999}', '{"a":{' + _VALID + ',"x":0.0e8446744073709551615}}',
    '{"a":{' + _VALID + ',"x":1e-8446744073709551615}}', '{"a":{' + _VALID + ',"x":-1e-99999999}}',
]


def _file(text: str) -> bytes:
    body = text.encode()
    body += b" " * (-len(body) % 8)
    data = b"\0" if text.startswith('{"a":{') and "1e9999999]" not in text else b""
    return len(body).to_bytes(8, "little") + body + data


def _outcome(fn: Any) -> tuple[str, str]:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - compared by the caller
        return type(e).__name__, str(e)
    return "ok", ""


@pytest.mark.parametrize("text", HEADERS)
def test_every_path_gives_upstreams_verdict_and_words(text: str, tmp_path: Path) -> None:
    data = _file(text)
    path = tmp_path / "h.safetensors"
    path.write_bytes(data)
    up_kind, up_text = _outcome(lambda: upstream.deserialize(data))
    ours = [_outcome(lambda: pysafetensors.deserialize(data))]
    for framework in ("np", "pt"):
        ours.append(_outcome(lambda framework=framework: pysafetensors.safe_open(path, framework).keys()))
    header, size = data[8 : 8 + int.from_bytes(data[:8], "little")], len(data)
    ours.append(_outcome(lambda: header_mod.parse_header(header, size)))
    ours.append(_outcome(lambda: header_mod._careful_header(header, size)))
    for kind, message in ours:
        if up_kind == "ok":
            assert kind == "ok", (text, message)
        else:
            assert kind == "InvalidHeaderJson", (text, kind, message)
            up_reason = up_text.split("invalid JSON in header: ")[1].rsplit(" at line", 1)[0]
            assert message.endswith("invalid JSON in header: " + up_reason) or f"header: {up_reason} (" in message, (
                text, message, up_text)
    # The fast paths never raise: they step aside (None) and the rules decide.
    typed = header_mod._typed_entries()
    if text.lstrip().startswith("{"):
        assert header_mod._fast_header(header.decode(), len(header), size) is None
        if typed is not None:
            answer = header_mod._typed_header.fast_header(header.decode(), len(header), size, typed,
                                                          header_mod.Header)
            assert answer is None or answer is header_mod._typed_header.NOT_CANONICAL


def test_the_issues_inputs_word_for_word() -> None:
    for number in ("1e9999999", "1e8446744073709551615"):
        data = len(number).to_bytes(8, "little") + number.encode()
        with pytest.raises(InvalidHeaderJson) as ours:
            pysafetensors.deserialize(data)
        with pytest.raises(upstream.SafetensorError) as up:
            upstream.deserialize(data)
        assert str(ours.value) == "Error while deserializing: invalid JSON in header: number out of range"
        assert str(up.value).startswith(str(ours.value) + " at line 1 column")


def test_a_large_header_with_such_a_number_takes_the_msgspec_path_and_the_rules(tmp_path: Path) -> None:
    """Over TYPED_FROM, parse_header tries msgspec's path first; the number still gets upstream's words."""
    entries = {f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(12_000)}
    text = json.dumps(entries, separators=(",", ":"))[:-1] + ',"z":{' + _VALID.replace("[0,1]", "[12000,12001]")
    text += ',"x":1e9999999}}'
    body = text.encode()
    body += b" " * (-len(body) % 8)
    assert len(body) >= header_mod.TYPED_FROM
    data = len(body).to_bytes(8, "little") + body + bytes(12_001)
    with pytest.raises(InvalidHeaderJson, match="number out of range"):
        pysafetensors.deserialize(data)
    with pytest.raises(upstream.SafetensorError, match="number out of range"):
        upstream.deserialize(data)
