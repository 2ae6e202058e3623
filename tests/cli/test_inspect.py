"""inspect: golden numbers for the real model, JSON keys, table, tree, filter, modelspec, sharded input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from pysafetensors.cli.inspect import render_inspect
from pysafetensors.tools.summary import summarize as compute_inspect

from .conftest import run_cli, sample_tensors

REAL_PARAMS = 22_713_728


def test_real_model_golden(real_model: Path) -> None:
    r = run_cli("inspect", real_model, "--json")
    assert r.code == 0
    data = json.loads(r.out)
    assert data["parameter_count"] == REAL_PARAMS
    assert data["tensor_count"] == 104
    assert data["file_size"] == 90_868_376 == real_model.stat().st_size
    assert data["header_size"] == 11_408
    assert data["parameters_by_dtype"] == {"F32": 22_713_216, "I64": 512}
    assert data["bytes_by_dtype"] == {"F32": 90_852_864, "I64": 4_096}
    assert data["metadata"] == {"format": "pt"}
    assert sum(t["nbytes"] for t in data["tensors"]) == data["file_size"] - 8 - data["header_size"]


def test_real_model_text(real_model: Path) -> None:
    r = run_cli("inspect", real_model)
    assert r.code == 0
    assert "parameters:  22,713,728 (22.7M)" in r.out
    assert "tensors:     104" in r.out
    assert "header size: 11,408 bytes" in r.out
    assert "  format: pt" in r.out


def test_json_keys(sample: Path) -> None:
    data = json.loads(run_cli("inspect", sample, "--json").out)
    for key in ("file_size", "header_size", "tensor_count", "parameter_count", "parameters_by_dtype", "metadata",
                "tensors", "bytes_by_dtype", "modelspec"):
        assert key in data
    row = data["tensors"][0]
    assert set(row) >= {"name", "dtype", "shape", "data_offsets", "nbytes"}


def test_counts_match_arrays(sample: Path) -> None:
    arrays = sample_tensors()
    r = compute_inspect(str(sample))
    assert r.tensor_count == len(arrays)
    assert r.parameter_count == sum(max(a.size, 1) for a in arrays.values())
    assert r.parameters_by_dtype["F64"] == 1  # the 0-rank tensor counts 1
    assert r.parameters_by_dtype["F4"] == 16 and r.bytes_by_dtype["F4"] == 8
    assert r.modelspec == {"modelspec.title": "demo", "modelspec.architecture": "toy"}
    assert [t.data_offsets[0] for t in r.tensors] == sorted(t.data_offsets[0] for t in r.tensors)


def test_modelspec_section_and_table(sample: Path) -> None:
    out = run_cli("inspect", sample, "--tensors").out
    assert "modelspec:\n  title: demo\n  architecture: toy" in out
    assert "format: pt" in out.split("modelspec:")[0]
    assert re.search(r"^encoder\.layer\.0\.weight +F32 +\[4, 8\] +\[\d+, \d+\] +128$", out, re.MULTILINE)


def test_tree_counts(sample: Path) -> None:
    r = compute_inspect(str(sample), tree=True)
    assert r.tree is not None and r.tree.parameters == r.parameter_count
    enc = next(c for c in r.tree.children if c.name == "encoder")
    assert enc.parameters == 32 + 8 + 9 and enc.tensors == 3
    text = render_inspect(r)
    assert "encoder/  49 params, 3 tensors" in text
    assert json.loads(render_inspect(r, "json"))["tree"]["children"][0]["name"]


def test_filter(sample: Path) -> None:
    r = run_cli("inspect", sample, "--filter", "encoder.*", "--filter", "scale", "--json")
    data = json.loads(r.out)
    assert {t["name"] for t in data["tensors"]} == {"encoder.layer.0.weight", "encoder.layer.0.bias",
                                                    "encoder.layer.1.weight", "scale"}
    assert data["tensor_count"] == 4 and data["total_tensor_count"] == 10
    assert "4 of 10 (filter: encoder.* scale)" in run_cli("inspect", sample, "--filter", "encoder.*",
                                                          "--filter", "scale").out


def test_no_metadata(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    p = tmp_path / "m.safetensors"
    save_file({"x": np.zeros(2, np.float32)}, str(p))
    assert "metadata:    (none)" in run_cli("inspect", p).out
    assert json.loads(run_cli("inspect", p, "--json").out)["metadata"] is None


def test_only_modelspec_metadata_has_no_empty_heading(tmp_path: Path) -> None:
    """Every key is a modelspec key: the modelspec card shows them, with no empty "metadata:" above;
    --json keeps them all in "metadata"."""
    from pysafetensors.numpy import save_file

    p = tmp_path / "m.safetensors"
    meta = {"modelspec.title": "t", "modelspec.architecture": "a"}
    save_file({"x": np.zeros(2, np.float32)}, str(p), metadata=meta)
    lines = run_cli("inspect", p).out.splitlines()
    assert not any(line.startswith("metadata:") for line in lines), lines
    assert lines[-3:] == ["modelspec:", "  title: t", "  architecture: a"]
    assert json.loads(run_cli("inspect", p, "--json").out)["metadata"] == meta
    save_file({"x": np.zeros(2, np.float32)}, str(p), metadata={})
    assert "metadata:    (empty)" in run_cli("inspect", p).out.splitlines()


def test_sharded_directory_input(sample: Path, tmp_path: Path) -> None:
    assert run_cli("shard", sample, tmp_path / "s", "--max-shard-size", "64B").code == 0
    one = json.loads(run_cli("inspect", sample, "--json").out)
    many = json.loads(run_cli("inspect", tmp_path / "s", "--json").out)
    assert many["parameter_count"] == one["parameter_count"]
    assert many["tensor_count"] == one["tensor_count"]
    assert len(many["files"]) > 1
    idx = json.loads(run_cli("inspect", tmp_path / "s" / "model.safetensors.index.json", "--json").out)
    assert idx["parameter_count"] == one["parameter_count"]


def test_sharded_metadata_is_the_index_and_disagreements_are_named(tmp_path: Path) -> None:
    from pysafetensors import safe_open
    from pysafetensors.numpy import save_sharded
    from pysafetensors.tools.metadata import edit_metadata

    arrays = {f"t{i}": np.full(64, i, np.float32) for i in range(4)}
    save_sharded(arrays, tmp_path, max_shard_size="600B", metadata={"author": "me"})
    shards = sorted(p.name for p in tmp_path.glob("*.safetensors"))
    assert len(shards) >= 2
    with safe_open(str(tmp_path), "np") as f:
        index_meta = f.metadata()
    data = json.loads(run_cli("inspect", tmp_path, "--json").out)
    assert data["metadata"] == index_meta and set(index_meta) == {"author", "total_size"}
    assert data["shard_metadata"] == [{"files": shards, "metadata": {"author": "me"}}]
    assert data["metadata_disagreements"] == []
    text = run_cli("inspect", tmp_path).out
    assert "metadata: (from the index)" in text and "disagree" not in text
    got = json.loads(run_cli("metadata", tmp_path / "model.safetensors.index.json", "get", "--json").out)
    assert got["metadata"] == index_meta and got["metadata_disagreements"] == []
    assert run_cli("metadata", tmp_path, "get", "total_size").out == index_meta["total_size"] + "\n"

    # One shard's header says otherwise: inspect and metadata get say where.
    edit_metadata(str(tmp_path / shards[-1]), "set", {"author": "someone else", "extra": "1"})
    data = json.loads(run_cli("inspect", tmp_path, "--json").out)
    assert data["metadata"] == index_meta  # still the index's
    assert [g["files"] for g in data["shard_metadata"]] == [shards[:-1], shards[-1:]]
    by_key = {d["key"]: d for d in data["metadata_disagreements"]}
    assert by_key["author"]["index"] == "me" and by_key["author"]["shards"][shards[-1]] == "someone else"
    assert by_key["extra"]["index"] is None and by_key["extra"]["shards"][shards[0]] is None
    text = run_cli("inspect", tmp_path).out
    assert f"! shard headers disagree on author: index 'me', {shards[0]} 'me'" in text
    assert f"{shards[-1]} 'someone else'" in text
    listing = run_cli("metadata", tmp_path, "get").out
    assert "author: me\n" in listing and "! shard headers disagree on extra:" in listing
    # Single files have no shard sections.
    single = json.loads(run_cli("inspect", tmp_path / shards[0], "--json").out)
    assert single["shard_metadata"] is None and single["metadata_disagreements"] is None
