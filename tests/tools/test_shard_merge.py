"""tools.shard and tools.merge called directly: the shard plan, what is written (read back by
upstream safetensors), the guards on outputs, and merge as shard's inverse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _helpers import count_name_checks

from pysafetensors.errors import InvalidIndex, WriteError
from pysafetensors.numpy import save_file
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.merge import merge_checkpoint, refuse_own_input
from pysafetensors.tools.shard import existing_shards, shard_checkpoint, writer_order

upstream = pytest.importorskip("safetensors.numpy")

#: five tensors of 400 bytes each (100 float32)
ARRAYS = {f"layer.{i}.w": np.arange(100, dtype=np.float32) + i for i in range(5)}
META = {"format": "np", "note": "kept"}


@pytest.fixture
def single(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    save_file(ARRAYS, str(path), metadata=META)
    return path


def _read_all(directory: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for shard in sorted(directory.glob("*.safetensors")):
        out.update(upstream.load_file(str(shard)))
    return out


def test_shards_hold_every_tensor_within_the_limit(single: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = shard_checkpoint(single, out, max_shard_size=800)
    assert result.total_size == 2000 and result.max_shard_size == 800 and not result.dry_run
    assert [s.nbytes for s in result.shards] == [800, 800, 400]
    assert [s.tensors for s in result.shards] == [2, 2, 1]
    names = [s.name for s in result.shards]
    assert names == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "model.safetensors.index.json"])
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index["metadata"]["total_size"] == 2000  # the index's metadata: sizes, never the source's keys
    assert "note" not in index["metadata"]
    assert set(index["weight_map"]) == set(ARRAYS) and set(index["weight_map"].values()) == set(names)
    got = _read_all(out)
    assert sorted(got) == sorted(ARRAYS)
    for name, value in ARRAYS.items():
        np.testing.assert_array_equal(got[name], value)
    from safetensors import safe_open

    ids = {index["metadata"]["pysafetensors.checkpoint_id"]}
    for name in names:  # each shard keeps the source's header metadata, and one id ties the set together
        with safe_open(str(out / name), "np") as f:
            meta = f.metadata()
        ids.add(meta.pop("pysafetensors.checkpoint_id"))
        assert meta == META
    assert len(ids) == 1


def test_one_shard_when_everything_fits_has_no_index(single: Path, tmp_path: Path) -> None:
    result = shard_checkpoint(single, tmp_path / "out", max_shard_size="1MB")
    assert result.index is None and [s.name for s in result.shards] == ["model.safetensors"]
    assert (tmp_path / "out" / "model.safetensors").read_bytes() == single.read_bytes()


@pytest.mark.parametrize("limit", [800, "1MB"])
def test_sharding_checks_the_names_once(single: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        limit: int | str) -> None:
    calls = count_name_checks(monkeypatch)
    result = shard_checkpoint(single, tmp_path / "out", max_shard_size=limit)
    assert len(result.shards) == (3 if limit == 800 else 1)
    assert len(calls) == 1


def test_a_dry_run_plans_and_writes_nothing(single: Path, tmp_path: Path) -> None:
    result = shard_checkpoint(single, tmp_path / "out", max_shard_size=800, dry_run=True)
    assert result.dry_run and len(result.shards) == 3 and result.index is not None
    assert not (tmp_path / "out").exists()


def test_existing_shards_are_replaced_only_with_force(single: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shard_checkpoint(single, out, max_shard_size=800)
    with pytest.raises(InvalidIndex, match="use --force"):
        shard_checkpoint(single, out, max_shard_size=800)
    result = shard_checkpoint(single, out, max_shard_size=1200, force=True)
    assert len(result.shards) == 2
    assert sorted(_read_all(out)) == sorted(ARRAYS)


def test_sharding_into_the_inputs_own_directory_is_refused(single: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shard_checkpoint(single, out, max_shard_size=800)
    index = out / "model.safetensors.index.json"
    with pytest.raises(InvalidIndex, match="holds the input checkpoint"):
        shard_checkpoint(index, out, max_shard_size=1200, force=True)


def test_existing_shards_names_only_this_prefixs_files() -> None:
    names = ["model-00001-of-00002.safetensors", "model.safetensors.index.json", "model.safetensors",
             "other-00001-of-00002.safetensors", "README.md", "model-1-of-2.safetensors"]
    assert existing_shards(names) == ["model-00001-of-00002.safetensors", "model.safetensors",
                                      "model.safetensors.index.json"]
    assert existing_shards(names, "other") == ["other-00001-of-00002.safetensors"]


def test_writer_order_is_each_files_layout_order(single: Path) -> None:
    with open_checkpoint(single) as ckpt:
        order = writer_order(ckpt, [["layer.3.w", "layer.1.w"], ["layer.0.w"]])
    assert sorted(order[:2]) == ["layer.1.w", "layer.3.w"] and order[2:] == ["layer.0.w"]


def test_merge_inverts_shard(single: Path, tmp_path: Path) -> None:
    shard_checkpoint(single, tmp_path / "out", max_shard_size=800)
    merged = tmp_path / "merged.safetensors"
    result = merge_checkpoint(tmp_path / "out" / "model.safetensors.index.json", merged)
    assert result.tensor_count == 5 and result.total_size == 2000 and result.skipped == []
    assert result.shards == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    got = upstream.load_file(str(merged))
    assert sorted(got) == sorted(ARRAYS)
    for name, value in ARRAYS.items():
        np.testing.assert_array_equal(got[name], value)


def test_merge_of_a_directory_equals_merge_of_its_index(single: Path, tmp_path: Path) -> None:
    shard_checkpoint(single, tmp_path / "out", max_shard_size=800)
    merge_checkpoint(tmp_path / "out", tmp_path / "a.safetensors")
    merge_checkpoint(tmp_path / "out" / "model.safetensors.index.json", tmp_path / "b.safetensors")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()


def test_merge_refuses_to_overwrite_its_input(single: Path, tmp_path: Path) -> None:
    before = single.read_bytes()
    with pytest.raises(WriteError, match="is the input file"):
        merge_checkpoint(single, single)
    link = tmp_path / "link.safetensors"
    link.symlink_to(single)
    with open_checkpoint(single) as ckpt:
        with pytest.raises(WriteError, match="is the input file"):
            refuse_own_input(ckpt, str(link))
        refuse_own_input(ckpt, str(tmp_path / "elsewhere.safetensors"))  # another path: allowed
    assert single.read_bytes() == before
