"""Plan a layout and stream tensor buffers into a sink, one tensor in memory at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import SerializeError
from .format.dtypes import DType
from .format.layout import WriteLayout, plan_layout
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


def write_bytes(items: Iterable[WriteItem], metadata: Mapping[str, str] | None = None, alignment: int = 8) -> bytes:
    """Serialize to one bytes object."""
    layout, by_name = plan(items, metadata, alignment)
    parts: list[Any] = [layout.prefix]
    parts.extend(_checked(by_name[e.name], e.nbytes) for e in layout.entries)
    return b"".join(parts)  # one copy, straight into the result


def write_file(
    items: Iterable[WriteItem],
    path: Any,
    metadata: Mapping[str, str] | None = None,
    alignment: int = 8,
) -> None:
    """Serialize to ``path`` atomically (temp file, fsync, rename)."""
    layout, by_name = plan(items, metadata, alignment)
    with AtomicFileSink(path) as sink:
        stream(layout, by_name, sink)
