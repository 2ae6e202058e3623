"""The typed interfaces of byte sources: one small protocol for what every source does, and one
per optional capability.

A source is a :class:`ByteSource`.  What else it can do (hand out zero-copy views, be read
from several threads at once, fetch many ranges in one go, take page-cache advice, say what
is cached) is a separate protocol, checked with ``isinstance``.  A ``runtime_checkable``
check looks up every member by name, which costs microseconds, so the reader asks
:func:`capabilities` once per file instead: it checks each protocol once per source class.
Capabilities are therefore a property of the class (declare them as methods or class
attributes, not per instance).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "Advisable",
    "BinaryFile",
    "ByteSource",
    "Capabilities",
    "ParallelReadable",
    "RangedReadable",
    "ReadsInto",
    "ResidencyAware",
    "ViewSource",
    "capabilities",
]


@runtime_checkable
class ByteSource(Protocol):
    """Where a file's bytes come from.

    ``read_into`` fills the whole buffer or raises: a :class:`~pysafetensors.errors.SourceError`
    (with ``offset``, the file offset where reading stopped) when the bytes cannot be had,
    :class:`~pysafetensors.errors.FileClosed` after ``close``.  ``close`` is idempotent.
    """

    name: str  # the path, or the URL with credentials removed: what error messages show
    size: int

    def read_into(self, offset: int, buffer: memoryview) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ViewSource(Protocol):
    """Zero-copy views of the bytes (a map, bytes in memory).

    ``readonly`` says whether writing through a view is refused (caller's ``bytes``); a
    copy-on-write map allows it without reaching the file.
    """

    readonly: bool

    def view(self, offset: int, length: int) -> memoryview: ...


@runtime_checkable
class ParallelReadable(Protocol):
    """``read_into`` may run in several threads at once on disjoint buffers (a ``pread``, or a
    copy out of a map, with the GIL released), so big reads are split over threads.
    ``parallel_safe`` must be True."""

    parallel_safe: bool


@runtime_checkable
class RangedReadable(Protocol):
    """Many ``(offset, buffer)`` pairs filled in one call: nearby ranges share a request and the
    others are fetched concurrently (remote sources)."""

    def read_ranges(self, requests: Sequence[tuple[int, memoryview]]) -> None: ...


@runtime_checkable
class Advisable(Protocol):
    """Page-cache advice for byte ranges of a mapped file.

    ``advise`` passes one ``madvise`` hint; ``prefetch`` starts reading a range without waiting;
    ``populate`` maps an already cached range into the page tables; ``release`` takes a range
    that was copied out (and that no view handed out covers) back out of them.  All are hints:
    they never raise for a range the system cannot act on.
    """

    def advise(self, offset: int, length: int, advice: int) -> None: ...

    def prefetch(self, offset: int, length: int) -> None: ...

    def populate(self, offset: int, length: int) -> None: ...

    def release(self, offset: int, length: int) -> None: ...


@runtime_checkable
class ResidencyAware(Protocol):
    """Whether a byte range looks cached in memory (True/False), or None when it cannot tell."""

    def resident(self, offset: int, length: int, probes: int = 64) -> bool | None: ...


@runtime_checkable
class BinaryFile(Protocol):
    """A caller's readable, seekable binary file object (what ``open_source`` reads through)."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


@runtime_checkable
class ReadsInto(Protocol):
    """A file object that fills a caller's buffer in place (``io.RawIOBase``/``BufferedIOBase``)."""

    def readinto(self, buffer: memoryview, /) -> int | None: ...


class Capabilities(NamedTuple):
    """Which optional protocols a source implements."""

    view: bool
    parallel: bool
    ranged: bool
    advice: bool
    residency: bool


_BY_CLASS: dict[type, Capabilities] = {}


def capabilities(source: object) -> Capabilities:
    """The capabilities of ``source``, checked with ``isinstance`` once per source class."""
    cls = type(source)
    caps = _BY_CLASS.get(cls)
    if caps is None:
        caps = _BY_CLASS[cls] = Capabilities(
            view=isinstance(source, ViewSource),
            parallel=isinstance(source, ParallelReadable) and source.parallel_safe is True,
            ranged=isinstance(source, RangedReadable),
            advice=isinstance(source, Advisable),
            residency=isinstance(source, ResidencyAware),
        )
    return caps
