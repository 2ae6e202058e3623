"""safe_open and _safe_open_handle: keys, metadata, closing, errors, frameworks and devices; compared with upstream."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors import SafetensorError, errors, safe_open

st = pytest.importorskip("safetensors")

BACKENDS = ["mmap", "pread"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_keys_offset_keys_metadata(sample: Path, backend: str) -> None:
    with safe_open(sample, "np", backend=backend) as f, st.safe_open(str(sample), "np") as g:
        assert f.keys() == ["a", "b", "c", "e"] == g.keys()
        assert f.offset_keys() == g.offset_keys() == ["c", "e", "b", "a"]  # U64, F64, F32, I16
        assert f.metadata() is None and g.metadata() is None
        tensors = f.get_tensors()
        assert list(tensors) == f.offset_keys()
        for k in f.keys():  # noqa: SIM118 - safe_open is not iterable
            assert np.array_equal(f.get_tensor(k), g.get_tensor(k))
            assert f.get_tensor(k).dtype == g.get_tensor(k).dtype


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_with_and_close(sample: Path, backend: str) -> None:
    f = safe_open(sample, "numpy", backend=backend)
    assert f.get_tensor("a").tolist() == [0, 1, 2, 3, 4]
    sl = f.get_slice("b")
    f.__exit__(None, None, None)
    for call in (lambda: f.get_tensor("a"), f.keys, f.offset_keys, f.metadata, lambda: f.get_slice("a"),
                 lambda: sl[0], f.get_tensors, f.__enter__):
        with pytest.raises(errors.FileClosed, match="^File is closed$"):
            call()
    f.close()  # idempotent


def test_metadata_present(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    pnp.save_file({"x": np.ones(2, dtype=np.float16)}, path, metadata={"format": "np", "k": "\u2603"})
    with safe_open(path, "np") as f:
        assert f.metadata() == {"format": "np", "k": "\u2603"}
    with st.safe_open(str(path), "np") as g:
        assert g.metadata() == {"format": "np", "k": "\u2603"}


def test_unknown_tensor(sample: Path) -> None:
    with safe_open(sample, "np") as f:
        for call in (f.get_tensor, f.get_slice):
            with pytest.raises(errors.TensorNotFound) as e:
                call("zz")
            assert str(e.value) == "File does not contain tensor zz"
            assert isinstance(e.value, KeyError)
    with st.safe_open(str(sample), "np") as g, pytest.raises(st.SafetensorError, match="^File does not contain tensor zz$"):
        g.get_tensor("zz")


def test_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.safetensors"
    for opener in (lambda: safe_open(missing, "np"), lambda: safe_open(str(missing), "np", backend="pread")):
        with pytest.raises(FileNotFoundError) as ours:
            opener()
        with pytest.raises(FileNotFoundError) as up:
            st.safe_open(str(missing), "np")
        assert str(ours.value) == str(up.value) == f"No such file or directory: {missing}"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"framework": "foo"},
        {"framework": "NP"},
        {"framework": "np", "device": "cuda"},
        {"framework": "np", "device": "cuda:1"},
        {"framework": "np", "device": 0},
        {"framework": "np", "device": "foo"},
        {"framework": "np", "device": -1},
        {"framework": "pt", "device": "foo"},
        {"framework": "pt", "device": "mps:1"},
        {"framework": "pt", "device": "cpu:0"},
        {"framework": "np", "backend": "x"},
    ],
)
def test_invalid_arguments_match_upstream(sample: Path, kwargs: dict[str, Any]) -> None:
    if kwargs["framework"] == "pt":
        pytest.importorskip("torch")
    with pytest.raises(SafetensorError) as ours:
        safe_open(sample, **kwargs)
    with pytest.raises(st.SafetensorError) as up:
        st.safe_open(str(sample), **kwargs)
    assert str(ours.value) == str(up.value)
    assert isinstance(ours.value, (errors.InvalidFramework, errors.InvalidDevice, errors.InvalidBackend))


@pytest.mark.parametrize("framework", ["pt", "torch", "pytorch", "np", "numpy"])
def test_framework_aliases(sample: Path, framework: str) -> None:
    if framework in ("pt", "torch", "pytorch"):
        pytest.importorskip("torch")
    with safe_open(sample, framework) as f:
        assert f.get_tensor("a").tolist() == [0, 1, 2, 3, 4]


def test_header_error_prefix_safe_open_vs_deserialize(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00[]")
    with pytest.raises(errors.InvalidHeaderJson, match="^Error while deserializing header: invalid JSON in header"):
        safe_open(bad, "np")
    with pytest.raises(errors.InvalidHeaderJson, match="^Error while deserializing: invalid JSON in header"):
        pysafetensors.deserialize(bad.read_bytes())


def test_safe_open_handle_file_object_and_bytesio(sample: Path) -> None:
    data = sample.read_bytes()
    with open(sample, "rb") as fh:
        f = pysafetensors._safe_open_handle(fh, "np")
        g = st._safe_open_handle(fh, "np")
        assert f.keys() == g.keys()
        for k in f.keys():  # noqa: SIM118 - safe_open is not iterable
            assert np.array_equal(f.get_tensor(k), g.get_tensor(k))
    f = pysafetensors._safe_open_handle(io.BytesIO(data), "np")
    assert f.offset_keys() == ["c", "e", "b", "a"]
    assert np.array_equal(f.get_slice("b")[1, :, ::2], np.arange(24, dtype=np.float32).reshape(2, 3, 4)[1, :, ::2])
    with pytest.raises(errors.InvalidFramework):
        pysafetensors._safe_open_handle(io.BytesIO(data), "foo")


def test_safe_open_bytes_and_pathlike(sample: Path) -> None:
    with safe_open(sample.read_bytes(), "np") as f:
        assert f.get_tensor("a").tolist() == [0, 1, 2, 3, 4]
    with safe_open(os.fspath(sample), "np") as f:
        assert f.keys() == ["a", "b", "c", "e"]


_DEVICES: list[Any] = ["cpu", "cuda", "cuda:0", "cuda:1", 0, 1, "mps", "mps:0", "mps:1", "npu", "npu:3", "xpu:0", "xla",
                       "mlu:1", "musa", "hpu:2", "CPU", "cuda:", "cuda:-1", ":0", "gpu", True, None, 1.5, "cpu:0",
                       "meta", -1, "cuda:01", "cuda:+1", " cuda", "xla:1", "mps:00", "mps:+0", "mps:01",
                       "npu:00", "cuda:1_0", "cuda:\u0661"]


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("device", _DEVICES, ids=repr)
def test_device_parsing_matches_upstream(sample: Path, framework: str, device: Any) -> None:
    if framework == "pt":
        pytest.importorskip("torch")
    try:
        st.safe_open(str(sample), framework, device=device)
    except st.SafetensorError as up:
        with pytest.raises(SafetensorError) as ours:
            safe_open(sample, framework, device=device)
        assert str(ours.value) == str(up)
    except ValueError:  # upstream leaks Rust's integer-parse errors; ours is an InvalidDevice (a ValueError)
        with pytest.raises(errors.InvalidDevice):
            safe_open(sample, framework, device=device)
    else:
        safe_open(sample, framework, device=device).close()
