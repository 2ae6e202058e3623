"""Plan a layout and stream tensor buffers into a sink, one tensor in memory at a time."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import IncompleteWrite, NotAMapping, SerializeError, TensorNotFound, UnknownDtype, WriteError
from .format._gcpause import paused_gc
from .format.dtypes import DType, by_buffer_format, by_name
from .format.layout import LayoutEntry, WriteLayout, as_shape, plan_layout
from .io.sinks import CommitOnExit
from .io.targets import StorageOptions, open_sink

# Small tensors are gathered and written with one writev; a batch never holds more than this.
_BATCH_BYTES = 16 << 20
_BATCH_COUNT = 512


@dataclass(frozen=True)
class WriteItem:
    """A tensor to write: its header facts, and a callable giving its bytes when needed.

    ``get_bytes`` returns a buffer of exactly the planned size, in C order, little-endian,
    sub-byte dtypes packed.  It is called once, just before the bytes are written, so a
    non-contiguous tensor is made contiguous only for as long as it takes to write it.
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    get_bytes: Callable[[], Any]


def tensor_mapping(tensors: object) -> Mapping[str, Any]:
    """``tensors`` when it maps names to tensors (every face's and ``serialize``'s one check)."""
    if not isinstance(tensors, Mapping):
        raise NotAMapping(f"expected a mapping of tensor names to tensors, got {type(tensors).__name__}")
    return tensors


def plan(
    items: Iterable[WriteItem], metadata: Mapping[str, str] | None, alignment: int = 8, *, names_checked: bool = False
) -> tuple[WriteLayout, dict[str, WriteItem]]:
    listed = list(items)
    layout = plan_layout(((i.name, i.dtype, i.shape) for i in listed), metadata, alignment, names_checked=names_checked)
    return layout, {i.name: i for i in listed}  # one per name: plan_layout refused any name given twice


def _checked(item: WriteItem, expected: int) -> memoryview:
    buf = item.get_bytes()
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    if len(view) != expected:
        raise SerializeError(
            f"tensor {item.name!r}: buffer has {len(view)} bytes but {item.dtype.code} "
            f"{list(item.shape)} needs {expected}",
            tensor=item.name,
        )
    return view


def stream(layout: WriteLayout, items: Mapping[str, WriteItem], sink: Any) -> None:
    """Write the prefix and every tensor in layout order."""
    batch: list[Any] = [layout.prefix]
    batch_bytes = len(layout.prefix)
    for entry in layout.entries:
        view = _checked(items[entry.name], entry.nbytes)
        if batch and (batch_bytes + len(view) > _BATCH_BYTES or len(batch) >= _BATCH_COUNT):
            sink.write(batch)
            batch, batch_bytes = [], 0
        batch.append(view)
        batch_bytes += len(view)
        if batch_bytes >= _BATCH_BYTES:
            sink.write(batch)
            batch, batch_bytes = [], 0
        # The next tensor's bytes are made before ``view`` is rebound: unless the batch still
        # holds this one, let it go now, so tensors made on demand are alive one at a time.
        del view
    if batch:
        sink.write(batch)


@paused_gc()
def write_bytes(items: Iterable[WriteItem], metadata: Mapping[str, str] | None = None, alignment: int = 8) -> bytes:
    """Serialize to one bytes object."""
    layout, named = plan(items, metadata, alignment)
    parts: list[Any] = [layout.prefix]
    parts.extend(_checked(named[e.name], e.nbytes) for e in layout.entries)
    return b"".join(parts)  # one copy, straight into the result


@paused_gc()
def write_file(
    items: Iterable[WriteItem],
    path: Any,
    metadata: Mapping[str, str] | None = None,
    alignment: int = 8,
    durable: bool | None = None,
    storage_options: StorageOptions = None,
    *,
    names_checked: bool = False,
) -> None:
    """Serialize to ``path`` atomically: a local path through a temp file preallocated to its
    final size, then renamed (``durable`` adds fsync, see ``AtomicFileSink``); an fsspec URL
    streamed to the store and published at the end (``RemoteFileSink``; ``storage_options``
    go to its filesystem).  ``names_checked``: as for ``plan_layout``."""
    layout, named = plan(items, metadata, alignment, names_checked=names_checked)
    with open_sink(path, durable=durable, storage_options=storage_options) as sink:
        sink.reserve(layout.total_size)
        stream(layout, named, sink)


# --- incremental writer -----------------------------------------------------------------------

DTypeLike = Any  # DType, "F32", "float32"; framework dtypes through pysafetensors.open_writer


@dataclass(frozen=True)
class _Data:
    """What a write brings: its bytes, and its dtype and shape when the object carries them."""

    view: memoryview
    dtype: DType | None
    shape: tuple[int, ...] | None
    keep: Any  # keeps the memory behind ``view`` alive


def _flat(view: memoryview) -> memoryview:
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _buffer_data(name: str, data: Any) -> _Data:
    """A buffer-protocol object: its bytes in logical C order, and the dtype its format names."""
    try:
        view = memoryview(data)
    except TypeError:
        raise SerializeError(
            f"tensor {name!r}: expected a buffer (bytes, numpy array...) or a framework tensor, "
            f"got {type(data).__name__}",
            tensor=name,
        ) from None
    if view.format[:1] in ">!":
        raise SerializeError(f"tensor {name!r}: big-endian data; byteswap it to little-endian first", tensor=name)
    dtype = by_buffer_format(view.format, view.itemsize)
    if dtype is None:
        raise SerializeError(
            f"tensor {name!r}: buffer format {view.format!r} has no safetensors dtype; "
            "pass its bytes instead (memoryview(x).cast('B'))",
            tensor=name,
        )
    if not view.c_contiguous:
        view = memoryview(view.tobytes())  # logical C order; a copy only for this tensor
    return _Data(_flat(view), dtype, tuple(view.shape or ()), data)


class IncrementalWriter(CommitOnExit):
    """Write a safetensors file tensor by tensor, in any order, from any threads.

    Declare every tensor (name -> (dtype, shape)) and the metadata up front; the header is
    written at once and each tensor's bytes go straight to their planned offset in a temp
    file beside ``path`` (``os.pwrite``, so threads do not contend).  ``close()`` checks that
    every tensor was completely written, then renames the temp file into place (after an fsync
    when ``durable``, see ``AtomicFileSink``);
    ``abort()`` (or an exception inside ``with``) removes the temp file and leaves any old
    file untouched.  The result is byte-identical to ``save_file`` of the same tensors.

    ``path`` may be an fsspec URL (``s3://...``, ``storage_options`` for its filesystem):
    since tensors arrive in any order, the file is then staged in a local temp file (in
    ``TMPDIR``: it needs local disk for the whole file) and uploaded by ``close()``, all or
    nothing as ``save_file`` to a URL (``io.remote_sinks.StagedUploadSink``).

    What is written is checked against the declaration: data that carries a dtype must have
    the declared one, and ``write`` (the whole tensor) also needs the declared shape.  Unsigned
    bytes (``bytes``, ``bytearray``, a uint8 array or a ``memoryview`` of format ``"B"``) are
    taken as the tensor's raw bytes, whatever it was declared as: only their length is checked.
    This class takes buffers and ``WriteItem``s; ``pysafetensors.open_writer`` adds framework
    tensors and dtypes (``_adapt`` and ``_resolve_dtype`` are the hooks it fills in).

    ``dtype`` may be a ``DType``, a code (``"F32"``) or a TensorSpec name (``"float32"``).
    ``alignment`` pads the header so the data region starts at a multiple of it (default 8:
    identical to upstream).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        tensors: Mapping[str, tuple[DTypeLike, Sequence[int]]],
        metadata: Mapping[str, str] | None = None,
        *,
        alignment: int = 8,
        durable: bool | None = None,
        storage_options: StorageOptions = None,
    ) -> None:
        if not isinstance(tensors, Mapping):
            raise SerializeError(f"tensors must map name -> (dtype, shape), got {type(tensors).__name__}")
        specs = []
        for name, spec in tensors.items():
            try:
                dtype, shape = spec
            except (TypeError, ValueError):
                raise SerializeError(f"tensor {name!r}: expected (dtype, shape), got {spec!r}", tensor=name) from None
            specs.append((name, self._dtype(name, dtype), as_shape(shape, name)))
        self.layout = plan_layout(specs, metadata, alignment)
        self._entries = {e.name: e for e in self.layout.entries}
        self._written: dict[str, list[tuple[int, int]]] = {e.name: [] for e in self.layout.entries}
        self._lock = threading.Lock()
        self._done = False
        self._sink = open_sink(path, durable=durable, storage_options=storage_options, random_access=True)
        try:
            self._sink.reserve(self.layout.total_size)
            self._sink.pwrite(self.layout.prefix, 0)
        except BaseException:
            self._sink.abort()
            raise

    # --- hooks: the layer above knows frameworks ------------------------------------------
    def _adapt(self, name: str, data: Any) -> WriteItem | None:
        """``data`` as a WriteItem when a framework owns it; None: take it as a buffer."""
        return None

    def _resolve_dtype(self, value: Any) -> DType | None:
        """A framework dtype object as a format dtype; None when not one."""
        return None

    def _dtype(self, name: str, value: DTypeLike) -> DType:
        if isinstance(value, DType):
            return value
        if isinstance(value, str):
            return by_name(value)
        found = self._resolve_dtype(value)
        if found is None:
            raise UnknownDtype(
                f"tensor {name!r}: dtype {value!r} is not understood; give a code such as 'F32', a name "
                "such as 'float32', or a numpy/torch dtype",
                tensor=name,
                dtype=repr(value),
            )
        return found

    def _data(self, name: str, data: Any) -> _Data:
        item = data if isinstance(data, WriteItem) else self._adapt(name, data)
        if item is None:
            return _buffer_data(name, data)
        buf = item.get_bytes()
        return _Data(_flat(memoryview(buf)), item.dtype, item.shape, buf)

    @staticmethod
    def _check_kind(e: LayoutEntry, got: _Data, whole: bool) -> None:
        if got.dtype is None or got.dtype.code == "U8":
            return  # raw bytes: only the length counts
        if got.dtype != e.dtype:
            raise SerializeError(
                f"tensor {e.name!r} is declared {e.dtype.code} {list(e.shape)} but the data written is "
                f"{got.dtype.code}; convert it, or pass its raw bytes",
                tensor=e.name, expected=e.dtype.code, found=got.dtype.code,
            )
        if whole and got.shape is not None and got.shape != e.shape:
            raise SerializeError(
                f"tensor {e.name!r} is declared {e.dtype.code} {list(e.shape)} but the data written has "
                f"shape {list(got.shape)}; reshape it, or pass its raw bytes",
                tensor=e.name, expected=e.shape, found=got.shape,
            )

    # --- the writer ---------------------------------------------------------------------------
    @property
    def data_start(self) -> int:
        """Absolute file offset of the data region."""
        return self.layout.data_start

    def offset_of(self, name: str) -> tuple[int, int]:
        """(absolute file offset, byte length) planned for tensor ``name``."""
        e = self._entry(name)
        return self.layout.data_start + e.begin, e.nbytes

    def _entry(self, name: str) -> LayoutEntry:
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise TensorNotFound(f"tensor {name!r} was not declared to this writer", tensor=name) from None

    def write(self, name: str, data: Any) -> None:
        """Write tensor ``name``'s whole data: the declared dtype and shape, or its exact raw bytes."""
        e = self._entry(name)
        got = self._data(name, data)
        self._check_kind(e, got, whole=True)
        if len(got.view) != e.nbytes:
            raise SerializeError(
                f"tensor {name!r}: got {len(got.view)} bytes but {e.dtype.code} {list(e.shape)} needs {e.nbytes}",
                tensor=name,
            )
        self._put(e, 0, got.view)

    def write_chunk(self, name: str, offset: int, data: Any) -> None:
        """Write bytes at byte ``offset`` within tensor ``name`` (for tensors larger than memory).

        A chunk that carries a dtype must have the declared one; raw bytes go as they are."""
        e = self._entry(name)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise SerializeError(f"tensor {name!r}: chunk offset must be an int, got {offset!r}", tensor=name)
        got = self._data(name, data)
        self._check_kind(e, got, whole=False)
        if offset < 0 or offset + len(got.view) > e.nbytes:
            raise SerializeError(
                f"tensor {name!r}: chunk [{offset}, {offset + len(got.view)}) is outside its {e.nbytes} bytes",
                tensor=name,
            )
        self._put(e, offset, got.view)

    def _put(self, e: LayoutEntry, offset: int, view: memoryview) -> None:
        if self._done:
            raise WriteError(f"writer for {self._sink.path} is already closed")
        if len(view):
            self._sink.pwrite(view, self.layout.data_start + e.begin + offset)
        with self._lock:
            self._written[e.name].append((offset, offset + len(view)))

    def missing(self) -> list[str]:
        """Names of tensors not yet completely written, in file order."""
        with self._lock:
            return [e.name for e in self.layout.entries if not _covers(self._written[e.name], e.nbytes)]

    def close(self) -> None:
        """Check every tensor is complete, then rename into place (fsync first when durable)."""
        if self._done:
            return
        missing = self.missing()
        if missing:
            self.abort()
            shown = ", ".join(repr(m) for m in missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise IncompleteWrite(
                f"{len(missing)} tensor(s) were declared but not completely written: {shown}; "
                f"{self._sink.path} was not written",
                missing=missing,
            )
        self._done = True
        self._sink.commit()

    def abort(self) -> None:
        """Discard everything written; the temp file is removed, an old file stays as it was."""
        self._done = True
        self._sink.abort()

    def commit(self) -> None:
        """The same as ``close``: what ``with`` calls when the block ends normally."""
        self.close()


def _covers(ranges: list[tuple[int, int]], nbytes: int) -> bool:
    """Whether the union of [begin, end) ranges covers [0, nbytes)."""
    reach = 0
    for begin, end in sorted(ranges):
        if begin > reach:
            return False
        reach = max(reach, end)
    return reach >= nbytes
