"""shard and merge: Hugging Face names and index, greedy split, round trip, upstream can read shards."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.numpy import load_file, save_file
from pysafetensors.tools.shard import shard_checkpoint

from .conftest import run_cli


def test_plan_follows_the_library(sample: Path, tmp_path: Path) -> None:
    # The CLI plans with pysafetensors.format.index (huggingface_hub's rule) in name order: an
    # oversized tensor gets a shard of its own ahead of the one being filled.
    from pysafetensors.format.index import plan_shards, shard_names
    from pysafetensors.io.registry import open_source
    from pysafetensors.reader import SafeFile

    f = SafeFile(open_source(str(sample)))
    nbytes = {t.name: t.nbytes for t in f.header.tensors}
    f.close()
    expected = plan_shards([(k, nbytes[k], None) for k in sorted(nbytes)], 100)
    r = shard_checkpoint(str(sample), str(tmp_path / "d"), "100B", dry_run=True)
    assert [s.name for s in r.shards] == shard_names(len(expected))
    assert [s.tensors for s in r.shards] == [len(g) for g in expected]
    assert [s.nbytes for s in r.shards] == [sum(nbytes[n] for n in g) for g in expected]
    assert len(expected) > 2


def test_shard_merge_round_trip(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    r = run_cli("shard", sample, out, "--max-shard-size", "100B", "--json")
    assert r.code == 0
    result = json.loads(r.out)
    n = len(result["shards"])
    assert n > 1
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
                           + ["model.safetensors.index.json"])
    text = (out / "model.safetensors.index.json").read_text()
    index = json.loads(text)
    assert text == json.dumps(index, indent=2, sort_keys=True) + "\n"
    assert list(index) == ["metadata", "weight_map"]
    assert index["metadata"].pop("pysafetensors.checkpoint_id")  # the save's id, in every shard too
    assert index["metadata"] == {"total_size": result["total_size"]}
    original = load_file(str(sample))
    assert set(index["weight_map"]) == set(original)
    for shard in {*index["weight_map"].values()}:
        part = load_file(str(out / shard))
        assert all(index["weight_map"][k] == shard for k in part)
    merged = tmp_path / "merged.safetensors"
    assert run_cli("merge", out / "model.safetensors.index.json", merged).code == 0
    assert merged.read_bytes() == sample.read_bytes()  # same tensors + metadata -> byte-identical


def test_upstream_reads_our_shards(tmp_path: Path) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    sample = tmp_path / "plain.safetensors"  # dtypes upstream's numpy face can load
    save_file({f"t{i}": np.arange(i * 10, dtype=np.float32 if i % 2 else np.int64) for i in range(6)}, str(sample),
              metadata={"format": "np"})
    shard_checkpoint(str(sample), str(tmp_path / "s"), 100)
    index = json.loads((tmp_path / "s" / "model.safetensors.index.json").read_text())
    ours = load_file(str(sample))
    for shard in set(index["weight_map"].values()):
        for k, v in safetensors_numpy.load_file(str(tmp_path / "s" / shard)).items():
            assert np.array_equal(v, ours[k], equal_nan=True)


def test_single_shard_has_no_index(sample: Path, tmp_path: Path) -> None:
    r = shard_checkpoint(str(sample), str(tmp_path / "one"), "5GB")
    assert r.index is None and [s.name for s in r.shards] == ["model.safetensors"]
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["model.safetensors"]
    assert (tmp_path / "one" / "model.safetensors").read_bytes() == sample.read_bytes()


def test_existing_output_needs_force(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    assert run_cli("shard", sample, out, "--max-shard-size", "100B").code == 0
    r = run_cli("shard", sample, out, "--max-shard-size", "200B")
    assert r.code == 2 and "--force" in r.err
    assert run_cli("shard", sample, out, "--max-shard-size", "5GB", "--force").code == 0
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]  # stale shards and index removed


def test_force_never_replaces_a_fifo(sample: Path, tmp_path: Path) -> None:
    # --force replaces an earlier save's files, not a FIFO that carries a shard's name.
    out = tmp_path / "s"
    assert run_cli("shard", sample, out, "--max-shard-size", "100B").code == 0
    shard = next(out.glob("model-00001-of-*.safetensors"))
    shard.unlink()
    os.mkfifo(shard)
    before = sorted((p.name, p.stat().st_mode) for p in out.iterdir())
    r = run_cli("shard", sample, out, "--max-shard-size", "100B", "--force")
    assert r.code == 2 and r.out == ""
    assert r.err.count("\n") == 1 and f"{shard}: it is a FIFO, not a regular file" in r.err
    assert sorted((p.name, p.stat().st_mode) for p in out.iterdir()) == before
    assert stat.S_ISFIFO(shard.lstat().st_mode)


def test_dry_run_and_bad_size(sample: Path, tmp_path: Path) -> None:
    r = run_cli("shard", sample, tmp_path / "d", "--max-shard-size", "100B", "--dry-run")
    assert r.code == 0 and r.out.startswith("would write") and not (tmp_path / "d").exists()
    assert run_cli("shard", sample, tmp_path / "d", "--max-shard-size", "lots").code == 2


def test_merge_rejects_unsafe_index(tmp_path: Path) -> None:
    save_file({"a": np.zeros(1, np.float32)}, str(tmp_path / "model-00001-of-00001.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 4}, "weight_map": {"a": "../model-00001-of-00001.safetensors"}}))
    r = run_cli("merge", tmp_path, tmp_path / "out.safetensors")
    assert r.code == 2 and "unsafe" in r.err


def test_merge_missing_tensor_in_shard(tmp_path: Path) -> None:
    save_file({"a": np.zeros(1, np.float32)}, str(tmp_path / "model-00001-of-00001.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00001.safetensors", "b": "model-00001-of-00001.safetensors"}}))
    r = run_cli("merge", tmp_path, tmp_path / "out.safetensors")
    assert r.code == 2 and "b" in r.err and not (tmp_path / "out.safetensors").exists()


def test_real_model_shard_merge(real_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    r = shard_checkpoint(str(real_model), str(out), "30MB")
    assert len(r.shards) == 3 and r.total_size == 90_856_960  # the embedding (46.9 MB) alone, then greedy
    assert all(s.nbytes <= 30 * 10**6 for s in r.shards if s.tensors > 1)
    inspect = json.loads(run_cli("inspect", out, "--json").out)
    assert inspect["parameter_count"] == 22_713_728
    merged = tmp_path / "m.safetensors"
    assert run_cli("merge", out, merged).code == 0
    assert run_cli("diff", real_model, merged).code == 0
    assert merged.read_bytes() == real_model.read_bytes()
