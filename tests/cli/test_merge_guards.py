"""merge refuses to overwrite its own input and says which tensors the index leaves out; shard
--force replaces a checkpoint through the staged, index-last publish."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.numpy import load_file, save_file, save_sharded

from .conftest import run_cli


def _checkpoint(directory: Path) -> Path:
    save_sharded({f"w{i}": np.full(100, i, np.float32) for i in range(4)}, directory, max_shard_size=1000)
    return directory / "model.safetensors.index.json"


@pytest.mark.parametrize("target", ["index", "shard", "link_to_shard", "single"])
def test_merge_refuses_to_overwrite_its_input(tmp_path: Path, target: str) -> None:
    index = _checkpoint(tmp_path / "ckpt")
    shard = tmp_path / "ckpt" / "model-00001-of-00002.safetensors"
    source: Path = index
    if target == "index":
        out = index
    elif target == "shard":
        out = shard
    elif target == "link_to_shard":
        out = tmp_path / "link.safetensors"
        out.symlink_to(shard)
    else:
        source = out = tmp_path / "one.safetensors"
        save_file({"a": np.ones(3, np.float32)}, out)
    before = {p: p.read_bytes() for p in (tmp_path / "ckpt").iterdir()}
    single = out.read_bytes() if target == "single" else None
    r = run_cli("merge", source, out)
    assert r.code == 2 and "is the input file" in r.err, r.err
    assert {p: p.read_bytes() for p in (tmp_path / "ckpt").iterdir()} == before
    if single is not None:
        assert out.read_bytes() == single
    if target == "link_to_shard":
        assert out.is_symlink()
    # Through the directory too, and a fresh output still works.
    assert run_cli("merge", tmp_path / "ckpt", shard).code == 2
    assert run_cli("merge", tmp_path / "ckpt", tmp_path / "merged.safetensors").code == 0


def test_merge_names_tensors_the_index_does_not_map(tmp_path: Path) -> None:
    index = _checkpoint(tmp_path)
    data = json.loads(index.read_text())
    del data["weight_map"]["w3"]  # still in shard 2, no longer in the checkpoint
    index.write_text(json.dumps(data))
    out = tmp_path / "merged.safetensors"
    r = run_cli("merge", index, out, "--json")
    assert r.code == 0
    assert "warning:" in r.err and "'w3'" in r.err and "not in the weight map" in r.err
    assert json.loads(r.out)["skipped"] and sorted(load_file(out)) == ["w0", "w1", "w2"]
    with pytest.warns(UserWarning, match="'w3'"):
        assert sorted(load_file(index)) == ["w0", "w1", "w2"]


def test_merge_refuses_duplicate_weight_map_keys(tmp_path: Path) -> None:
    index = _checkpoint(tmp_path)
    text = index.read_text().replace('"weight_map": {', '"weight_map": {\n    "w0": "model-00002-of-00002.safetensors",', 1)
    index.write_text(text)
    r = run_cli("merge", index, tmp_path / "merged.safetensors")
    assert r.code == 2 and "'w0' appears twice in the weight map" in r.err
    assert not (tmp_path / "merged.safetensors").exists()


def test_shard_force_replaces_a_checkpoint_and_validate_agrees(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _checkpoint(out)
    source = tmp_path / "src.safetensors"
    save_file({f"w{i}": np.full(100, 10 + i, np.float32) for i in range(4)}, source)
    assert run_cli("shard", source, out, "--max-shard-size", "1000").code == 2  # needs --force
    assert run_cli("shard", source, out, "--max-shard-size", "1000", "--force").code == 0
    assert load_file(out)["w3"][0] == 13
    assert sorted(os.listdir(out)) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                       "model.safetensors.index.json"]
    assert run_cli("validate", out).code == 0
