"""tools.checkpoint: a Checkpoint is one TensorFile (a SafeFile, or a ShardedFile behind an
index) whose files the tools read through the CheckpointFiles protocol."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pysafetensors.cli.main import main as cli_main
from pysafetensors.errors import TensorNotFound
from pysafetensors.reader import SafeFile, TensorFile
from pysafetensors.sharded import ShardedFile
from pysafetensors.tools.checkpoint import open_checkpoint


@pytest.fixture
def single(tmp_path: Path) -> Path:
    from pysafetensors.numpy import save_file

    path = tmp_path / "m.safetensors"
    save_file({"a.w": np.zeros((2, 3), np.float32), "a.b": np.ones(3, np.float16), "c": np.zeros((), np.int64),
               "big": np.arange(1600, dtype=np.float32).reshape(40, 40)}, str(path), metadata={"format": "np"})
    return path


def test_a_single_file_is_its_own_one_part(single: Path) -> None:
    with open_checkpoint(single) as ckpt:
        f = ckpt.file
        assert isinstance(f, SafeFile) and isinstance(f, TensorFile)
        assert f.parts() == [f] and ckpt.files == [f]
        assert [t.name for t in f.part_tensors(0)] == f.names() == [t.name for t in ckpt.tensors]
        assert f.part_metadata(0) == {"format": "np"} == ckpt.header_metadata == ckpt.metadata
        assert f.part_of("c") == 0 and f.file_of("c") is f and ckpt.file_of("c") == "m.safetensors"
        with pytest.raises(TensorNotFound, match="does not contain tensor nope"):
            f.part_of("nope")
        with pytest.raises(TensorNotFound, match=f"^{single} does not contain tensor nope"):
            ckpt.file_of("nope")


def test_a_sharded_checkpoint_is_one_sharded_file(single: Path, tmp_path: Path) -> None:
    out = tmp_path / "shards"
    assert cli_main(["shard", str(single), str(out), "--max-shard-size", "4KB", "--quiet"]) == 0
    with open_checkpoint(out / "model.safetensors.index.json") as ckpt, open_checkpoint(single) as one:
        f = ckpt.file
        assert isinstance(f, ShardedFile) and isinstance(f, TensorFile)
        shards = f.shard_names
        assert len(shards) >= 2 and ckpt.file_names == shards
        assert [p.name for p in f.parts()] == [str(out / s) for s in shards]
        # each part's tensors, in order, are the checkpoint's; each tensor's part holds it
        held = [t.name for i in range(len(shards)) for t in f.part_tensors(i)]
        assert held == [t.name for t in ckpt.tensors] and sorted(held) == one.file.sorted_names()
        for name in held:
            i = f.part_of(name)
            assert name in f.parts()[i] and f.file_of(name) is f.parts()[i]
            assert ckpt.file_of(name) == shards[i]
            assert bytes(ckpt.data(name)[0 : ckpt.info(name).nbytes]) == bytes(one.data(name)[0 : one.info(name).nbytes])
        assert [f.part_metadata(i) for i in range(len(shards))] == [{"format": "np"}] * len(shards)
        assert ckpt.header_size == sum(p.header.header_size for p in f.parts())
