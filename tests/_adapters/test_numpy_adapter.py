"""_adapters/numpy.py called directly: the dtype table both ways, sub-byte packing, and the bytes a
write item gives (little-endian, C order, never the caller's array changed)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pysafetensors._adapters import numpy as adapter
from pysafetensors._device import parse_device
from pysafetensors.errors import InvalidDevice, SerializeError, UnsupportedDtype
from pysafetensors.format.dtypes import all_dtypes, by_code

upstream = pytest.importorskip("safetensors.numpy")


@pytest.mark.parametrize("dtype", all_dtypes(), ids=lambda d: d.code)
def test_the_table_reads_back_both_ways(dtype: object) -> None:
    np_dtype = adapter.numpy_dtype(dtype)  # type: ignore[arg-type]
    assert adapter.format_dtype(np_dtype) == dtype
    assert np_dtype.itemsize == 1 or np_dtype.byteorder == "<"  # little-endian when order matters
    if np_dtype.itemsize > 1:
        assert adapter.format_dtype(np_dtype.newbyteorder(">")) == dtype  # any byte order


@pytest.mark.parametrize("code", ["F4", "F6_E2M3", "F6_E3M2"])
def test_pack_and_unpack_are_inverse(code: str) -> None:
    dtype = by_code(code)
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 1 << dtype.bits, 24).astype(np.uint8)
    packed = adapter.pack(codes, dtype)
    assert packed.nbytes == dtype.nbytes(24)
    np.testing.assert_array_equal(adapter.unpack(packed.tobytes(), dtype, 24), codes)


def test_f4_packs_the_first_element_in_the_low_nibble() -> None:
    assert adapter.pack(np.array([0x1, 0xA, 0xF, 0x0], np.uint8), by_code("F4")).tolist() == [0xA1, 0x0F]


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=">f4").reshape(3, 4),                    # big-endian
    np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),  # Fortran order
    np.arange(20, dtype=np.float64)[::3],                        # strided
    np.arange(8, dtype=np.int64).reshape(2, 4).T,                # transposed
    np.array(3.5, ml_dtypes.bfloat16),                           # 0-d, ml_dtypes
], ids=["big-endian", "fortran", "strided", "transposed", "bf16-scalar"])
def test_write_item_bytes_are_little_endian_in_c_order(array: np.ndarray) -> None:
    """The bytes upstream writes for the same values made C-contiguous and little-endian (upstream
    0.8's numpy save writes a Fortran array's memory order, which reads back transposed)."""
    before = array.copy()
    item = adapter.to_write_item("t", array)
    assert item.shape == array.shape and item.dtype == adapter.format_dtype(array.dtype)
    plain = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else None)
    blob = upstream.save({"t": plain})
    (n,) = np.frombuffer(blob[:8], "<u8")
    assert bytes(item.get_bytes()) == blob[8 + int(n):] == plain.tobytes()
    np.testing.assert_array_equal(array, before)
    assert array.dtype == before.dtype  # the caller's array is never swapped in place


def test_a_contiguous_little_endian_array_is_written_from_a_view() -> None:
    a = np.arange(6, dtype=np.float32)
    data = adapter.to_write_item("a", a).get_bytes()
    assert np.shares_memory(data, a)


def test_scalars_and_masked_arrays() -> None:
    item = adapter.to_write_item("s", np.float16(2.0))
    assert item.shape == () and bytes(item.get_bytes()) == np.float16(2.0).tobytes()
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    with pytest.warns(UserWarning, match="1 masked element"):
        item = adapter.to_write_item("m", masked)
    assert bytes(item.get_bytes()) == np.array([1.0, 2.0]).tobytes()  # the data, as upstream saves it


def test_what_numpy_cannot_save_is_refused_naming_the_tensor() -> None:
    with pytest.raises(SerializeError, match="tensor 'x': expected a numpy.ndarray, got list"):
        adapter.to_write_item("x", [1, 2])
    with pytest.raises(UnsupportedDtype, match="tensor 'u'"):
        adapter.to_write_item("u", np.array(["a"]))


def test_numpy_runs_on_the_cpu_only() -> None:
    adapter.check_device(parse_device("cpu"))
    with pytest.raises(InvalidDevice, match="not supported for framework numpy"):
        adapter.check_device(parse_device("cuda:0"))
