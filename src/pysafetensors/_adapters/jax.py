"""jax/flax <-> raw bytes.

jax reads every dtype XLA has, including bfloat16, the float8 kinds and float4_e2m1fn (all
ml_dtypes types, so they cross from numpy as they are); float6 has no XLA type.  Arrays are
placed on the CPU with ``jax.device_put``, which aliases the numpy buffer (no copy) when it
is 64-byte aligned and copies otherwise.  Without ``jax_enable_x64`` jax holds 64-bit types as
32-bit ones (as upstream's flax face does); integers that would not fit are an error rather
than silently wrapped.
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

NAME = "flax"  # upstream's messages say "flax" for both names
jax = require("jax", "jax")
jnp = require("jax.numpy", "jax")


@cache
def _held(dtype: DType) -> Any:
    """The numpy dtype of a format dtype when XLA can hold it, else None.  jax.numpy names
    float6 types that XLA cannot hold, so this asks XLA itself, once per dtype."""
    try:
        jax.device_put(np.zeros(1, numpy_dtype(dtype)), _cpu()).block_until_ready()
    except Exception:  # noqa: BLE001 - XLA's error types differ between jax releases
        return None
    return numpy_dtype(dtype)


check_dtype = _bridge.dtype_check(NAME, _held, f"jax {jax.__version__}")


def check_device(device: Device) -> None:
    _bridge.cpu_only(device, NAME)


@cache
def _cpu() -> Any:
    return jax.devices("cpu")[0]


def _x64() -> bool:
    return bool(jax.config.read("jax_enable_x64"))


def _check_x64(arr: np.ndarray, dtype: DType, name: str) -> None:
    if dtype.bits != 64 or dtype.kind not in ("int", "uint") or _x64() or arr.size == 0:
        return
    info = np.iinfo(np.int32 if dtype.kind == "int" else np.uint32)
    if arr.min() < info.min or arr.max() > info.max:
        raise _bridge.unsupported(
            dtype,
            NAME,
            name,
            f"values outside {info.dtype} need jax.config.update('jax_enable_x64', True)",
        )


def from_numpy(arr: np.ndarray, dtype: DType, name: str = "") -> Any:
    check_dtype(dtype, name)
    _check_x64(arr, dtype, name)
    # device_put aliases an aligned host buffer instead of copying it; jax arrays are
    # immutable and keep ``arr`` (and so the map under it) alive.
    return jax.device_put(arr, _cpu())


from_raw, get_slice = _bridge.numpy_readers(check_dtype, from_numpy)


def to_numpy(obj: Any, name: str) -> np.ndarray:
    """A jax array (or numpy array) as numpy: a view of a CPU array's buffer."""
    if isinstance(obj, (np.ndarray, np.generic)):
        return np.asarray(obj)
    if not isinstance(obj, jax.Array):
        raise SerializeError(f"tensor {name!r}: expected a jax.Array, got {type(obj).__name__}", tensor=name)
    return np.asarray(obj)


def to_write_item(name: str, obj: Any) -> WriteItem:
    return _bridge.write_item(name, to_numpy(obj, name))
