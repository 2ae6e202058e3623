"""The incremental writer's public face: ``open_writer`` and ``SafetensorsWriter``, which take
framework tensors (``writer.IncrementalWriter`` takes buffers).

Its own module, loaded on first use through the package root, because the class needs the
writer, the sinks and the layout planner to exist: a process that only reads never imports them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from . import _adapters
from .format.dtypes import DType
from .writer import DTypeLike, IncrementalWriter, WriteItem


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
