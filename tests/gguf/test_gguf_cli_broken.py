"""GGUF files the CLI must refuse: hostile counts and lengths, unknown value types, truncation, other
versions, offsets past the end; refused before anything they ask for is allocated, and listed by validate."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pytest
from gguf_helpers import cli_json, run_cli


def _prefix(n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv)


def _s(text: str) -> bytes:
    return struct.pack("<Q", len(text.encode())) + text.encode()


def _tensor(name: str, dims: list[int], qtype: int, offset: int) -> bytes:
    return _s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, qtype, offset)


def _pad(data: bytes, tail: int) -> bytes:
    return data + bytes(-len(data) % 32) + bytes(tail)


BROKEN = {
    "huge-array": (_prefix(0, 1) + _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**63) + bytes(64),
                   "array_too_long", "array 'tokenizer.ggml.tokens' at offset 61 declares 9223372036854775808 items"),
    "huge-string": (_prefix(0, 1) + _s("general.name") + struct.pack("<IQ", 8, 2**62) + bytes(64),
                    "string_too_long", "string length 4611686018427387904 at offset"),
    "huge-count": (_prefix(2**40, 0) + bytes(64), "count_too_large", "tensor count 1099511627776 cannot fit"),
    "value-type": (_prefix(0, 1) + _s("k") + struct.pack("<I", 13) + bytes(16), "unknown_value_type",
                   "unknown GGUF value type 13 at offset 33"),
    "truncated": (_prefix(0, 1) + _s("k") + struct.pack("<I", 6) + b"\0\0", "truncated",
                  "truncated GGUF file: value of 'k' needs 4 bytes at offset 37, only 2 remain"),
    "version": (b"GGUF" + struct.pack("<I", 7) + bytes(16), "unsupported_version", "unsupported GGUF version 7"),
    "big-endian": (b"GGUF" + struct.pack(">I", 3) + bytes(16), "unsupported_version", "a big-endian GGUF file"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_headers(case: str, tmp_path: Path) -> None:
    data, code_name, fragment = BROKEN[case]
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        for command in ("inspect", "id", "stats", "diff", "convert"):
            extra = [path] if command == "diff" else [tmp_path / "out.safetensors"] if command == "convert" else []
            code, out, err = run_cli(command, path, *extra)
            assert code == 2 and out == "", (command, err)
            assert err.startswith("pysafetensors: error: ") and fragment in err and "internal error" not in err
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # refused before anything the file asks for is allocated
    code, result = cli_json("validate", path)
    assert code == 1 and [p["code"] for p in result["problems"]] == [code_name]
    assert fragment in result["problems"][0]["message"]


def test_offsets_past_the_end_and_unknown_types(tmp_path: Path) -> None:
    body = _prefix(3, 0) + _tensor("ok", [32], 0, 0) + _tensor("far", [32], 0, 1 << 40) + _tensor("new", [32], 99, 128)
    path = tmp_path / "b.gguf"
    path.write_bytes(_pad(body, 256))
    code, _out, err = run_cli("inspect", path)
    assert code == 2 and "tensor 'far': data [1099511627776, 1099511627904) runs past the end" in err
    code, result = cli_json("validate", path)
    assert code == 1 and [(p["code"], p["tensor"]) for p in result["problems"]] == [
        ("out_of_bounds", "far"), ("unknown_type", "new")]
    # An unknown type alone: shown and identified (a newer llama.cpp's file), not read.
    path.write_bytes(_pad(_prefix(2, 0) + _tensor("ok", [32], 0, 0) + _tensor("new", [32], 99, 128), 256))
    code, data = cli_json("inspect", path)
    assert code == 0 and [r["dtype"] for r in data["tensors"]] == ["F32", "unknown_99"]
    assert run_cli("id", path)[0] == 0
    for args in (("stats", path), ("convert", path, tmp_path / "o.safetensors")):
        code, _, err = run_cli(*args)
        assert code == 2 and "unknown GGML type 99" in err, err
