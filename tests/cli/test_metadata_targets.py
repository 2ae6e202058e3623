"""metadata set/unset: read-only targets, symbolic and hard links (one rule for in-place and
rewrite edits), duplicate keys, and errors that name the file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.numpy import save_file

from .conftest import run_cli

# A short edit fits the header space (in place); a long one grows it (rewrite).
EDITS = {"short": ["unset", "modelspec.title"], "long": ["set", "note=" + "x" * 300]}


def _metadata(path: Path) -> dict[str, str]:
    raw = path.read_bytes()
    return json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")]).get("__metadata__", {})


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    path = tmp_path / "blobs" / "abc123"
    path.parent.mkdir()
    save_file({"w": np.arange(6, dtype=np.float32)}, str(path), metadata={"format": "pt", "modelspec.title": "t"})
    return path


def _expect_mode(r_out: str, kind: str) -> None:
    assert json.loads(r_out)["mode"] == ("in-place" if kind == "short" else "rewrite")


@pytest.mark.parametrize("kind", EDITS)
def test_read_only_refused_unless_force(blob: Path, kind: str) -> None:
    os.chmod(blob, 0o444)
    before, ino = blob.read_bytes(), blob.stat().st_ino
    r = run_cli("metadata", blob, *EDITS[kind])
    assert r.code == 2 and "read-only" in r.err and "--force" in r.err and r.err.count("\n") == 1
    assert blob.read_bytes() == before
    r = run_cli("metadata", blob, *EDITS[kind], "--force", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["mode"] == "rewrite"  # never opened for writing: replaced by rename
    assert blob.stat().st_ino != ino and stat.S_IMODE(blob.stat().st_mode) == 0o444
    assert _metadata(blob) != json.loads(before[8 : 8 + int.from_bytes(before[:8], "little")])["__metadata__"]


@pytest.mark.parametrize("kind", EDITS)
def test_symlink_refused_without_follow_or_no_follow(blob: Path, tmp_path: Path, kind: str) -> None:
    link = tmp_path / "model.safetensors"
    link.symlink_to(blob)
    before = blob.read_bytes()
    for extra in ([], ["--dry-run"]):
        r = run_cli("metadata", link, *EDITS[kind], *extra)
        assert r.code == 2 and "symbolic link" in r.err and "--follow" in r.err and "--no-follow" in r.err
    assert blob.read_bytes() == before and link.is_symlink()


@pytest.mark.parametrize("kind", EDITS)
def test_follow_edits_the_linked_file(blob: Path, tmp_path: Path, kind: str) -> None:
    link, other = tmp_path / "model.safetensors", tmp_path / "other.safetensors"
    link.symlink_to(blob)
    other.symlink_to(blob)
    r = run_cli("metadata", link, *EDITS[kind], "--follow", "--json")
    assert r.code == 0, r.err
    _expect_mode(r.out, kind)
    assert json.loads(r.out)["target"] == str(blob)
    assert link.is_symlink() and os.readlink(link) == str(blob)
    assert _metadata(blob) == _metadata(link) == _metadata(other) != {"format": "pt", "modelspec.title": "t"}
    assert run_cli("validate", blob).code == 0


@pytest.mark.parametrize("kind", EDITS)
def test_no_follow_replaces_the_link_with_an_edited_copy(blob: Path, tmp_path: Path, kind: str) -> None:
    link = tmp_path / "model.safetensors"
    link.symlink_to(blob)
    before = blob.read_bytes()
    r = run_cli("metadata", link, *EDITS[kind], "--no-follow", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["mode"] == "rewrite"
    assert not link.is_symlink() and link.is_file()
    assert blob.read_bytes() == before  # the shared blob is untouched
    assert _metadata(link) != _metadata(blob)
    assert run_cli("diff", link, blob, "--values", "--json").code == 1  # metadata only
    values = json.loads(run_cli("diff", link, blob, "--values", "--json").out)["values"]
    assert not any(v["differing"] for v in values)


def test_hard_links(blob: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin.safetensors"
    os.link(blob, twin)
    before = blob.read_bytes()
    r = run_cli("metadata", twin, *EDITS["short"])
    assert r.code == 2 and "hard links" in r.err and blob.read_bytes() == before
    r = run_cli("metadata", twin, *EDITS["long"], "--follow")  # would detach twin from blob
    assert r.code == 2 and "in place" in r.err and blob.read_bytes() == before
    assert run_cli("metadata", twin, *EDITS["short"], "--follow").code == 0
    assert _metadata(blob) == _metadata(twin) == {"format": "pt"} and twin.stat().st_nlink == 2
    assert run_cli("metadata", twin, *EDITS["long"], "--no-follow").code == 0
    assert twin.stat().st_nlink == 1 and "note" in _metadata(twin) and "note" not in _metadata(blob)


def test_read_only_output_needs_force(blob: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.safetensors"
    out.write_bytes(b"old")
    os.chmod(out, 0o444)
    assert run_cli("metadata", blob, "set", "k=v", "--output", out).code == 2 and out.read_bytes() == b"old"
    assert run_cli("metadata", blob, "set", "k=v", "--output", out, "--force").code == 0
    assert _metadata(out)["k"] == "v"


def test_from_json_duplicate_key_is_refused(blob: Path, tmp_path: Path) -> None:
    meta = tmp_path / "meta.json"
    meta.write_text('{"author": "a", "license": "mit", "author": "b"}')
    before = blob.read_bytes()
    r = run_cli("metadata", blob, "set", "--from-json", meta)
    assert r.code == 2 and r.err.count("\n") == 1
    assert "'author' appears twice" in r.err and str(meta) in r.err
    r = run_cli("metadata", blob, "set", "k=1", "k=2")
    assert r.code == 2 and "'k' is given twice" in r.err
    assert blob.read_bytes() == before


def test_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    for args in (["get"], ["get", "k"], ["set", "k=v"], ["unset", "k"], ["strip"]):
        r = run_cli("metadata", bad, *args)
        assert r.code == 2 and str(bad) in r.err and r.err.count("\n") == 1, args


def test_a_pipe_is_edited_only_with_output(blob: Path, tmp_path: Path) -> None:
    """/dev/stdin is a symbolic link to the pipe: the error says a pipe has no file to edit (not
    that a link needs --follow), and --output writes the edited copy."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}

    def run(*args: object) -> subprocess.CompletedProcess[bytes]:  # the file's bytes through a pipe
        return subprocess.run([sys.executable, "-m", "pysafetensors", "metadata", "/dev/stdin", *map(str, args)],
                              input=blob.read_bytes(), capture_output=True, env=env, timeout=120, check=False)

    for edit in (["set", "note=x"], ["unset", "format"], ["strip"]):
        p = run(*edit)
        assert p.returncode == 2 and p.stdout == b"", p.stderr
        assert p.stderr == (b"pysafetensors: error: /dev/stdin is a pipe (or another stream), not a file: it cannot "
                            b"be edited in place; write the result with --output FILE or URL\n")
    out = tmp_path / "edited.safetensors"
    p = run("set", "note=x", "--output", out)
    assert p.returncode == 0, p.stderr
    assert _metadata(out) == {"format": "pt", "modelspec.title": "t", "note": "x"}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run_cli("metadata", fifo, "set", "note=x")
    assert r.code == 2 and f"{fifo} is a pipe (or another stream), not a file" in r.err
