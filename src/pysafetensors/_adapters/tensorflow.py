"""tensorflow <-> raw bytes.

Tensors are shared with the file through DLPack when tensorflow can take them: a writable,
64-byte aligned buffer (Eigen aborts the process on a misaligned one) of a DLPack type
(bool, ints, float16/32/64, complex64); bfloat16 crosses as uint16 and is bit-cast back, which
keeps the buffer.  Other cases (float8/float4, misaligned or read-only buffers) are copied by
``tf.convert_to_tensor``.  Saving exports CPU tensors through DLPack too (no copy).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .._device import Device
from .._optional import require
from ..errors import SerializeError
from ..format.dtypes import DType
from . import _bridge
from .numpy import numpy_dtype

if TYPE_CHECKING:
    from ..writer import WriteItem

NAME = "tensorflow"
tf = require("tensorflow", "tensorflow")

@cache
def tf_dtype(dtype: DType) -> Any:
    """The tf.DType of a format dtype, or None when tensorflow has none."""
    try:
        return tf.dtypes.as_dtype(numpy_dtype(dtype).newbyteorder("="))
    except TypeError:
        return None


check_dtype = _bridge.dtype_check(NAME, tf_dtype, f"tensorflow {tf.__version__}")


def check_device(device: Device) -> None:
    _bridge.cpu_only(device, NAME)


def from_numpy(arr: np.ndarray, dtype: DType, name: str = "") -> Any:
    check_dtype(dtype, name)
    if _bridge.shareable(arr):
        if dtype.dlpack_native:
            return tf.experimental.dlpack.from_dlpack(arr.__dlpack__())
        if dtype.code == "BF16":
            # numpy cannot export ml_dtypes types through DLPack; the bits cross as uint16.
            as_uint = tf.experimental.dlpack.from_dlpack(arr.view(np.uint16).__dlpack__())
            return tf.bitcast(as_uint, tf.bfloat16)
    with tf.device("/CPU:0"):
        return tf.convert_to_tensor(arr, dtype=tf_dtype(dtype))


from_raw, get_slice = _bridge.numpy_readers(check_dtype, from_numpy, _bridge.array_of)


class _Exporter:
    """Gives numpy.from_dlpack a tensorflow tensor's DLPack capsule."""

    def __init__(self, tensor: Any) -> None:
        self._tensor = tensor

    def __dlpack__(self, stream: Any = None, **_: Any) -> Any:
        return tf.experimental.dlpack.to_dlpack(self._tensor)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU


def to_numpy(obj: Any, name: str) -> np.ndarray:
    """A tensorflow tensor (or variable, or numpy array) as numpy; CPU tensors without a copy."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return np.asarray(obj)
    if not tf.is_tensor(obj):
        raise SerializeError(f"tensor {name!r}: expected a tf.Tensor, got {type(obj).__name__}", tensor=name)
    try:
        t = tf.convert_to_tensor(obj)  # a variable's current value; a no-op for dense tensors
    except (TypeError, ValueError) as e:  # sparse and ragged tensors have no dense buffer
        raise SerializeError(f"tensor {name!r}: {type(obj).__name__} is not a dense tensor: {e}", tensor=name) from e
    if "CPU" in (t.device or "CPU"):
        np_dtype = t.dtype.as_numpy_dtype
        try:
            if t.dtype == tf.bfloat16:
                return np.from_dlpack(_Exporter(tf.bitcast(t, tf.uint16))).view(np_dtype)
            if t.dtype.is_bool or t.dtype.is_integer or t.dtype.is_floating or t.dtype.is_complex:
                return np.from_dlpack(_Exporter(t))
        except (BufferError, TypeError, ValueError, tf.errors.InvalidArgumentError):
            pass  # types DLPack cannot carry (float8...): tensorflow's own copy below
    return np.asarray(t.numpy())


def to_write_item(name: str, obj: Any) -> WriteItem:
    return _bridge.write_item(name, to_numpy(obj, name))
