"""numpy .npy/.npz sources: numpy's own readers, allow_pickle=False, object arrays refused."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pysafetensors.convert import convert_file
from pysafetensors.errors import CorruptCheckpoint, UnsafePickle, UnsupportedDtype

from .convert_helpers import read_safetensors


def expect(path, arrays):
    got, meta = read_safetensors(str(path))
    assert set(got) == set(arrays)
    for name, a in arrays.items():
        _code, shape, raw = got[name]
        assert shape == a.shape
        assert raw == np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes(), name
    return meta


def sample_arrays():
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "fortran": np.asfortranarray(rng.standard_normal((3, 5))),
        "big_endian": np.arange(6, dtype=">i4").reshape(2, 3),
        "bool": rng.random(7) > 0.5,
        "scalar": np.array(3.5, dtype=np.float16),
        "empty": np.zeros((0, 3), dtype=np.uint64),
        "c64": (rng.standard_normal(3) + 1j).astype(np.complex64),
        "dotted.name": np.ones(2, dtype=np.int8),
    }


@pytest.mark.parametrize("compressed", [False, True])
def test_npz(tmp_path, compressed):
    arrays = sample_arrays()
    (np.savez_compressed if compressed else np.savez)(tmp_path / "a.npz", **arrays)
    report = convert_file(tmp_path / "a.npz", tmp_path / "a.safetensors")
    assert report.verified and report.source_kind == "npz" and report.tensors == len(arrays)
    assert expect(tmp_path / "a.safetensors", arrays) == {}


def test_npy_including_fortran_and_big_endian(tmp_path):
    for a in sample_arrays().values():
        np.save(tmp_path / "x.npy", a)
        report = convert_file(tmp_path / "x.npy", tmp_path / "x.safetensors")
        assert report.source_kind == "npy"
        expect(tmp_path / "x.safetensors", {"tensor": a})


def test_npz_subtree_key(tmp_path):
    np.savez(tmp_path / "a.npz", w=np.ones(2, np.float32), v=np.zeros(3, np.int64))
    convert_file(tmp_path / "a.npz", tmp_path / "w.safetensors", key="w")
    expect(tmp_path / "w.safetensors", {"w": np.ones(2, np.float32)})


def test_ml_dtypes_bfloat16_is_unsupported_in_npy(tmp_path):
    # numpy saves ml_dtypes arrays as opaque void records: there is no dtype to recover.
    np.save(tmp_path / "b.npy", np.ones(3, dtype=ml_dtypes.bfloat16))
    with pytest.raises(UnsupportedDtype):
        convert_file(tmp_path / "b.npy", tmp_path / "b.safetensors")


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    obj = np.array([Evil(), 1], dtype=object)
    np.save(tmp_path / "o.npy", obj, allow_pickle=True)
    with pytest.raises(UnsafePickle, match="object array"):
        convert_file(tmp_path / "o.npy", tmp_path / "o.safetensors")
    np.savez(tmp_path / "o.npz", good=np.ones(2), bad=obj)
    with pytest.raises(UnsafePickle, match="object array"):
        convert_file(tmp_path / "o.npz", tmp_path / "o.safetensors")
    assert not marker.exists()


def test_unsupported_numpy_dtype(tmp_path):
    np.save(tmp_path / "c.npy", np.ones(2, dtype=np.complex128))
    with pytest.raises(UnsupportedDtype):
        convert_file(tmp_path / "c.npy", tmp_path / "c.safetensors")


def test_truncated_numpy_files(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(1000, dtype=np.float64))
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:500])
    with pytest.raises(CorruptCheckpoint):
        convert_file(tmp_path / "cut.npy", tmp_path / "out.safetensors")
    np.savez(tmp_path / "x.npz", a=np.arange(1000.0))
    data = (tmp_path / "x.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptCheckpoint, match="truncated"):
        convert_file(tmp_path / "cut.npz", tmp_path / "out.safetensors")
