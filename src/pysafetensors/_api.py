"""serialize, serialize_file, deserialize and TensorSpec: upstream's low-level API.

Reading needs none of the write side: these names resolve without importing the writer, the
sinks or the layout planner (``from pysafetensors import *`` in a process that only reads),
which load on the first serialize."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import SerializeError, UnknownDtype, UnsupportedValue
from .format._gcpause import paused_gc
from .format.dtypes import DType, by_buffer_format, by_code, by_spec_name
from .handle import open_bytes

if TYPE_CHECKING:
    from .writer import WriteItem


class TensorSpec:
    """One tensor for ``serialize``/``serialize_file``: dtype name, shape and a raw buffer.

    ``dtype`` is a constructor-style name (``"float32"``, ``"bfloat16"``...) and is validated
    at once; ``shape`` is the storage shape (for ``float4_e2m1fn_x2`` the last dimension is
    doubled to the logical element count, as upstream does).  The memory at ``data_ptr`` must
    stay alive until the serialize call returns.
    """

    __slots__ = ("_data_len", "_data_ptr", "_dtype", "_shape")

    def __init__(self, *, dtype: str, shape: Sequence[int], data_ptr: int, data_len: int) -> None:
        from .format.layout import as_shape  # the write side, imported on first use

        d = by_spec_name(dtype)
        given = as_shape(shape)
        dims = list(d.file_shape(given))  # float4_e2m1fn_x2 shapes count pairs
        if data_len < 0 or data_ptr < 0:
            raise SerializeError(f"data_ptr and data_len must be non-negative, got {data_ptr}, {data_len}")
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


def _buffer_dtype(name: str, view: memoryview) -> DType:
    fmt = view.format
    if fmt[:1] in ">!":
        raise UnsupportedValue(f"tensor {name!r}: big-endian buffer format {fmt!r}; byteswap it first", tensor=name)
    dtype = by_buffer_format(fmt, view.itemsize)
    if dtype is None:
        raise UnsupportedValue(f"tensor {name!r}: buffer format {view.format!r} has no safetensors dtype", tensor=name)
    return dtype


def _item_fields(name: Any, value: Any) -> tuple[str, DType, tuple[int, ...], Callable[[], Any]]:
    """A ``WriteItem``'s fields for one ``serialize`` value: name, dtype, shape, bytes getter."""
    if not isinstance(name, str):
        raise UnsupportedValue(f"tensor names must be str, got {type(name).__name__}: {name!r}")
    if isinstance(value, TensorSpec):
        spec = value
        return name, spec._dtype, tuple(spec._shape), spec.buffer
    if isinstance(value, Mapping) and {"dtype", "shape", "data"} <= set(value):
        # The dict form older safetensors releases took.
        from .format.layout import as_shape

        code = value["dtype"]
        try:
            dtype = by_code(code)
        except UnknownDtype:
            dtype = by_spec_name(code)
        data = value["data"]
        return name, dtype, as_shape(value["shape"], name), lambda: data
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
    return name, dtype, shape, lambda: view if view.c_contiguous else view.tobytes()


def _items(tensor_dict: Mapping[str, Any]) -> list[WriteItem]:
    from .writer import WriteItem, tensor_mapping  # the write side, imported on first serialize

    return [WriteItem(*_item_fields(k, v)) for k, v in tensor_mapping(tensor_dict).items()]


@paused_gc()
def serialize(
    tensor_dict: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *, alignment: int = 8
) -> bytes:
    """Serialize ``{name: TensorSpec | buffer}`` to safetensors bytes (upstream's byte layout).

    ``alignment`` (a multiple of 8) pads the header so the data region starts on it."""
    from .writer import write_bytes

    return write_bytes(_items(tensor_dict), metadata, alignment)


@paused_gc()
def serialize_file(
    tensor_dict: Mapping[str, Any],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    alignment: int = 8,
    durable: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Serialize to ``filename``: streamed, atomic (temp file + rename), umask mode;
    ``durable=True`` (or ``PYSAFETENSORS_DURABLE=1``) also fsyncs, to survive a power loss.

    ``filename`` may be an fsspec URL (``s3://bucket/model.safetensors``, ``memory://...``):
    streamed to the store and published only when complete; ``storage_options`` go to its
    filesystem (see the writing guide)."""
    from .writer import write_file

    write_file(_items(tensor_dict), filename, metadata, alignment, durable=durable, storage_options=storage_options)


def deserialize(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, {"shape", "dtype", "data"})]`` in file order; ``data`` is bytes."""
    file = open_bytes(data)
    return [
        (raw.name, {"shape": list(raw.shape), "dtype": raw.dtype.code, "data": bytes(raw.data)})
        for raw in file.raw_all()
    ]
