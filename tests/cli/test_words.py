"""Errors in a user's words: a text file is "not a safetensors file", a file cut short is
"truncated: N bytes of tensor data missing", a filter matching nothing says so (exit 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from .conftest import run_cli

TEXT = b"# Example README\nhello world, this is a text file\n"


def cut(src: Path, dst: Path, size: int) -> Path:
    with open(src, "rb") as f:
        dst.write_bytes(f.read(size))
    return dst


@pytest.mark.parametrize("command", [["inspect"], ["id"], ["stats"], ["id", "--content"], ["view", "--export", "r.html"]])
def test_a_text_file_is_not_a_safetensors_file(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(TEXT)
    name, *rest = command
    r = run_cli(name, path, *[str(tmp_path / a) if a.endswith(".html") else a for a in rest])
    assert r.code == 2
    assert r.err == f'pysafetensors: error: {path}: not a safetensors file (it begins with the text "# Exampl", not a header length)\n'
    assert "header too large" not in r.err and "8031924" not in r.err


def test_a_truncated_file_says_how_much_is_missing(real_model: Path, tmp_path: Path) -> None:
    short = cut(real_model, tmp_path / "cut.safetensors", 50_000_000)
    r = run_cli("inspect", short)
    assert r.code == 2
    assert r.err == (f"pysafetensors: error: {short}: truncated: 40,868,376 bytes of tensor data missing "
                     "(expected 90,868,376 bytes, the file has 50,000,000)\n")
    r = run_cli("diff", real_model, short)
    assert r.code == 2 and "truncated: 40,868,376 bytes of tensor data missing" in r.err
    head = cut(real_model, tmp_path / "head.safetensors", 5000)
    r = run_cli("id", head)
    assert r.err == (f"pysafetensors: error: {head}: truncated: the header alone needs 11,416 bytes "
                     "(its length prefix declares 11,408; the file has 5,000)\n")


@pytest.mark.parametrize(("content", "says"), [
    (b"", "not a safetensors file (it is empty)"),
    (b"abc", "not a safetensors file (it has 3 bytes, fewer than the 8 of a header length)"),
    (b"GGUF\x03\x00\x00\x00" + bytes(16), "not a safetensors file (it begins with GGUF's magic: a GGUF file"),
    (b"PK\x03\x04" + bytes(60), "not a safetensors file (it is a zip archive, as PyTorch's .pt/.bin files are"),
    (b"\x80\x02}q\x00." + bytes(60), "not a safetensors file (it begins like a pickle, as older PyTorch files do"),
    (b"\x00\x00\x00\x00\x00\x00\x00\xf0" + bytes(60),
     "not a safetensors file (its first 8 bytes, read as a header length, declare 17,293,822,569,102,704,640 bytes"),
])
def test_other_files_say_what_they_seem_to_be(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(content)
    r = run_cli("inspect", path)  # a GGUF file is read by inspect: a GGUF header this short is not
    if content.startswith(b"GGUF"):
        r = run_cli("shard", path, tmp_path / "out")  # a safetensors-only command: the reader's words
        assert r.code == 2 and "GGUF file" in r.err
        return
    assert r.code == 2 and r.err.startswith(f"pysafetensors: error: {path}: {says}"), r.err


def test_trailing_bytes_are_named(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "t.safetensors"
    save_file({"a": np.zeros(2, np.float32)}, str(path))
    size = path.stat().st_size
    path.write_bytes(path.read_bytes() + b"\x00" * 1234)
    r = run_cli("inspect", path)
    assert r.err == (f"pysafetensors: error: {path}: 1,234 bytes after the last tensor "
                     f"(expected {size:,} bytes, the file has {size + 1234:,})\n")


def test_a_filter_that_matches_nothing_says_so(real_model: Path) -> None:
    r = run_cli("stats", real_model, "--filter", "decoder.*")
    assert (r.code, r.out, r.err) == (1, "", "pysafetensors: no tensor matches 'decoder.*'\n")
    r = run_cli("stats", real_model, "--filter", "x*", "--filter", "y*", "--json")
    assert r.code == 1 and r.err == "pysafetensors: no tensor matches 'x*' or 'y*'\n"
    assert '"tensors": []' in r.out  # the JSON still parses, empty
    ok = run_cli("stats", real_model, "--filter", "pooler.*")
    assert ok.code == 0 and ok.err == "" and "pooler.dense.bias" in ok.out
