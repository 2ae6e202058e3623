"""An empty or short FIFO or character device as input is named for what it is (security round 3,
item 6): "a FIFO ... gave no bytes", "a character device", never "file is 0 bytes" or "the file is
empty" (which sent users looking for a truncated file)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import run_cli

SRC = Path(__file__).resolve().parents[2] / "src"
MISLEADING = ("file is 0 bytes", "the file is empty", "file is 3 bytes")


def _commands(path: Path, tmp: Path) -> list[list[object]]:
    return [["inspect", path], ["inspect", path, "--json"], ["id", path], ["validate", path], ["stats", path],
            ["diff", path, path], ["metadata", path, "get"], ["convert", path, tmp / "out.safetensors"],
            ["view", path, "--export", tmp / "page.html"]]


@pytest.mark.parametrize("device", ["fifo", "/dev/null"])
def test_an_empty_stream_is_named_for_what_it_is(device: str, tmp_path: Path) -> None:
    if device == "fifo":
        path = tmp_path / "in.fifo"
        os.mkfifo(path)
        kind = "a FIFO"
    else:
        path = Path(device)
        kind = "a character device"
    for args in _commands(path, tmp_path):
        r = run_cli(*args)
        if args[0] == "validate":  # the problem an empty file has (exit 1), in words naming the input
            assert r.code == 1 and r.err == "", (args, r.out, r.err)
            assert f"{path}: problem [header_too_small]: {kind}, not a regular file, and it gave no bytes" in r.out
            assert not any(m in r.out for m in MISLEADING), r.out
            continue
        assert r.code == 2 and r.out == "", (args, r.err)
        assert f"{path}: {kind}, not a regular file, and it gave no bytes" in r.err, (args, r.err)
        assert not any(m in r.err for m in MISLEADING) and r.err.count("\n") == 1, (args, r.err)
    assert not (tmp_path / "out.safetensors").exists() and not (tmp_path / "page.html").exists()


def test_a_short_fifo_says_where_it_ended(tmp_path: Path) -> None:
    path = tmp_path / "short.fifo"
    os.mkfifo(path)
    for args in (["inspect", path], ["validate", path, "--json"]):
        # A reader held open keeps the written bytes in the FIFO after its writer closes,
        # so the command reads exactly them, then the end: no race with a writer thread.
        keep = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            w = os.open(path, os.O_WRONLY)
            os.write(w, b"abc")
            os.close(w)
            r = run_cli(*args)
        finally:
            os.close(keep)
        said = r.out if args[0] == "validate" else r.err
        assert r.code == (1 if args[0] == "validate" else 2), (r.out, r.err)
        assert "a FIFO, not a regular file, and it ended after 3 bytes" in said, said
        assert not any(m in said for m in MISLEADING)


def test_an_empty_pipe_on_stdin(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for args in (["inspect", "/dev/stdin"], ["convert", "/dev/stdin", str(tmp_path / "o.safetensors")]):
        p = subprocess.run([sys.executable, "-m", "pysafetensors", *args], input=b"", capture_output=True, env=env,
                           timeout=120, check=False)
        assert p.returncode == 2 and b"/dev/stdin: a FIFO, not a regular file, and it gave no bytes" in p.stderr, p.stderr
