"""serialize, serialize_file, deserialize and TensorSpec: upstream's low-level API; and the
incremental writer's public face (``open_writer``), which takes framework tensors."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping, Sequence
from typing import Any

from . import _adapters
from .errors import SerializeError, UnknownDtype, UnsupportedValue
from .format._gcpause import paused_gc
from .format.dtypes import DType, by_buffer_format, by_code, by_spec_name
from .format.layout import as_shape
from .handle import open_bytes
from .writer import DTypeLike, IncrementalWriter, WriteItem, tensor_mapping, write_bytes, write_file


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
        given = as_shape(shape)
        # float4_e2m1fn_x2 shapes count pairs; upstream takes a 0-d one as one pair, [2].
        file_shape = d.file_shape(given)
        dims = list(file_shape if file_shape is not None else (2,))
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
        return WriteItem(name, dtype, as_shape(value["shape"], name), lambda: data)
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
    return [_item(k, v) for k, v in tensor_mapping(tensor_dict).items()]


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
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Serialize to ``filename``: streamed, atomic (temp file + rename), umask mode;
    ``durable=True`` (or ``PYSAFETENSORS_DURABLE=1``) also fsyncs, to survive a power loss.

    ``filename`` may be an fsspec URL (``s3://bucket/model.safetensors``, ``memory://...``):
    streamed to the store and published only when complete; ``storage_options`` go to its
    filesystem (see the writing guide)."""
    write_file(_items(tensor_dict), filename, metadata, alignment, durable=durable, storage_options=storage_options)


def deserialize(data: Any) -> list[tuple[str, dict[str, Any]]]:
    """``[(name, {"shape", "dtype", "data"})]`` in file order; ``data`` is bytes."""
    file = open_bytes(data)
    return [
        (raw.name, {"shape": list(raw.shape), "dtype": raw.dtype.code, "data": bytes(raw.data)})
        for raw in file.raw_all()
    ]




# --- the incremental writer, with framework tensors -----------------------------------------


class SafetensorsWriter(IncrementalWriter):
    """Write a safetensors file tensor by tensor, in any order, from any threads.

    Declare every tensor (name -> (dtype, shape)) and the metadata up front; the header is
    written at once and each tensor's bytes go straight to their planned offset in a temp
    file beside ``path``.  ``close()`` checks that every tensor was completely written, then
    renames the temp file into place (after an fsync when ``durable``); ``abort()`` (or an
    exception inside ``with``) removes the temp file and leaves any old file untouched.  The
    result is byte-identical to ``save_file`` of the same tensors.  An fsspec URL ``path``
    (``storage_options`` for its filesystem) is staged in a local temp file (``TMPDIR``) and
    uploaded by ``close()``, all or nothing.

    ``dtype`` may be a code (``"F32"``), a TensorSpec name (``"float32"``), a numpy dtype or a
    torch dtype.  ``write`` takes numpy arrays, framework tensors (torch, jax, tensorflow,
    paddle, mlx) and buffers; what carries a dtype must have the declared dtype and shape
    (``write_chunk``: the dtype), and unsigned bytes (``bytes``, a uint8 array, a ``"B"``
    memoryview) are taken as raw bytes.  ``alignment`` pads the header so the data region
    starts at a multiple of it (default 8: identical to upstream).
    """

    def _adapt(self, name: str, data: Any) -> WriteItem | None:
        return _adapters.write_item_of(name, data)

    def _resolve_dtype(self, value: Any) -> DType | None:
        return _adapters.dtype_of_object(value)


def open_writer(
    path: str | os.PathLike[str],
    tensors: Mapping[str, tuple[DTypeLike, Sequence[int]]],
    metadata: Mapping[str, str] | None = None,
    *,
    alignment: int = 8,
    durable: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> SafetensorsWriter:
    """Start an incremental write: ``with open_writer(path, {"w": ("F32", (4, 4))}) as w: w.write("w", arr)``.

    ``path`` may be an fsspec URL (``storage_options`` for its filesystem): the file is then
    staged in a local temp file (in ``TMPDIR``, the whole file's size) and uploaded on close."""
    return SafetensorsWriter(
        path, tensors, metadata, alignment=alignment, durable=durable, storage_options=storage_options
    )
