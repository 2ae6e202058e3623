"""paddle <-> raw bytes.

CPU tensors share the file's (copy-on-write) map through DLPack when the buffer is writable
and element-aligned; bfloat16 and the float8 kinds cross DLPack as same-size unsigned ints and
are reinterpreted with ``Tensor.view(dtype)``, which keeps the buffer.  Other buffers are
copied once.  Devices are passed to paddle (``cuda:N`` is paddle's ``gpu:N``); one paddle was
not built for, or that the machine lacks, is an InvalidDevice error at ``safe_open`` time.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .._device import Device
from .._optional import require
from ..errors import InvalidDevice, SerializeError, UnsupportedDtype
from ..format.dtypes import DType, reverse_lookup
from ..reader import RawTensor, TensorFile
from . import _bridge
from .numpy import numpy_dtype

if TYPE_CHECKING:
    from ..writer import WriteItem

NAME = "paddle"
paddle = require("paddle", "paddle")


@cache
def paddle_dtype(dtype: DType) -> Any:
    """The paddle dtype of a format dtype, or None when paddle has none."""
    return getattr(paddle, _bridge.type_name(dtype), None)


check_dtype = _bridge.dtype_check(NAME, paddle_dtype, f"paddle {paddle.__version__}")


# --- devices ------------------------------------------------------------------------------


def _device_count(kind: str) -> int:
    dev = paddle.device
    if kind == "cuda":
        return dev.cuda.device_count() if dev.is_compiled_with_cuda() else 0
    if kind == "xpu":
        return dev.xpu.device_count() if dev.is_compiled_with_xpu() else 0
    # npu, mlu, musa...: paddle's plug-in ("custom") devices.
    if kind in dev.get_all_custom_device_type():
        return int(paddle.framework.core.get_custom_device_count(kind))
    return 0


def paddle_device(device: Device) -> str:
    """The paddle device string: ``cpu``, ``gpu:N``, ``xpu:N``, ``npu:N``..."""
    if device.is_cpu:
        return "cpu"
    kind = "gpu" if device.kind == "cuda" else device.kind
    return f"{kind}:{device.index or 0}"


def check_device(device: Device) -> None:
    if device.is_cpu:
        return
    count = _device_count(device.kind)
    index = device.index or 0
    if index >= count:
        have = f"{count} {device.kind} device(s)" if count else f"no {device.kind} support"
        raise InvalidDevice(
            f"Device {device} is not available for framework paddle (paddle {paddle.__version__} has {have})",
            device=str(device),
            framework=NAME,
        )


# --- reading ------------------------------------------------------------------------------


def _share(arr: np.ndarray, dtype: DType) -> Any:
    target = paddle_dtype(dtype)
    if not dtype.dlpack_native:  # bfloat16, float8: ml_dtypes types DLPack cannot name
        # ml_dtypes types cannot cross DLPack: send the bits as a signed int (paddle has no
        # view kernel from uint16, its legacy bfloat16 alias), reinterpret in paddle.
        t = paddle.utils.dlpack.from_dlpack(arr.view(f"i{arr.dtype.itemsize}").__dlpack__())
        return t.view(target)
    t = paddle.utils.dlpack.from_dlpack(arr.__dlpack__())
    # DLPack's uint16 arrives as paddle's legacy bf16-as-uint16 type: name it explicitly.
    return t if t.dtype == target else t.view(target)


def _shareable(arr: np.ndarray) -> bool:
    # Unlike tensorflow, paddle's CPU kernels work on any element-aligned buffer (upstream
    # shares unaligned ones too), so 64-byte alignment is not required.
    return arr.size > 0 and arr.flags.writeable and arr.flags.c_contiguous and arr.ctypes.data % arr.itemsize == 0


def from_numpy(arr: np.ndarray, dtype: DType, name: str = "", device: Device | None = None) -> Any:
    check_dtype(dtype, name)
    if arr.size == 0:
        t = paddle.empty(list(arr.shape), dtype=paddle_dtype(dtype))
    else:
        if not _shareable(arr):
            # Read-only (caller's bytes) or misaligned: one copy into memory paddle may own.
            arr = np.array(arr, order="C", copy=True)
        t = _share(arr, dtype)
    if device is not None and not device.is_cpu:
        t = t.to(paddle_device(device))
    return t


def from_raw(raw: RawTensor, device: Device) -> Any:
    check_dtype(raw.dtype, raw.name)
    return from_numpy(_bridge.array_of(raw), raw.dtype, raw.name, device)


def get_slice(file: TensorFile, name: str, index: Any, device: Device) -> Any:
    check_dtype(file.info(name).dtype, name)
    return from_raw(_bridge.slice_raw(file, name, index), device)


# --- writing ------------------------------------------------------------------------------


_format_dtype = reverse_lookup(paddle_dtype)


def to_numpy(obj: Any, name: str) -> np.ndarray:
    """A paddle tensor (or numpy array) as numpy: CPU tensors through DLPack, no copy.

    Non-contiguous tensors are written in logical C order (upstream refuses them).
    """
    if isinstance(obj, (np.ndarray, np.generic)):
        return np.asarray(obj)
    if not isinstance(obj, paddle.Tensor):
        raise SerializeError(f"tensor {name!r}: expected paddle.Tensor, got {type(obj).__name__}", tensor=name)
    t = obj.detach()
    if not t.place.is_cpu_place():
        t = t.cpu()
    dtype = _format_dtype(t.dtype)
    if dtype is None:
        raise UnsupportedDtype(
            f"tensor {name!r}: paddle dtype {t.dtype} has no safetensors equivalent", tensor=name, dtype=str(t.dtype)
        )
    np_dtype = numpy_dtype(dtype).newbyteorder("=")
    if t.size == 0:
        return np.empty(t.shape, dtype=np_dtype)
    if not dtype.dlpack_native:  # bfloat16, float8: ml_dtypes types DLPack cannot name
        # DLPack carries the bits as a same-size signed int (paddle's uint16 doubles as its
        # legacy bfloat16, so signed ints are the unambiguous choice).
        if not t.is_contiguous():
            t = t.contiguous()
        as_int = t.view(paddle.int16 if np_dtype.itemsize == 2 else paddle.int8)
        return np.from_dlpack(as_int).view(np_dtype)
    return np.from_dlpack(t)


def to_write_item(name: str, obj: Any) -> WriteItem:
    return _bridge.write_item(name, to_numpy(obj, name))
