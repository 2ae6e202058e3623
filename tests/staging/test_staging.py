"""The staging pipeline (CPU destination: the same loop as CUDA) and safe_open's routing of device loads
through it."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from pysafetensors.reader import SafeFile

upstream_np = pytest.importorskip("safetensors.numpy")


@pytest.mark.parametrize("buffers,buffer_bytes", [(2, 100), (1, 7), (3, 4096), (2, 1 << 20)])
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_staging_pipeline_cpu_destination(tmp_path: Any, buffers: int, buffer_bytes: int, backend: str) -> None:
    torch = pytest.importorskip("torch")
    from pysafetensors.io.registry import open_source
    from pysafetensors.staging import StagingConfig, load_to_device
    from pysafetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    tensors = {
        "big": torch.randn(50, 40, generator=g),  # 8000 bytes: many ring turns per tensor
        "empty": torch.zeros(0, 3),
        "half": torch.randn(9, generator=g).to(torch.bfloat16),
        "ints": torch.arange(11, dtype=torch.int64),
        **{f"small{i:03d}": torch.full((i % 5 + 1,), float(i)) for i in range(120)},
    }
    path = os.path.join(tmp_path, "st.safetensors")
    save_file(tensors, path)
    f = SafeFile(open_source(path, backend))
    out = load_to_device(f, "cpu", config=StagingConfig(buffers=buffers, buffer_bytes=buffer_bytes), pin=False, threads=2)
    f.close()
    assert list(out) == f.names()
    for k, v in tensors.items():
        assert out[k].dtype == v.dtype and out[k].shape == v.shape
        assert torch.equal(out[k], v), k


def test_staging_rejects_an_empty_ring(tmp_path: Any) -> None:
    pytest.importorskip("torch")
    from pysafetensors.staging import StagingConfig, load_to_device

    path = os.path.join(tmp_path, "x.safetensors")
    upstream_np.save_file({"x": np.zeros(3, np.float32)}, path)
    with pytest.raises(ValueError):
        load_to_device(path, "cpu", config=StagingConfig(buffers=0))


def test_cuda_get_tensors_routes_through_staging(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from pysafetensors import safe_open, staging

    path = os.path.join(tmp_path, "c.safetensors")
    upstream_np.save_file({"x": np.zeros(3, np.float32)}, path)
    calls: list[tuple[str, Any]] = []

    def fake(file: Any, device: str, *, threads: Any = None) -> dict[str, Any]:
        calls.append((device, threads))
        return {"routed": file.names()}

    monkeypatch.setattr(staging, "load_to_device", fake)
    with safe_open(path, framework="pt", device="cuda:1") as f:
        assert f.get_tensors(threads=3) == {"routed": ["x"]}
    assert calls == [("cuda:1", 3)]
