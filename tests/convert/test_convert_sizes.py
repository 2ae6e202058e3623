"""Sizes a source declares are checked against the bytes really there, before any output is
planned: truncated .npy/.npz files say 'truncated' (expected vs actual bytes) instead of
preallocating the declared size, and dimensions numpy or torch cannot have written get a
clear error instead of numpy's bare one."""

from __future__ import annotations

import io
import os
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

from pysafetensors.convert import convert_file
from pysafetensors.errors import CorruptCheckpoint

from .convert_helpers import replace_entry, torch_pickle


def npy_header(shape, descr="<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


@pytest.mark.parametrize("elements,label", [(1 << 29, "2 GB"), (1 << 40, "4 TB")])
def test_truncated_npy_says_truncated_before_preallocating(tmp_path, writer_calls, elements, label):
    src = tmp_path / "cut.npy"
    header = npy_header((elements,))
    src.write_bytes(header + b"\x00" * 16)
    with pytest.raises(CorruptCheckpoint, match="truncated") as info:
        convert_file(src, tmp_path / "out.safetensors")
    error = info.value
    assert error.expected == elements * 4 and error.actual == 16
    assert f"{elements * 4:,}" in str(error) and "16 bytes" in str(error)
    assert "space" not in str(error)
    assert writer_calls == []
    assert os.listdir(tmp_path) == ["cut.npy"]


def test_npy_one_byte_short(tmp_path, writer_calls):
    np.save(tmp_path / "x.npy", np.arange(10, dtype=np.float64))
    data = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(data[:-1])
    with pytest.raises(CorruptCheckpoint, match="truncated") as info:
        convert_file(tmp_path / "x.npy", tmp_path / "out.safetensors")
    assert (info.value.expected, info.value.actual) == (80, 79)
    assert writer_calls == []


def test_npz_member_shorter_than_its_header_says(tmp_path, writer_calls):
    src = tmp_path / "cut.npz"
    with zipfile.ZipFile(src, "w") as z:
        z.writestr("a.npy", npy_header((1 << 29,)) + b"\x00" * 16)
    with pytest.raises(CorruptCheckpoint, match="truncated") as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert "'a'" in str(info.value) and info.value.actual == 16
    assert writer_calls == []


@pytest.mark.parametrize("shape,match", [
    ((0, 2**63), r"outside \[0, 2\*\*63\)"),
    ((2**64 + 5, 0), r"outside \[0, 2\*\*63\)"),
    ((0, 2**62, 2**62), "2\\*\\*63-byte limit"),
    ((0, 2**63 - 1), "2\\*\\*63-byte limit"),
], ids=["2**63", "2**64+5", "product", "2**63-1"])
def test_npy_dimensions_numpy_cannot_have_written(tmp_path, writer_calls, shape, match):
    src = tmp_path / "huge.npy"
    src.write_bytes(npy_header(shape))
    with pytest.raises(CorruptCheckpoint, match=match) as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert list(shape) == info.value.shape
    assert writer_calls == []


def test_empty_npy_with_large_dims_converts(tmp_path):
    """Zero elements with dimensions numpy does allow: written without loading anything."""
    np.save(tmp_path / "e.npy", np.zeros((0, 2**40), dtype=np.float32))
    convert_file(tmp_path / "e.npy", tmp_path / "e.safetensors")
    from pysafetensors import safe_open

    with safe_open(tmp_path / "e.safetensors", "np") as f:
        assert f.get_slice("tensor").get_shape() == [0, 2**40]


torch = pytest.importorskip("torch")


class FakeStorage:
    pass


class FakeTensor:
    def __init__(self, storage, size, stride):
        self.args = (storage, 0, size, stride, False, OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


def forged(tmp_path, size, stride) -> str:
    base = tmp_path / "base.pt"
    torch.save({"w": torch.arange(4, dtype=torch.float32)}, base)
    storage = FakeStorage()
    data = torch_pickle({"w": FakeTensor(storage, size, stride)}, {id(storage): (torch.FloatStorage, "0", 4)})
    out = tmp_path / "forged.pt"
    replace_entry(str(base), str(out), "/data.pkl", data)
    return str(out)


@pytest.mark.parametrize("size,stride", [
    ((0, 2**63), (1, 1)),
    ((0, 2**64 + 1), (1, 1)),
    ((0, 3), (2**63, 1)),
], ids=["size-2**63", "size-2**64+1", "stride-2**63"])
def test_checkpoint_dimensions_torch_cannot_have_written(tmp_path, writer_calls, size, stride):
    src = forged(tmp_path, size, stride)
    with pytest.raises(CorruptCheckpoint, match="int64") as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert "Maximum allowed dimension" not in str(info.value)
    assert writer_calls == []


def test_empty_checkpoint_tensor_beyond_numpy_limits_converts(tmp_path):
    """[0, 2**62, 2**62] fits int64 dims and the safetensors format (zero bytes); numpy refuses
    to build that shape, so nothing here asks it to."""
    src = forged(tmp_path, (0, 2**62, 2**62), (2**62, 1, 1))
    convert_file(src, tmp_path / "out.safetensors")
    from pysafetensors import safe_open

    with safe_open(tmp_path / "out.safetensors", "np") as f:
        assert f.get_slice("w").get_shape() == [0, 2**62, 2**62]
