"""metadata get/set/unset/strip: in place vs rewrite, --dry-run, --output, string-only values, safety."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.errors import WriteError
from pysafetensors.io.sinks import AtomicFileSink
from pysafetensors.numpy import load_file, save_file
from pysafetensors.tools.metadata import edit_metadata as compute_metadata

from .conftest import SAMPLE_METADATA, run_cli


def _header(path: Path) -> tuple[int, dict]:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return n, json.loads(raw[8 : 8 + n])


def _data(path: Path) -> bytes:
    raw = path.read_bytes()
    return raw[8 + int.from_bytes(raw[:8], "little") :]


def test_get(sample: Path) -> None:
    r = run_cli("metadata", sample, "get")
    assert r.code == 0 and r.out == "".join(f"{k}: {v}\n" for k, v in SAMPLE_METADATA.items())
    assert run_cli("metadata", sample, "get", "format").out == "pt\n"
    missing = run_cli("metadata", sample, "get", "nope")
    assert missing.code == 1 and "no metadata key 'nope'" in missing.err
    assert json.loads(run_cli("metadata", sample, "get", "--json").out)["metadata"] == SAMPLE_METADATA


def test_set_grows_header_rewrites_and_keeps_tensors(sample: Path) -> None:
    before = load_file(str(sample))
    data = _data(sample)
    r = run_cli("metadata", sample, "set", "author=me", "note=a=b", "--json")
    assert r.code == 0
    out = json.loads(r.out)
    assert out["mode"] == "rewrite" and out["metadata"] == {**SAMPLE_METADATA, "author": "me", "note": "a=b"}
    _, header = _header(sample)
    assert header["__metadata__"]["note"] == "a=b"
    assert _data(sample) == data  # tensor bytes untouched
    after = load_file(str(sample))
    assert all(np.array_equal(before[k], after[k], equal_nan=True) for k in before)
    assert run_cli("validate", sample).code == 0


def test_shrinking_edit_is_in_place_with_same_offsets(sample: Path) -> None:
    size = sample.stat().st_size
    n_before, _ = _header(sample)
    ino = sample.stat().st_ino
    r = compute_metadata(str(sample), "unset", keys=["modelspec.architecture"])
    assert r.mode == "in-place"
    assert sample.stat().st_size == size and sample.stat().st_ino == ino  # same file, not a rename
    n_after, header = _header(sample)
    assert n_after == n_before  # the data offset did not move
    assert "modelspec.architecture" not in header["__metadata__"]
    raw = sample.read_bytes()
    assert raw[8 : 8 + n_after].rstrip(b" ").endswith(b"}")  # padded with spaces
    assert run_cli("validate", sample).code == 0


def test_strip_and_dry_run(sample: Path) -> None:
    original = sample.read_bytes()
    r = run_cli("metadata", sample, "strip", "--dry-run")
    assert r.code == 0 and r.out.startswith("would write") and sample.read_bytes() == original
    assert run_cli("metadata", sample, "strip").code == 0
    assert "__metadata__" not in _header(sample)[1]
    assert run_cli("metadata", sample, "get").out == "(no metadata)\n"


def test_output_leaves_the_original(sample: Path, tmp_path: Path) -> None:
    original = sample.read_bytes()
    out = tmp_path / "edited.safetensors"
    r = run_cli("metadata", sample, "set", "x=1", "--output", out)
    assert r.code == 0 and sample.read_bytes() == original
    assert _header(out)[1]["__metadata__"]["x"] == "1"
    assert _data(out) == _data(sample)


def test_from_json_requires_strings(sample: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"a": "1", "b": "two"}))
    assert run_cli("metadata", sample, "set", "--from-json", good, "c=3").code == 0
    assert _header(sample)[1]["__metadata__"]["b"] == "two"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"n": 3, "ok": "x"}))
    original = sample.read_bytes()
    r = run_cli("metadata", sample, "set", "--from-json", bad)
    assert r.code == 2 and "values must be strings" in r.err and "'n' is 3" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert sample.read_bytes() == original


def test_usage_errors(sample: Path) -> None:
    assert run_cli("metadata", sample, "set").code == 2
    assert run_cli("metadata", sample, "set", "novalue").code == 2
    assert run_cli("metadata", sample).code == 2
    # Exit 1 is reserved for `get` of a missing key (a finding); unset of one is an error.
    original = sample.read_bytes()
    r = run_cli("metadata", sample, "unset", "nope")
    assert r.code == 2 and r.err.strip() == f"pysafetensors: error: {sample}: no metadata key 'nope' to unset"
    assert sample.read_bytes() == original


def test_unchanged_writes_nothing(sample: Path) -> None:
    mtime = sample.stat().st_mtime_ns
    r = run_cli("metadata", sample, "set", "format=pt")
    assert r.code == 0 and "unchanged" in r.out and sample.stat().st_mtime_ns == mtime


def test_interrupted_rewrite_leaves_file_intact(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = sample.read_bytes()

    def boom(*args: object, **kwargs: object) -> None:
        raise WriteError("disk full (simulated)")

    monkeypatch.setattr(AtomicFileSink, "write", boom)  # the sink a local rewrite goes through
    r = run_cli("metadata", sample, "set", "grow=" + "x" * 100)
    assert r.code == 2 and "disk full" in r.err
    assert sample.read_bytes() == original
    assert [p.name for p in sample.parent.iterdir()] == [sample.name]  # no temp file left


def test_large_header_change_spanning_pages_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "big.safetensors"
    tensors = {f"layer.{i:04d}.weight": np.zeros(1, np.float32) for i in range(200)}  # ~12 KB header
    save_file(tensors, str(path), metadata={"k": "v" * 50})
    r = compute_metadata(str(path), "set", {"k": "short"})
    assert r.mode == "rewrite"  # shorter, but every tensor entry after it shifts: more than one page
    assert _header(path)[1]["__metadata__"] == {"k": "short"}
    r = compute_metadata(str(path), "set", {"k": "shore"})
    assert r.mode == "in-place"  # same length: one byte changes


def test_no_in_place_flag(sample: Path) -> None:
    ino = sample.stat().st_ino
    r = run_cli("metadata", sample, "unset", "format", "--no-in-place", "--json")
    assert json.loads(r.out)["mode"] == "rewrite"
    assert sample.stat().st_ino != ino
    assert os.path.getsize(sample) > 0 and run_cli("validate", sample).code == 0
