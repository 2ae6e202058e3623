"""mlx <-> raw bytes.

``mx.array`` always copies: mlx arrays live in memory mlx's own allocator owns (unified
memory on Apple silicon), and mlx has no constructor that adopts a foreign buffer.  Saving
is zero-copy: numpy views an evaluated mlx array through the buffer protocol.  float64 is
kept as float64 (``mx.array`` alone, as upstream calls it, would narrow it to float32);
bfloat16 crosses as uint16 bits.  mlx has no float8, float6 or float4 dtype.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .._device import Device
from .._optional import require
from ..errors import SerializeError, UnsupportedDtype
from ..format.dtypes import DType, reverse_lookup
from . import _bridge
from .numpy import numpy_dtype

if TYPE_CHECKING:
    from ..writer import WriteItem

NAME = "mlx"
mx = require("mlx.core", "mlx")


@cache
def mlx_dtype(dtype: DType) -> Any:
    """The mlx dtype of a format dtype, or None when mlx has none."""
    name = _bridge.type_name(dtype)
    return getattr(mx, "bool_" if name == "bool" else name, None)


check_dtype = _bridge.dtype_check(NAME, mlx_dtype, "mlx")


def check_device(device: Device) -> None:
    _bridge.cpu_only(device, NAME)


def from_numpy(arr: np.ndarray, dtype: DType, name: str = "") -> Any:
    check_dtype(dtype, name)
    if dtype.code == "BF16":
        return mx.array(arr.view(np.uint16)).view(mx.bfloat16)
    return mx.array(arr, dtype=mlx_dtype(dtype))


from_raw, get_slice = _bridge.numpy_readers(check_dtype, from_numpy)


_format_dtype = reverse_lookup(mlx_dtype)


def to_numpy(obj: Any, name: str) -> np.ndarray:
    """An mlx array (or numpy array) as numpy, viewing the mlx buffer."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return np.asarray(obj)
    if not isinstance(obj, mx.array):
        raise SerializeError(f"tensor {name!r}: expected mlx.core.array, got {type(obj).__name__}", tensor=name)
    dtype = _format_dtype(obj.dtype)
    if dtype is None:
        raise UnsupportedDtype(
            f"tensor {name!r}: mlx dtype {obj.dtype} has no safetensors equivalent", tensor=name, dtype=str(obj.dtype)
        )
    if dtype.code == "BF16":
        # The buffer protocol has no bfloat16 format: view the bits, then name the type.
        return np.asarray(obj.view(mx.uint16)).view(numpy_dtype(dtype))
    return np.asarray(obj)


def to_write_item(name: str, obj: Any) -> WriteItem:
    return _bridge.write_item(name, to_numpy(obj, name))
