"""safe_open: the upstream-compatible lazy file handle."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from functools import cached_property
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._adapters import Adapter, load_adapter, needed_at_open
from ._device import parse_device
from .errors import BYTES_PREFIX, HeaderError
from .format._gcpause import paused_gc
from .format.slicing import is_full_index
from .io.locate import is_index_name, resolve_location
from .io.registry import open_source
from .io.sources import MemorySource
from .reader import SafeFile, TensorFile, check_threads

if TYPE_CHECKING:
    from typing_extensions import Self

    from .format.header import TensorInfo
    from .sharded import ShardedFile


def open_file(
    obj: Any, backend: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> SafeFile | ShardedFile:
    """A SafeFile, or a ShardedFile for an index file or a checkpoint directory (a local one, or
    an fsspec URL prefix such as ``s3://bucket/ckpt/``: its index, or its only file).

    The sharded reader is imported only when a sharded checkpoint is opened."""
    path = os.fspath(obj) if isinstance(obj, os.PathLike) else obj
    if isinstance(path, str):
        path = resolve_location(path, storage_options)
    if is_index_name(path):
        from .sharded import open_index

        return open_index(path, backend, storage_options)
    return SafeFile(open_source(path, backend, storage_options))


class safe_open:
    """Open a safetensors file lazily; tensors are read only when asked for.

    Args:
        filename: path (str or PathLike), bytes-like object, binary file object,
            ``http(s)://`` or fsspec URL (``s3://``, ``memory://``, ``hf://``...), or a sharded
            checkpoint: a ``*.index.json`` (path or URL) or a directory holding one.
        framework: ``pt``/``torch``/``pytorch``, ``np``/``numpy``, ``tf``/``tensorflow``,
            ``jax``/``flax``, ``mlx`` or ``paddle`` (case-sensitive, as upstream).
        device: ``cpu`` (default), ``cuda``, ``cuda:N``, an int, ``mps``...
        backend: ``"mmap"`` (zero-copy views of a copy-on-write map; numpy arrays are
            read-only) or ``"pread"`` (fresh buffers filled with ``os.preadv``).  Default:
            ``"mmap"``, or ``"pread"`` for each file on a network or FUSE filesystem (NFS,
            SMB, sshfs...), where a file shrunk by another client would SIGBUS a map; the
            shards of a sharded checkpoint are decided one by one.
        storage_options: options for a remote source: for HTTP ``token``, ``headers``,
            ``timeout``, ``retries``, ``allow_full_download``...; for fsspec URLs the
            filesystem's options (``key``, ``secret``, ``client_kwargs``, ``anon``...).

    Usable with or without ``with``; a handle may be shared between threads.
    """

    def __init__(
        self,
        filename: Any,
        framework: str,
        device: Any = "cpu",
        *,
        backend: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._framework = framework
        if needed_at_open(framework):  # InvalidFramework, or the framework missing: fails first
            self._adapter = load_adapter(framework)
        self._device = parse_device(device)
        if not self._device.is_cpu:  # every adapter accepts the CPU (Adapter.check_device)
            self._adapter.check_device(self._device)
        # io.open_source validates the backend and, when it is None, chooses it per file.
        file = open_file(filename, backend, storage_options)
        self._file: TensorFile = file
        # What every get_slice asks (dtype and shape from the header's columns), bound once.
        self._describe = file.describe

    @cached_property
    def _adapter(self) -> Adapter:
        """The framework's adapter, imported at open or on first use (``needed_at_open``)."""
        return load_adapter(self._framework)

    # --- context manager ------------------------------------------------------------------
    def __enter__(self) -> Self:
        self._file.check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._file.close()

    def close(self) -> None:
        """Release the file; tensors already returned stay valid."""
        self._file.close()

    def __del__(self) -> None:
        # A handle used without ``with`` and never closed must not keep its descriptor open
        # (pread holds an fd, which the garbage collector would never release on its own).
        file = getattr(self, "_file", None)
        if file is not None:
            with contextlib.suppress(Exception):  # nothing useful to do during collection/shutdown
                file.close()

    # --- header -----------------------------------------------------------------------------
    def keys(self) -> list[str]:
        """Tensor names, sorted."""
        self._file.check_open()
        return self._file.sorted_names()  # sharded: straight from the index

    def offset_keys(self) -> list[str]:
        """Tensor names in file (data offset) order."""
        self._file.check_open()
        return self._file.names()

    def metadata(self) -> dict[str, str] | None:
        """The ``__metadata__`` dict, or None when the file has none."""
        self._file.check_open()
        return self._file.metadata

    # --- tensors ----------------------------------------------------------------------------
    def get_tensor(self, name: str) -> Any:
        """The whole tensor ``name`` in the handle's framework and device."""
        return self._adapter.from_raw(self._file.raw(name), self._device)

    @paused_gc()
    def get_tensors(self, *, threads: int | None = None) -> dict[str, Any]:
        """Every tensor, keyed by name, in file order.

        One bulk plan: mmap hands out zero-copy views; pread fills one buffer with
        ``threads`` parallel reads (None, the default: the CPUs available; else a positive
        int, anything else raises InvalidArgument).  torch on CUDA goes through a bounded
        ring of pinned staging buffers (``pysafetensors.staging``).
        """
        threads = check_threads(threads)
        if self._device.kind == "cuda" and self._adapter.NAME == "torch":
            from .staging import load_to_device

            return load_to_device(self._file, str(self._device), threads=threads)
        return {raw.name: self._adapter.from_raw(raw, self._device) for raw in self._file.raw_all(threads)}

    def get_slice(self, name: str) -> SafeSlice:
        """A lazy view of ``name``: index it to read only the bytes the index needs."""
        # Built in place rather than through __init__ (a call layer costs about as much as the
        # lookup): the hot call of transformers' loading loop.
        s = _new_slice(SafeSlice)
        s._handle = self
        s._name = name
        s._dtype, s._shape = self._describe(name)
        return s


class SafeSlice:
    """Returned by ``safe_open.get_slice``: shape and dtype now, bytes on indexing."""

    # One is made per tensor by loaders that keep them (transformers): slots, and only what the
    # header entry says (its dtype, and its shape tuple, which the header shares between
    # tensors), so a kept slice is one object for the garbage collector, not three.
    __slots__ = ("_dtype", "_handle", "_name", "_shape")

    def __init__(self, handle: safe_open, name: str, info: TensorInfo | None = None) -> None:
        self._handle = handle
        self._name = name
        if info is None:
            self._dtype, self._shape = handle._describe(name)
        else:
            self._dtype, self._shape = info.dtype, info.shape

    def get_shape(self) -> list[int]:
        return list(self._shape)

    def get_dtype(self) -> str:
        return self._dtype.code

    @property
    def shape(self) -> list[int]:
        return self.get_shape()

    @property
    def dtype(self) -> str:
        return self.get_dtype()

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __getitem__(self, index: Any) -> Any:
        h = self._handle
        if is_full_index(index, len(self._shape)):
            # ``[:]``, ``[...]``: the whole tensor, as get_tensor reads it (no slice plan).
            return h._adapter.from_raw(h._file.raw(self._name), h._device)
        return h._adapter.get_slice(h._file, self._name, index, h._device)

    def __repr__(self) -> str:
        return f"<SafeSlice {self._name!r} {self.get_dtype()} {self.get_shape()}>"


_new_slice = object.__new__


def _safe_open_handle(file_object: Any, framework: str, device: Any = "cpu") -> safe_open:
    """safe_open over an already open binary file object (or bytes)."""
    return safe_open(file_object, framework, device)


def open_bytes(data: Any) -> SafeFile:
    """A SafeFile over bytes, with ``deserialize``'s error wording."""
    try:
        return SafeFile(MemorySource(data))
    except HeaderError as e:
        raise e.with_prefix(BYTES_PREFIX) from None


__all__ = ["SafeSlice", "_safe_open_handle", "open_bytes", "safe_open"]
