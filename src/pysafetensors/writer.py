"""Plan a layout and stream tensor buffers into a sink, one tensor in memory at a time."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from .errors import IncompleteWrite, SerializeError, TensorNotFound, WriteError
from .format._gcpause import paused_gc
from .format.dtypes import BY_CODE, DType, by_spec_name
from .format.layout import LayoutEntry, WriteLayout, plan_layout
from .io.sinks import AtomicFileSink

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


def plan(items: Iterable[WriteItem], metadata: Mapping[str, str] | None, alignment: int = 8) -> tuple[WriteLayout, dict[str, WriteItem]]:
    by_name = {}
    for item in items:
        if item.name in by_name:
            raise SerializeError(f"tensor name {item.name!r} appears twice", tensor=item.name)
        by_name[item.name] = item
    layout = plan_layout(((i.name, i.dtype, i.shape) for i in by_name.values()), metadata, alignment)
    return layout, by_name


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
    if batch:
        sink.write(batch)


@paused_gc()
def write_bytes(items: Iterable[WriteItem], metadata: Mapping[str, str] | None = None, alignment: int = 8) -> bytes:
    """Serialize to one bytes object."""
    layout, by_name = plan(items, metadata, alignment)
    parts: list[Any] = [layout.prefix]
    parts.extend(_checked(by_name[e.name], e.nbytes) for e in layout.entries)
    return b"".join(parts)  # one copy, straight into the result


@paused_gc()
def write_file(
    items: Iterable[WriteItem],
    path: Any,
    metadata: Mapping[str, str] | None = None,
    alignment: int = 8,
    durable: bool | None = None,
) -> None:
    """Serialize to ``path`` atomically (temp file preallocated to its final size, then renamed;
    ``durable`` adds fsync, see ``AtomicFileSink``)."""
    layout, by_name = plan(items, metadata, alignment)
    with AtomicFileSink(path, durable=durable) as sink:
        sink.reserve(layout.total_size)
        stream(layout, by_name, sink)


# --- incremental writer -----------------------------------------------------------------------

DTypeLike = Any  # DType, "F32", "float32", numpy dtype, torch dtype


def _as_dtype(value: DTypeLike) -> DType:
    """A format dtype from a code ("F32"), a spec name ("float32") or a framework dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        return BY_CODE.get(value) or by_spec_name(value)
    name = getattr(value, "name", None)  # numpy dtype / scalar type
    if not isinstance(name, str):
        name = str(value).removeprefix("torch.")  # torch.float32 -> "float32"
    if name == "bool":
        return BY_CODE["BOOL"]
    return BY_CODE.get(name) or by_spec_name(name)


def _bytes_of(name: str, data: Any) -> tuple[memoryview, Any]:
    """A flat byte view of ``data`` and the object that keeps it alive.

    Accepts buffer-protocol objects (numpy arrays, bytes, memoryview...) and torch tensors,
    duck-typed so this module imports no framework.  Contiguous little-endian data is never
    copied; a strided numpy array is made contiguous here, one tensor at a time.
    """
    if hasattr(data, "untyped_storage") and hasattr(data, "data_ptr"):  # torch.Tensor
        t = data.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        n = t.numel() * t.element_size()
        if n == 0:
            return memoryview(b""), t
        return memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B"), t
    try:
        view = memoryview(data)
    except TypeError:
        raise SerializeError(
            f"tensor {name!r}: expected a buffer (numpy array, bytes...) or a torch tensor, "
            f"got {type(data).__name__}",
            tensor=name,
        ) from None
    if view.format[:1] in ">!":
        raise SerializeError(f"tensor {name!r}: big-endian data; byteswap it to little-endian first", tensor=name)
    if not view.c_contiguous:
        view = memoryview(view.tobytes())  # logical C order; a copy only for this tensor
    return (view.cast("B") if view.format != "B" or view.ndim != 1 else view), data


class SafetensorsWriter:
    """Write a safetensors file tensor by tensor, in any order, from any threads.

    Declare every tensor (name -> (dtype, shape)) and the metadata up front; the header is
    written at once and each tensor's bytes go straight to their planned offset in a temp
    file beside ``path`` (``os.pwrite``, so threads do not contend).  ``close()`` checks that
    every tensor was completely written, then renames the temp file into place (after an fsync
    when ``durable``, see ``AtomicFileSink``);
    ``abort()`` (or an exception inside ``with``) removes the temp file and leaves any old
    file untouched.  The result is byte-identical to ``save_file`` of the same tensors.

    ``dtype`` may be a code (``"F32"``), a TensorSpec name (``"float32"``), a numpy dtype or a
    torch dtype.  ``alignment`` pads the header so the data region starts at a multiple of
    it (default 8: identical to upstream).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        tensors: Mapping[str, tuple[DTypeLike, Sequence[int]]],
        metadata: Mapping[str, str] | None = None,
        *,
        alignment: int = 8,
        durable: bool | None = None,
    ) -> None:
        if not isinstance(tensors, Mapping):
            raise SerializeError(f"tensors must map name -> (dtype, shape), got {type(tensors).__name__}")
        specs = []
        for name, spec in tensors.items():
            try:
                dtype, shape = spec
            except (TypeError, ValueError):
                raise SerializeError(f"tensor {name!r}: expected (dtype, shape), got {spec!r}", tensor=name) from None
            specs.append((name, _as_dtype(dtype), tuple(int(d) for d in shape)))
        self.layout = plan_layout(specs, metadata, alignment)
        self._entries = {e.name: e for e in self.layout.entries}
        self._written: dict[str, list[tuple[int, int]]] = {e.name: [] for e in self.layout.entries}
        self._lock = threading.Lock()
        self._done = False
        self._sink = AtomicFileSink(path, durable=durable)
        try:
            self._sink.reserve(self.layout.total_size)
            self._sink.pwrite(self.layout.prefix, 0)
        except BaseException:
            self._sink.abort()
            raise

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
        """Write tensor ``name``'s whole data (its exact planned byte length)."""
        e = self._entry(name)
        view, keep = _bytes_of(name, data)
        if len(view) != e.nbytes:
            raise SerializeError(
                f"tensor {name!r}: got {len(view)} bytes but {e.dtype.code} {list(e.shape)} needs {e.nbytes}",
                tensor=name,
            )
        self._put(e, 0, view)
        del keep

    def write_chunk(self, name: str, offset: int, data: Any) -> None:
        """Write bytes at ``offset`` within tensor ``name`` (for tensors larger than memory)."""
        e = self._entry(name)
        view, keep = _bytes_of(name, data)
        if offset < 0 or offset + len(view) > e.nbytes:
            raise SerializeError(
                f"tensor {name!r}: chunk [{offset}, {offset + len(view)}) is outside its {e.nbytes} bytes",
                tensor=name,
            )
        self._put(e, offset, view)
        del keep

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

    def __enter__(self) -> SafetensorsWriter:  # noqa: PYI034 - final in practice
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _covers(ranges: list[tuple[int, int]], nbytes: int) -> bool:
    """Whether the union of [begin, end) ranges covers [0, nbytes)."""
    reach = 0
    for begin, end in sorted(ranges):
        if begin > reach:
            return False
        reach = max(reach, end)
    return reach >= nbytes


def open_writer(
    path: str | os.PathLike[str],
    tensors: Mapping[str, tuple[DTypeLike, Sequence[int]]],
    metadata: Mapping[str, str] | None = None,
    *,
    alignment: int = 8,
    durable: bool | None = None,
) -> SafetensorsWriter:
    """Start an incremental write: ``with open_writer(path, {"w": ("F32", (4, 4))}) as w: w.write("w", arr)``."""
    return SafetensorsWriter(path, tensors, metadata, alignment=alignment, durable=durable)
