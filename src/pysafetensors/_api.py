"""serialize, serialize_file, deserialize and TensorSpec: upstream's low-level API."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import SerializeError, UnknownDtype, UnsupportedValue
from .format._gcpause import paused_gc
from .format.dtypes import DType, by_code, by_spec_name
from .handle import open_bytes
from .writer import WriteItem, write_bytes, write_file


class TensorSpec:
    """One tensor for ``serialize``/``serialize_file``: dtype name, shape and a raw buffer.

    ``dtype`` is a constructor-style name (``"float32"``, ``"bfloat16"``...) and is validated
    at once; ``shape`` is the storage shape (for ``float4_e2m1fn_x2`` the last dimension is
    doubled to the logical element count, as upstream does).  The memory at ``data_ptr`` must
    stay alive until the serialize call returns.
    """

    __slots__ = ("_data_len", "_data_ptr", "_dtype", "_shape")

    def __init__(self, *, dtype: str, shape: Sequence[int], data_ptr: int, data_len: int) -> None:
        d = by_spec_name(dtype)
        dims = [int(x) for x in shape]
        if d.code == "F4":
            dims = dims[:-1] + [dims[-1] * 2] if dims else [2]
        if data_len < 0 or data_ptr < 0:
            raise SerializeError(f"data_ptr and data_len must be non-negative, got {data_ptr}, {data_len}")
        if any(x < 0 for x in dims):
            raise SerializeError(f"TensorSpec shape must be non-negative, got {list(shape)}")
        self._dtype = d
        self._shape = dims
        self._data_ptr = int(data_ptr)
        self._data_len = int(data_len)

    @property
    def dtype(self) -> str:
        return self._dtype.code

    @property
    def shape(self) -> list[int]:
        return list(self._shape)

    @property
    def data_ptr(self) -> int:
        return self._data_ptr

    @property
    def data_len(self) -> int:
        return self._data_len

    def buffer(self) -> memoryview:
        """The bytes at data_ptr, without copying."""
        if self._data_len == 0:
            return memoryview(b"")
        if self._data_ptr == 0:
            raise SerializeError(f"TensorSpec has a null data_ptr for {self._data_len} bytes")
        return memoryview((ctypes.c_ubyte * self._data_len).from_address(self._data_ptr)).cast("B")

    def __repr__(self) -> str:
        return f"TensorSpec(dtype={self.dtype!r}, shape={self.shape}, data_ptr={self._data_ptr}, data_len={self._data_len})"


_STRUCT_KINDS = {
    "?": "BOOL", "b": "I", "B": "U", "h": "I", "H": "U", "i": "I", "I": "U", "l": "I", "L": "U",
    "q": "I", "Q": "U", "n": "I", "N": "U", "e": "F", "f": "F", "d": "F", "Zf": "C",
}


def _buffer_dtype(name: str, view: memoryview) -> DType:
    fmt = view.format
    if fmt[:1] in "<=@!>":
        if fmt[0] in ">!":
            raise UnsupportedValue(f"tensor {name!r}: big-endian buffer format {fmt!r}; byteswap it first", tensor=name)
        fmt = fmt[1:]
    kind = _STRUCT_KINDS.get(fmt)
    if kind is None:
        raise UnsupportedValue(f"tensor {name!r}: buffer format {view.format!r} has no safetensors dtype", tensor=name)
    if kind == "BOOL":
        return by_code("BOOL")
    bits = 8 * (view.itemsize if fmt != "Zf" else 8)
    if kind == "C":
        return by_code("C64")
    return by_code(f"{kind}{bits}")


def _item(name: Any, value: Any) -> WriteItem:
    if not isinstance(name, str):
        raise UnsupportedValue(f"tensor names must be str, got {type(name).__name__}: {name!r}")
    if isinstance(value, TensorSpec):
        spec = value
        return WriteItem(name, spec._dtype, tuple(spec._shape), spec.buffer)
    if isinstance(value, Mapping) and {"dtype", "shape", "data"} <= set(value):
        # The dict form older safetensors releases took.
        code = value["dtype"]
        try:
            dtype = by_code(code)
        except UnknownDtype:
            dtype = by_spec_name(code)
        data = value["data"]
        return WriteItem(name, dtype, tuple(int(d) for d in value["shape"]), lambda: data)
    try:
        view = memoryview(value)
    except TypeError:
        raise UnsupportedValue(
            f"tensor {name!r}: expected a TensorSpec or an object with the buffer protocol, "
            f"got {type(value).__name__}",
            tensor=name,
        ) from None
    dtype = _buffer_dtype(name, view)
    shape = tuple(view.shape or ())
    return WriteItem(name, dtype, shape, lambda: view if view.c_contiguous else view.tobytes())


def _items(tensor_dict: Mapping[str, Any]) -> list[WriteItem]:
    if not isinstance(tensor_dict, Mapping):
        raise UnsupportedValue(f"expected a dict of tensors, got {type(tensor_dict).__name__}")
    return [_item(k, v) for k, v in tensor_dict.items()]


@paused_gc()
def serialize(
    tensor_dict: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *, alignment: int = 8
) -> bytes:
    """Serialize ``{name: TensorSpec | buffer}`` to safetensors bytes (upstream's byte layout).

    ``alignment`` (a multiple of 8) pads the header so the data region starts on it."""
    return write_bytes(_items(tensor_dict), metadata, alignment)


@paused_gc()
def serialize_file(
    tensor_dict: Mapping[str, Any],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    alignment: int = 8,
    durable: bool | None = None,
) -> None:
    """Serialize to ``filename``: streamed, atomic (temp file + rename), umask mode;
    ``durable=True`` (or ``PYSAFETENSORS_DURABLE=1``) also fsyncs, to survive a power loss."""
    write_file(_items(tensor_dict), filename, metadata, alignment, durable=durable)


def deserialize(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, {"shape", "dtype", "data"})]`` in file order; ``data`` is bytes."""
    file = open_bytes(data)
    return [
        (raw.name, {"shape": list(raw.shape), "dtype": raw.dtype.code, "data": bytes(raw.data)})
        for raw in file.raw_all()
    ]


