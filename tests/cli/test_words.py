"""Errors and numbers in a user's words: a text file is "not a safetensors file", a file cut short is
"truncated: N bytes of tensor data missing", a filter matching nothing says so (exit 1), sizes have
one format (decimal units, as the Hub's), counts are pluralised, and no output nests parentheses."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors.cli._common import fmt_bytes, fmt_size, progress

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


@pytest.mark.parametrize(("n", "text"), [
    (0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (1049, "1.0 kB"), (1050, "1.1 kB"), (1250, "1.3 kB"),
    (11_408, "11.4 kB"), (999_949, "999.9 kB"), (999_950, "1.0 MB"), (90_868_376, "90.9 MB"),
    (30_000_000, "30.0 MB"), (5 * 10**9, "5.0 GB"), (2**40, "1.1 TB"), (5 * 10**15, "5.0 PB"), (10**18, "1000.0 PB"),
])
def test_one_size_format(n: int, text: str) -> None:
    assert fmt_size(n) == text
    assert fmt_bytes(n) == (f"{n:,} bytes ({text})" if n >= 1000 else f"{n:,} bytes")
    assert fmt_bytes(1) == "1 byte"


def test_progress_bars_count_in_decimal_units(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    bar = progress(90_868_376, "comparing", True)
    bar.update(90_868_376)
    bar.refresh()
    shown = term.getvalue()
    bar.close()
    assert "90.9M/90.9M" in shown and "86.7M" not in shown, shown


def _depth(line: str) -> int:
    deepest = depth = 0
    for c in line:
        depth += {"(": 1, ")": -1}.get(c, 0)
        deepest = max(deepest, depth)
    return deepest


def test_no_output_nests_parentheses_or_says_1_tensors(real_model: Path, tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    one = tmp_path / "one.safetensors"
    save_file({"w": np.zeros(1, np.float32)}, str(one))
    runs: list[Any] = [
        run_cli("inspect", real_model), run_cli("inspect", one, "--tree"), run_cli("validate", one),
        run_cli("shard", real_model, tmp_path / "shards", "--max-shard-size", "30MB"),
        run_cli("merge", tmp_path / "shards", tmp_path / "merged.safetensors"),
        run_cli("view", one, "--export", tmp_path / "r.html"), run_cli("diff", real_model, one),
        run_cli("id", one, "--tensors"),
    ]
    for r in runs:
        assert r.code in (0, 1), r.err
        for line in r.out.splitlines():
            assert _depth(line) <= 1, line
            assert not re.search(r"(?<![\d,.])1 (tensors|params|shards|bytes|problems)\b", line), line
    assert "wrote 3 shards to" in runs[3].out
    assert "w  F32 [1]  1 param" in runs[1].out and "(1 tensor," in runs[2].out
