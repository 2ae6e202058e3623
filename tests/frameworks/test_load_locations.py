"""numpy and torch ``load_file`` (and ``safe_open``) on a sharded directory, an index URL and a file URL.

The flax, tensorflow, paddle and mlx faces run the same checks in ``_fw_cases.FrameworkSuite``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import RangeServer

import pysafetensors.numpy as ps_numpy
from pysafetensors import safe_open

ARRAYS = {f"t{i}": np.arange(16, dtype=np.float32) * i for i in range(4)}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, RangeServer]]:
    out = tmp_path_factory.mktemp("locations") / "ckpt"
    ps_numpy.save_sharded(ARRAYS, out, max_shard_size=100)  # 64-byte tensors: one per shard
    ps_numpy.save_file(ARRAYS, str(out.parent / "single.safetensors"))
    files = {f"ckpt/{p.name}": p.read_bytes() for p in out.iterdir()}
    files["single.safetensors"] = (out.parent / "single.safetensors").read_bytes()
    with RangeServer(files) as server:
        yield out, server


def _locations(checkpoint: tuple[Path, RangeServer]) -> list[Any]:
    out, server = checkpoint
    return [out, str(out / "model.safetensors.index.json"), server.url("ckpt/model.safetensors.index.json"),
            server.url("single.safetensors")]


def test_numpy_load_file_everywhere(checkpoint: tuple[Path, RangeServer]) -> None:
    assert len(list(checkpoint[0].glob("*.safetensors"))) == 4
    for where in _locations(checkpoint):
        loaded = ps_numpy.load_file(where)
        assert list(loaded) == list(ARRAYS), where
        assert all(np.array_equal(loaded[k], v) for k, v in ARRAYS.items()), where


def test_torch_load_file_and_safe_open_everywhere(checkpoint: tuple[Path, RangeServer]) -> None:
    torch = pytest.importorskip("torch")
    import pysafetensors.torch as ps_torch

    for where in _locations(checkpoint):
        loaded = ps_torch.load_file(where)
        assert list(loaded) == list(ARRAYS), where
        assert all(torch.equal(loaded[k], torch.from_numpy(v)) for k, v in ARRAYS.items()), where
        with safe_open(where, "pt") as f:
            assert f.keys() == sorted(ARRAYS)
            assert torch.equal(f.get_slice("t3")[2:5], torch.from_numpy(ARRAYS["t3"][2:5]))


def test_torch_save_sharded_reads_back_through_index(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import pysafetensors.torch as ps_torch

    tensors = {k: torch.from_numpy(v.copy()) for k, v in ARRAYS.items()}
    index = ps_torch.save_sharded(tensors, tmp_path, max_shard_size=100)
    assert os.path.basename(index) == "model.safetensors.index.json"
    with safe_open(index, "pt") as f:
        assert all(torch.equal(f.get_tensor(k), t) for k, t in tensors.items())
