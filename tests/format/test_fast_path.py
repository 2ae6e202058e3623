"""The fast header path: what it accepts equals the rules' verdict, and anything unusual is left
to the rules.  (tests/reliability/test_fast_path_verdicts.py runs the same comparison over the
whole corpus and the fuzzers' inputs.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import sample_arrays

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors.errors import InvalidHeaderJson
from pysafetensors.format import header as header_mod
from pysafetensors.format import parse_header

upstream = pytest.importorskip("safetensors")
upstream_np = pytest.importorskip("safetensors.numpy")


def _header_bytes(obj: Any) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return body + b" " * ((8 - (8 + len(body)) % 8) % 8)


def _parse_both(text: bytes, size: int) -> tuple[Any, Any]:
    """The fast paths' answer (json's and msgspec's must agree) and the rules' (or their error)."""
    fast = header_mod._fast_header(text.decode(), len(text), size)
    typed = header_mod._typed_header.fast_header(text.decode(), len(text), size, header_mod._typed_entries(),
                                                 header_mod.Header)
    typed = None if typed is header_mod._typed_header.NOT_CANONICAL else typed
    assert typed is None or fast is None or typed == fast
    fast = fast if fast is not None else typed
    try:
        careful: Any = header_mod._careful_header(text, size)
    except Exception as e:  # noqa: BLE001 - compared below
        careful = type(e)
    return fast, careful


def _files() -> dict[str, dict[str, np.ndarray]]:
    return {**sample_arrays(), "empty": {}}


def test_fast_header_agrees_with_careful_path() -> None:
    for name, tensors in _files().items():
        for metadata in ({"format": "np", "x": "é"}, None):
            data = upstream_np.save(tensors, metadata=metadata)
            n = int.from_bytes(data[:8], "little")
            fast, careful = _parse_both(data[8 : 8 + n], len(data))
            assert fast is not None and fast == careful, name


def test_fast_header_takes_sub_byte_dtypes_and_zero_sizes() -> None:
    header = {"a": {"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 3]},
              "b": {"dtype": "F6_E2M3", "shape": [4], "data_offsets": [3, 6]},
              "c": {"dtype": "U64", "shape": [0, 18446744073709551615], "data_offsets": [6, 6]},
              "d": {"dtype": "BOOL", "shape": [], "data_offsets": [6, 7]}}
    text = _header_bytes(header)
    fast, careful = _parse_both(text, 8 + len(text) + 7)
    assert fast is not None and fast == careful
    odd = _header_bytes({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}})  # 12 bits: not whole bytes
    fast, careful = _parse_both(odd, 8 + len(odd) + 2)
    assert fast is None and careful.__name__ == "MisalignedSubByte"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.replace(b'"dtype":"F32"', b'"dtype":"F32","dtype":"F32"', 1),  # duplicate field
        lambda t: t.replace(b'"shape":[2]', b'"shape":[-0]', 1),
        lambda t: t.replace(b"[0,8]", b"[0,8.0]", 1),
        lambda t: t.replace(b'"format":"pt"', b'"format":7', 1),
        lambda t: t.replace(b"{", b'{"__metadata__":null,', 1),  # duplicate __metadata__
        lambda t: t.replace(b'"F32"', b'"F33"', 1),
        lambda t: t.replace(b"[8,16]", b"[9,16]", 1),
        # What the loop checks by structure, not by scanning the text (sum() over the dims,
        # exceptions from unpacking and lookups):
        lambda t: t.replace(b'"shape":[2]', b'"shape":[true,2]', 1),  # bool dims: 1 to Python
        lambda t: t.replace(b'"shape":[2]', b'"shape":[2.0]', 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":["2"]', 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":[[2]]', 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":[null]', 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":{}', 1),  # sum({}) is 0: must not pass
        lambda t: t.replace(b'"shape":[2]', b'"shape":[2,-1,-1]', 1),  # product 2, negative dims
        lambda t: t.replace(b'"shape":[2]', b'"shape":[NaN]', 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":[Infinity]', 1),
        lambda t: t.replace(b'"format":"pt"', b'"format":NaN', 1),
        lambda t: t.replace(b'"dtype":"F32"', b'"dtype":["F32"]', 1),  # unhashable code
        lambda t: t.replace(b'"dtype":"F32"', b'"dtype":32', 1),
        lambda t: t.replace(b"[0,8]", b'"08"', 1),  # a 2-character string unpacks
        lambda t: t.replace(b"[0,8]", b'{"0":0,"8":8}', 1),
        lambda t: t.replace(b"[0,8]", b"[0,8,8]", 1),
        lambda t: t.replace(b"[0,8]", b"[false,8]", 1),
        lambda t: t.replace(b',"data_offsets":[0,8]', b',"offsets":[0,8]', 1),  # missing field
        lambda t: t.replace(b'"format":"pt"', b'"format":"\\ud800"', 1),  # escaped lone surrogate
        # Dimensions past u64 in a zero-element tensor (the product is 0, so no size check sees them):
        lambda t: t.replace(b'"shape":[2]', b'"shape":[4,0,18446744073709551616]', 1).replace(b"[0,8]", b"[0,0]", 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":[0,18446744073709551616]', 1).replace(b"[0,8]", b"[0,0]", 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":[0,' + b"9" * 30 + b"]", 1).replace(b"[0,8]", b"[0,0]", 1),
        lambda t: t.replace(b'"shape":[2]', b'"shape":[' + b"9" * 30 + b",1.5]", 1),  # sum() overflowed converting
        lambda t: t.replace(b'"shape":[2]', b'"shape":[1' + b",1" * 70 + b",3]", 1),  # more than 64 dims
        # A shape of the right structure built from huge brackets counts: a top-level array.
        lambda t: b"[" + t + b"]",
    ],
)
def test_fast_header_defers_unusual_headers(mutate: Any) -> None:
    header = {"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}
    original = _header_bytes(header)
    assert header_mod._fast_header(original.decode(), len(original), 8 + len(original) + 16) is not None
    text = mutate(original).rstrip()
    assert text != original.rstrip()
    text = text + b" " * ((8 - (8 + len(text)) % 8) % 8)
    fast, careful = _parse_both(text, 8 + len(text) + 16)
    assert fast is None
    assert isinstance(careful, type) and issubclass(careful, Exception)


def test_out_of_order_header_still_parses() -> None:
    header = {"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},
              "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    text = _header_bytes(header)
    h = header_mod.parse_header(text, 8 + len(text) + 16)
    assert [t.name for t in h.tensors] == ["a", "b"]


_POSITION = re.compile(r" at line \d+ column \d+$")


@pytest.mark.parametrize(
    "shape,offsets",
    [
        ([4, 0, 2**64], [0, 0]),  # the hardening issue's example
        ([0, 2**64], [0, 0]),
        ([2**64, 0], [0, 0]),
        ([0, 2**64 + 5, 3], [0, 0]),
        ([0, 10**30], [0, 0]),
        ([0], [0, 2**64]),
        ([0], [2**64, 2**64]),
    ],
)
def test_integers_past_u64_are_rejected_at_open_on_every_path(shape: list[int], offsets: list[int], tmp_path: Any) -> None:
    """Every integer in a header must be a u64: upstream reads a larger one as a float and
    refuses it as a usize, when the file is opened.  Ours, with upstream's words."""
    h = json.dumps({"t": {"dtype": "I16", "shape": shape, "data_offsets": offsets}}, separators=(",", ":")).encode()
    data = len(h).to_bytes(8, "little") + h
    with pytest.raises(upstream.SafetensorError) as up:
        upstream.deserialize(data)
    want = _POSITION.sub("", str(up.value).removeprefix("Error while deserializing: "))
    assert want.startswith("invalid JSON in header: invalid type: floating point `")
    assert header_mod._fast_header(h.decode(), len(h), len(data)) is None
    with pytest.raises(InvalidHeaderJson) as ours:
        parse_header(h, len(data))
    assert ours.value.reason == want
    with pytest.raises(InvalidHeaderJson):
        pysafetensors.deserialize(data)
    with pytest.raises(InvalidHeaderJson):
        pnp.load(data)
    path = tmp_path / "t.safetensors"
    path.write_bytes(data)
    for backend in ("mmap", "pread"):
        with pytest.raises(InvalidHeaderJson, match="expected usize"):
            pysafetensors.safe_open(path, framework="np", backend=backend)
    with pytest.raises(InvalidHeaderJson):
        pysafetensors.safe_open(data, framework="np")


def test_parse_header_uses_msgspec_when_installed_and_json_when_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast extra is used (CI installs it), and PYSAFETENSORS_JSON=stdlib turns it off."""
    assert header_mod._typed_entries() is not None
    monkeypatch.setattr(header_mod, "_TYPED", [])
    monkeypatch.setenv("PYSAFETENSORS_JSON", "stdlib")
    assert header_mod._typed_entries() is None
    text = _header_bytes({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
    assert parse_header(text, 8 + len(text) + 8).tensors[0].shape == (2,)


def test_msgspec_path_takes_what_writers_write_and_defers_the_rest() -> None:
    typed = header_mod._typed_entries()
    text = upstream_np.save({"a": np.zeros(3, np.float32), "b": np.zeros((2, 0), np.int8)}, metadata={"k": "v"})
    n = int.from_bytes(text[:8], "little")
    header = text[8 : 8 + n].decode()
    fast = header_mod._typed_header.fast_header(header, n, len(text), typed, header_mod.Header)
    assert fast is not None and fast == header_mod._careful_header(text[8 : 8 + n], len(text))
    for odd in ['{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"k":"v"}}',  # metadata last
                '{"__metadata__":{"k":"v"},"__metadata__":null,"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
                '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}',
                '{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}',
                '{"a":{"dtype":"F32","shape":[true,2],"data_offsets":[0,8]}}',
                '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}',
                '{"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}}',
                '{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
                '{"a":{"dtype":"F32","shape":[0,18446744073709551616],"data_offsets":[0,0]}}']:
        size = 8 + len(odd) + 8
        assert header_mod._typed_header.fast_header(odd, len(odd), size, typed,
                                                    header_mod.Header) in (None, header_mod._typed_header.NOT_CANONICAL), odd


def test_only_large_headers_import_msgspec(tmp_path: Path) -> None:
    """An ordinary file never pays for importing msgspec; a header from TYPED_FROM on takes its path."""
    small = tmp_path / "small.safetensors"
    upstream_np.save_file({f"t{i}": np.zeros(4, np.float32) for i in range(300)}, str(small))
    big = tmp_path / "big.safetensors"
    count = header_mod.TYPED_FROM // 60  # every entry below is over 60 bytes of JSON
    upstream_np.save_file({f"layer.{i:07d}.weight": np.zeros(1, np.float32) for i in range(count)}, str(big))
    assert int.from_bytes(big.read_bytes()[:8], "little") >= header_mod.TYPED_FROM
    probe = ("import sys, pysafetensors; from pysafetensors import safe_open\n"
             "with safe_open(sys.argv[1], framework='np') as f: n = len(f.keys())\n"
             "print(n, 'msgspec' in sys.modules)")
    for path, count_, imported in ((small, 300, False), (big, count, True)):
        out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": str(Path(pysafetensors.__file__).parents[1])})
        assert out.stdout.split() == [str(count_), str(imported)], (path.name, out.stdout, out.stderr)
