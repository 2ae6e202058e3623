"""numpy <-> raw bytes.  Also the shared helpers other adapters build on.

Sub-byte dtypes are held unpacked, one element per byte, as the ml_dtypes types
``float4_e2m1fn``, ``float6_e2m3fn`` and ``float6_e3m2fn``.  In the file they are packed
LSB-first: element ``i`` occupies bits ``[i*b, (i+1)*b)`` of the little-endian bit stream, so
F4 puts the first element in the low nibble (as torch's float4_e2m1fn_x2 does) and F6 packs
4 elements into 3 bytes.
"""

from __future__ import annotations

import importlib
import warnings
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .._device import Device
from ..errors import InvalidDevice, SerializeError, UnsupportedDtype, UnsupportedShape
from ..format.dtypes import DType, reverse_table
from ..format.slicing import plan_slice
from ..reader import RawTensor, TensorFile, check_representable

if TYPE_CHECKING:
    from ..writer import WriteItem

_MAX_NDIM = 64 if int(np.__version__.split(".")[0]) >= 2 else 32  # numpy's NPY_MAXDIMS

NAME = "numpy"


@cache
def numpy_dtype(dtype: DType) -> np.dtype[Any]:
    """The numpy dtype (little-endian) a format dtype is read as."""
    module, _, attr = dtype.numpy.partition(":")
    np_type: type[Any] = getattr(importlib.import_module(module), attr)
    return np.dtype(np_type).newbyteorder("<") if dtype.itemsize > 1 else np.dtype(np_type)


@cache
def _reverse() -> dict[Any, DType]:
    return reverse_table(numpy_dtype)


def _lookup(np_dtype: np.dtype) -> DType | None:
    # The table holds little-endian dtypes; a native or big-endian one is looked up as such.
    return _reverse().get(np_dtype.newbyteorder("<") if np_dtype.byteorder in "=>" else np_dtype)


def format_dtype(value: Any) -> DType | None:
    """The format dtype of a numpy dtype or scalar type (ml_dtypes ones included), or None."""
    try:
        return _lookup(np.dtype(value))
    except TypeError:
        return None


def dtype_of(array: np.ndarray, name: str = "") -> DType:
    """The format dtype of a numpy array (any byte order)."""
    found = _lookup(array.dtype)
    if found is None:
        raise UnsupportedDtype(
            f'Unknown dtype "{array.dtype.name}". (tensor {name!r}: numpy dtype {array.dtype} has no '
            "safetensors equivalent)",
            tensor=name,
            dtype=str(array.dtype),
        )
    return found


def check_device(device: Device) -> None:
    if not device.is_cpu:
        raise InvalidDevice(f"Device {device.shown} is not supported for framework numpy", device=str(device))


# --- sub-byte packing ---------------------------------------------------------------------


def unpack(data: Any, dtype: DType, count: int) -> np.ndarray:
    """Packed bytes -> one uint8 code per element."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if dtype.bits == 4:
        out = np.empty(raw.size * 2, dtype=np.uint8)
        out[0::2] = raw & 0x0F
        out[1::2] = raw >> 4
        return out[:count]
    if dtype.bits == 6:
        triples = raw.reshape(-1, 3).astype(np.uint32)
        word = triples[:, 0] | (triples[:, 1] << 8) | (triples[:, 2] << 16)
        out = np.empty((word.size, 4), dtype=np.uint8)
        for k in range(4):
            out[:, k] = (word >> (6 * k)) & 0x3F
        return out.reshape(-1)[:count]
    raise AssertionError(dtype.code)


def pack(codes: np.ndarray, dtype: DType) -> np.ndarray:
    """One uint8 code per element -> packed bytes (element count must fill whole bytes)."""
    flat = codes.reshape(-1)
    if dtype.bits == 4:
        return (flat[0::2] & 0x0F) | ((flat[1::2] & 0x0F) << 4)
    if dtype.bits == 6:
        quads = flat.reshape(-1, 4).astype(np.uint32) & 0x3F
        word = quads[:, 0] | (quads[:, 1] << 6) | (quads[:, 2] << 12) | (quads[:, 3] << 18)
        out = np.empty((word.size, 3), dtype=np.uint8)
        out[:, 0] = word & 0xFF
        out[:, 1] = (word >> 8) & 0xFF
        out[:, 2] = (word >> 16) & 0xFF
        return out.reshape(-1)
    raise AssertionError(dtype.code)


# --- reading ------------------------------------------------------------------------------


_MAX_NBYTES = (1 << 63) - 1  # npy_intp


def _check_numpy_empty(name: str, shape: tuple[int, ...], itemsize: int) -> None:
    """numpy refuses any shape whose non-zero dims times the itemsize overflow npy_intp, even
    when another dim is 0 (``[2**62, 0, 4]``); the format and torch allow it."""
    nbytes = itemsize
    for d in shape:
        if d:
            nbytes *= d
    if nbytes > _MAX_NBYTES:
        raise UnsupportedShape(
            f"tensor {name!r}: numpy cannot represent shape {list(shape)} (its non-zero "
            f"dimensions times the {itemsize}-byte item size exceed {_MAX_NBYTES}, even though "
            "the tensor is empty)",
            tensor=name,
            shape=shape,
        )


def to_numpy(raw: RawTensor) -> np.ndarray:
    """A RawTensor as an array: a zero-copy view except for packed sub-byte dtypes."""
    nd = numpy_dtype(raw.dtype)
    check_representable(raw.name, raw.shape)
    if len(raw.shape) > _MAX_NDIM:  # numpy's own limit (64); torch has none
        raise UnsupportedShape(
            f"tensor {raw.name!r} has {len(raw.shape)} dimensions, numpy supports at most {_MAX_NDIM}",
            tensor=raw.name,
        )
    if not raw.data:
        _check_numpy_empty(raw.name, raw.shape, nd.itemsize)
    if raw.dtype.packed:
        count = 1
        for d in raw.shape:
            count *= d
        return unpack(raw.data, raw.dtype, count).view(nd).reshape(raw.shape)
    arr = np.frombuffer(raw.data, dtype=nd).reshape(raw.shape)
    if raw.shared:
        # Views of a mapped file are read-only: flipping the flag back only ever writes to
        # private copy-on-write pages, never to the file.
        arr.flags.writeable = False
    return arr


def from_raw(raw: RawTensor, device: Device) -> np.ndarray:
    return to_numpy(raw)


def slice_numpy(file: TensorFile, name: str, index: Any) -> np.ndarray:
    info = file.info(name)
    plan = plan_slice(info.shape, info.dtype, index, name=name)
    return to_numpy(file.raw_slice(name, plan))


def get_slice(file: TensorFile, name: str, index: Any, device: Device) -> np.ndarray:
    return slice_numpy(file, name, index)


# --- writing ------------------------------------------------------------------------------


def little_endian_bytes(array: np.ndarray, dtype: DType) -> np.ndarray:
    """The array's bytes in logical C order, little-endian, packed: a view when possible."""
    a = array
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and np.little_endian is False):
        a = a.astype(a.dtype.newbyteorder("<"))  # a copy: the caller's array is never swapped
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)  # Fortran/strided: logical C order, one tensor at a time
    a = a.reshape(-1)
    if dtype.packed:
        return pack(a.view(np.uint8), dtype)
    return a.view(np.uint8)


def to_write_item(name: str, obj: Any) -> WriteItem:
    """A numpy array (or scalar) as a WriteItem.

    Subclasses are written as their base ndarray: a masked array's data is saved and its mask
    is not (as upstream saves it), with a warning when anything is masked.
    """
    if not isinstance(obj, np.ndarray):
        if isinstance(obj, np.generic):
            obj = np.asarray(obj)
        else:
            raise SerializeError(
                f"tensor {name!r}: expected a numpy.ndarray, got {type(obj).__name__}", tensor=name
            )
    if type(obj) is not np.ndarray:
        if isinstance(obj, np.ma.MaskedArray) and np.ma.is_masked(obj):
            masked = int(np.ma.count_masked(obj))  # type: ignore[no-untyped-call]  # unannotated in numpy
            warnings.warn(
                f"tensor {name!r}: a masked array is saved as its data; the mask "
                f"({masked} masked element(s)) is not saved",
                UserWarning,
                stacklevel=4,
            )
        obj = obj.view(np.ndarray)  # the same memory, as a plain array
    dtype = dtype_of(obj, name)
    array = obj
    from ..writer import WriteItem  # the write side, imported on first save

    return WriteItem(name, dtype, tuple(array.shape), lambda: little_endian_bytes(array, dtype))
