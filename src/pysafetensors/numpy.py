"""numpy face: save, save_file, load, load_file (upstream-compatible).

Every format dtype loads: BF16 and the F8 kinds as ml_dtypes types, C64 as complex64, and
the packed sub-byte F4/F6 unpacked to one ml_dtypes element per byte (``float4_e2m1fn``,
``float6_e2m3fn``, ``float6_e3m2fn``), packed again on save, so round trips are exact.
Arrays from ``load_file`` with the default mmap backend are read-only zero-copy views of
the file; ``backend="pread"`` gives writable arrays in fresh memory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._adapters.numpy import numpy_dtype, to_numpy, to_write_item
from ._api import TensorSpec, deserialize, serialize, serialize_file  # noqa: F401 - upstream's module has them
from .errors import UnknownDtype
from .format._gcpause import paused_gc
from .format.dtypes import by_code
from .handle import open_bytes, safe_open
from .writer import write_bytes, write_file

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]


def _items(tensor_dict: Mapping[str, np.ndarray]) -> list[Any]:
    if not isinstance(tensor_dict, Mapping):
        raise TypeError(f"Expected a dict of [str, np.ndarray] but received {type(tensor_dict)}")
    return [to_write_item(k, v) for k, v in tensor_dict.items()]


@paused_gc()
def save(tensor_dict: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None, *, alignment: int = 8) -> bytes:
    """Serialize arrays to safetensors bytes.  Fortran-order, strided and big-endian
    arrays are written in logical C order, little-endian; the inputs are never modified."""
    return write_bytes(_items(tensor_dict), metadata, alignment)


@paused_gc()
def save_file(
    tensor_dict: Mapping[str, np.ndarray],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
    *,
    alignment: int = 8,
    durable: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Save arrays to ``filename`` atomically, streaming one array at a time; ``durable=True``
    fsyncs before the rename (default: ``PYSAFETENSORS_DURABLE``, else off).  ``filename``
    may be an fsspec URL (``s3://...``; ``storage_options`` for its filesystem): streamed to
    the store, published only when complete."""
    write_file(_items(tensor_dict), filename, metadata, alignment, durable=durable, storage_options=storage_options)


@paused_gc()
def load(data: bytes) -> dict[str, np.ndarray]:
    """Load arrays from safetensors bytes (zero-copy, read-only views of ``data``)."""
    return {raw.name: to_numpy(raw) for raw in open_bytes(data).raw_all()}


@paused_gc()
def load_file(
    filename: str | os.PathLike[str], *, backend: str | None = None, threads: int | None = None
) -> dict[str, np.ndarray]:
    """Load every array of a file, in file order (``threads``: parallel pread reads)."""
    with safe_open(filename, framework="np", backend=backend) as f:
        return f.get_tensors(threads=threads)


def _getdtype(dtype_str: str) -> np.dtype:
    """The numpy dtype a header code (``"F32"``) loads as; KeyError for an unknown code, as
    upstream's table lookup.  Sub-byte codes give their unpacked one-element-per-byte type."""
    try:
        return numpy_dtype(by_code(dtype_str))
    except UnknownDtype:
        raise KeyError(dtype_str) from None


def _storage_id(array: np.ndarray) -> int:
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    # Arrays over one foreign buffer (np.frombuffer of the same bytes) share it, too.
    return id(root.base) if root.base is not None else id(root)


def save_sharded(
    tensor_dict: Mapping[str, np.ndarray],
    directory: str | os.PathLike[str],
    max_shard_size: int | str = "5GB",
    metadata: Mapping[str, str] | None = None,
    *,
    variant: str | None = None,
    basename: str = "model",
    durable: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Save arrays as a Hugging Face sharded checkpoint in ``directory`` (a path, or an fsspec
    URL prefix such as ``s3://bucket/ckpt/`` with ``storage_options`` for its filesystem).

    ``model-00001-of-00003.safetensors`` ... plus ``model.safetensors.index.json`` (a single
    shard is a plain ``model.safetensors``).  ``max_shard_size`` is bytes or "5GB"/"500MB"
    (decimal units); shards are filled greedily in key order and arrays viewing one buffer
    stay together.  Returns the index path (or the single file's path).
    """
    from .sharded import write_sharded

    items = _items(tensor_dict)
    ids = {k: _storage_id(v) for k, v in tensor_dict.items() if isinstance(v, np.ndarray)}
    return write_sharded(
        items, directory, max_shard_size=max_shard_size, metadata=metadata, storage_ids=ids,
        basename=basename, variant=variant, durable=durable, storage_options=storage_options,
    )
