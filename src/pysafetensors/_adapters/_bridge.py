"""Shared plumbing for the frameworks that go through numpy: jax/flax, tensorflow, paddle, mlx.

Reading: a RawTensor becomes a numpy array (``numpy.to_numpy``: a view of the map when it can
be), and each adapter turns that array into its framework's tensor, sharing memory where the
framework allows it.  Slicing is ``format.slicing`` through ``numpy`` too, so every framework
has upstream's non-torch slicing rules (ints, slices with step >= 1, one ``...``; out of range
is an error).  Writing: each adapter turns its tensor into a numpy array (a view where it can)
and hands it to ``numpy.to_write_item``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .._device import Device
from ..errors import InvalidDevice, UnsupportedDtype
from ..format.dtypes import DType
from ..format.slicing import plan_slice
from ..reader import RawTensor, TensorFile
from . import numpy as np_adapter

if TYPE_CHECKING:
    from ..writer import WriteItem

# XLA and Eigen (tensorflow) assume 64-byte aligned host buffers; tensorflow aborts the whole
# process on a misaligned one, so sharing is only attempted at this alignment.
ALIGNMENT = 64


def type_name(dtype: DType) -> str:
    """The framework-neutral type name of a format dtype (``float32``, ``bfloat16``, ``bool``...)."""
    return dtype.numpy.partition(":")[2].rstrip("_")


def unsupported(dtype: DType, framework: str, name: str = "", why: str = "") -> UnsupportedDtype:
    who = f"tensor {name!r}: " if name else ""
    return UnsupportedDtype(
        f"{who}dtype {dtype.code} ({type_name(dtype)}) is not supported by framework {framework}"
        + (f": {why}" if why else ""),
        tensor=name,
        dtype=dtype.code,
        framework=framework,
    )


def dtype_check(framework: str, lookup: Callable[[DType], Any], label: str) -> Callable[[DType, str], None]:
    """The ``check_dtype(dtype, name="")`` of ``framework``, whose ``lookup`` gives its type for
    a format dtype or None when it has none: then an UnsupportedDtype naming the tensor, the
    dtype and ``label`` (the framework, with its version where the types differ between them)."""

    def check_dtype(dtype: DType, name: str = "") -> None:
        if lookup(dtype) is None:
            raise unsupported(dtype, framework, name, f"{label} has no {type_name(dtype)} type")

    return check_dtype


def cpu_only(device: Device, framework: str) -> None:
    """Upstream's rule for the numpy-based frameworks: any non-CPU device is an error."""
    if not device.is_cpu:
        raise InvalidDevice(
            f"Device {device} is not supported for framework {framework}", device=str(device), framework=framework
        )


def array_of(raw: RawTensor) -> np.ndarray:
    """The tensor as a numpy array: a view of the source when possible.

    Views of a copy-on-write map are flagged writable again (writes only ever reach private
    pages) so that they can be exported through DLPack, which refuses read-only arrays.
    """
    arr = np_adapter.to_numpy(raw)
    if not arr.flags.writeable and raw.writable and not raw.dtype.packed:
        arr.flags.writeable = True
    return arr


def slice_raw(file: TensorFile, name: str, index: Any) -> RawTensor:
    """Only the bytes ``index`` selects, with upstream's non-torch slicing rules."""
    info = file.info(name)
    return file.raw_slice(name, plan_slice(info.shape, info.dtype, index, name=name))


def numpy_readers(
    check_dtype: Callable[[DType, str], None],
    from_numpy: Callable[[np.ndarray, DType, str], Any],
    as_array: Callable[[RawTensor], np.ndarray] = np_adapter.to_numpy,
) -> tuple[Callable[[RawTensor, Device], Any], Callable[[TensorFile, str, Any, Device], Any]]:
    """``from_raw`` and ``get_slice`` for a CPU framework that takes its tensors from numpy:
    the dtype is checked first (naming the tensor), then the bytes are viewed as numpy
    (``as_array``) and handed to ``from_numpy``."""

    def from_raw(raw: RawTensor, device: Device) -> Any:
        check_dtype(raw.dtype, raw.name)
        return from_numpy(as_array(raw), raw.dtype, raw.name)

    def get_slice(file: TensorFile, name: str, index: Any, device: Device) -> Any:
        check_dtype(file.info(name).dtype, name)
        return from_raw(slice_raw(file, name, index), device)

    return from_raw, get_slice


def shareable(arr: np.ndarray) -> bool:
    """True when DLPack may export ``arr`` without a copy and an Eigen/XLA kernel may use it."""
    return arr.size > 0 and arr.ctypes.data % ALIGNMENT == 0 and arr.flags.writeable and arr.flags.c_contiguous


def write_item(name: str, array: np.ndarray) -> WriteItem:
    """A numpy array (already converted from a framework tensor) as a WriteItem."""
    return np_adapter.to_write_item(name, array)
