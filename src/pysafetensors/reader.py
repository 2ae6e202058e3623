"""SafeFile: a validated header over a ByteSource, handing out raw tensor bytes.

No framework code here: the adapters turn a RawTensor into a numpy array, a torch tensor...
:class:`TensorFile` is what every open checkpoint offers (a SafeFile, or a ShardedFile over
many), and all that ``safe_open``, the CLI and the distributed loaders use.
"""

from __future__ import annotations

import mmap
import operator
import os
import threading
from collections.abc import Callable, Iterator
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast, runtime_checkable

from . import io as _io  # its memory check (io.memory), for reads that copy, loads on the first one
from .errors import (
    FileClosed,
    InvalidArgument,
    InvalidArgumentType,
    SafetensorError,
    SourceError,
    TensorNotFound,
    UnsupportedShape,
)
from .format.dtypes import DType
from .format.header import N_LEN, Header, TensorInfo, parse_header, parse_header_length
from .format.slicing import SlicePlan
from .io.protocols import Advisable, ByteSource, RangedReadable, ResidencyAware, ViewSource, capabilities

_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)  # a platform constant (absent on Windows)

_BIG_BUFFER = 1 << 20
# Parallel reads split into chunks this size: big enough that per-call overhead vanishes,
# small enough that 2-16 threads stay balanced on a few hundred MiB.
_READ_CHUNK = 16 << 20
# Headers of _RELEASE_FROM bytes or more are copied out of a map in steps of _HEADER_STEP
# (``_copy_out_of_map``); smaller ones in one go, where the few mapped pages left resident
# beside the copy cost less than the extra calls would.
_HEADER_STEP = 1 << 20
_RELEASE_FROM = 16 << 20
# A slice with more ranges than this reads its bounding block in one call when that block
# is at most _BLOCK_SLACK times the bytes needed (fewer syscalls beat a few extra bytes).
_MANY_RANGES = 64
_BLOCK_SLACK = 2
# Arrays index with signed 64-bit sizes; a zero-element tensor may still declare a bigger dim.
_MAX_DIM = (1 << 63) - 1


def check_representable(name: str, shape: tuple[int, ...]) -> None:
    """Refuse a shape no 64-bit array library can represent (adapters call this before building
    an array: the format allows e.g. ``[2**64 - 1, 0]``, numpy and torch do not)."""
    if not shape or max(shape) <= _MAX_DIM:  # the common case, in C
        return
    for axis, d in enumerate(shape):
        if d > _MAX_DIM:
            raise UnsupportedShape(
                f"tensor {name!r}: dimension #{axis} is {d}, over the {_MAX_DIM} that arrays can index "
                f"(shape {list(shape)})",
                tensor=name,
                shape=shape,
            )


class RawTensor(NamedTuple):
    """A tensor's bytes (little-endian, C order, sub-byte dtypes packed) and how to read them.

    ``shared`` is True when ``data`` views the source itself (a map or caller's bytes) rather
    than a fresh buffer; ``writable`` says whether writing through ``data`` is allowed.
    (A NamedTuple: one is made per tensor on every load, and tuples are the cheapest.)
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    data: memoryview
    shared: bool
    writable: bool


def alloc(nbytes: int, populate: bool = True) -> memoryview:
    """A fresh writable buffer.  Large ones are anonymous maps: page aligned, no zero-fill pass.

    With ``populate`` (and where the OS has ``MAP_POPULATE``) the pages are faulted in by one
    mmap call: for a buffer one thread is about to fill, that costs less CPU than one page
    fault per page.  A buffer several threads fill is better left unpopulated: each thread
    faults in its own chunks while it copies, so the faults run in parallel rather than in one
    thread before any copy starts.
    """
    if nbytes >= _BIG_BUFFER:
        anonymous = getattr(mmap, "MAP_ANONYMOUS", None)
        if anonymous is None:  # Windows: an anonymous map takes no flags
            return memoryview(mmap.mmap(-1, nbytes))
        flags = mmap.MAP_PRIVATE | anonymous | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        return memoryview(mmap.mmap(-1, nbytes, flags=flags))
    return memoryview(bytearray(nbytes))


def check_threads(threads: Any) -> int | None:
    """``threads`` as given when it is None (the default: the CPUs available) or a positive int.

    Anything else raises InvalidArgument (InvalidArgumentType, a TypeError too, for a
    non-integer: ``2.5``, ``"2"``, ``True``) instead of being rounded or ignored.
    """
    if threads is None:
        return None
    if isinstance(threads, bool):
        raise InvalidArgumentType(f"threads must be a positive integer or None, got {threads!r}", threads=threads)
    try:
        n = operator.index(threads)  # ints and integer scalars (numpy's), not floats or strings
    except TypeError:
        raise InvalidArgumentType(
            f"threads must be a positive integer or None, got {threads!r} ({type(threads).__name__})", threads=threads
        ) from None
    if n < 1:
        raise InvalidArgument(f"threads must be a positive integer or None, got {n}", threads=threads)
    return n


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def read_workers(source: ByteSource, nbytes: int, threads: int | None = None) -> int:
    """How many threads ``parallel_read`` uses for ``nbytes`` from ``source`` (``threads``:
    None or a positive int, see ``check_threads``)."""
    if nbytes <= _READ_CHUNK or threads == 1 or not capabilities(source).parallel:
        return 1  # before asking for the CPUs: a syscall, on every small get_tensor otherwise
    workers = default_threads() if threads is None else threads
    return min(workers, -(-nbytes // _READ_CHUNK))


def parallel_read(source: ByteSource, offset: int, buf: memoryview, threads: int | None = None) -> None:
    """Fill ``buf`` from ``source`` at ``offset``, with several threads when the source allows.

    ``os.preadv`` releases the GIL, so threads overlap page-cache copies and disk reads.
    Sources that are not ParallelReadable (file objects) are read in one call.
    """
    n = len(buf)
    workers = read_workers(source, n, threads)
    if workers == 1:
        source.read_into(offset, buf)
        return
    from concurrent.futures import ThreadPoolExecutor  # lazily: a slow import single reads never need

    starts = range(0, n, _READ_CHUNK)

    def job(start: int) -> None:
        source.read_into(offset + start, buf[start : start + _READ_CHUNK])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(job, starts):
            pass  # re-raises the first error


def read_header_bytes(source: ByteSource) -> bytearray:
    """The N header bytes, once the length prefix passed its rule (else its HeaderError).

    Never allocates more than min(cap, file size).  The one way the header is read: the
    reader parses what it returns, ``validate`` lists every problem in it.
    """
    size = source.size
    prefix = bytearray(min(N_LEN, size))
    if size:
        source.read_into(0, memoryview(prefix))
    n = parse_header_length(prefix, size)
    buf = bytearray(n)
    if n >= _RELEASE_FROM and capabilities(source).advice:
        _copy_out_of_map(cast(Advisable, source), N_LEN, memoryview(buf))
    elif n:
        source.read_into(N_LEN, memoryview(buf))
    return buf


def _copy_out_of_map(source: Advisable, offset: int, buf: memoryview) -> None:
    """Copy a large header out of a map in steps, releasing each step's pages once copied.

    The copy is what gets parsed; the mapped pages it came from would otherwise stay in this
    process's resident memory beside it (a second header's worth for a 100 MB one).  The
    header range holds no tensor bytes and no view of it has been handed out, so its pages can
    be released (``MmapSource.release``; the page cache keeps them).  Steps end on multiples of
    ``_HEADER_STEP`` in the file, so only the pages at the two ends straddle a step.
    """
    reader = cast(ByteSource, source)
    end = offset + len(buf)
    source.prefetch(offset, len(buf))
    start = offset
    while start < end:
        stop = min(end, (start // _HEADER_STEP + 1) * _HEADER_STEP)
        reader.read_into(start, buf[start - offset : stop - offset])
        source.release(start, stop - start)
        start = stop


def read_header(source: ByteSource) -> Header:
    """Read and validate a header, never allocating more than min(cap, file size)."""
    return parse_header(read_header_bytes(source), source.size)


def _not_found(name: object) -> TensorNotFound:
    return TensorNotFound(f"File does not contain tensor {name}", tensor=name)


class SafeFile:
    """An open safetensors file.  Thread-safe for reads; ``close`` is idempotent.

    A read that fails (I/O error, a file truncated under the reader, a dropped connection)
    raises a SourceError naming the source, the tensor and the offset where reading stopped;
    nothing partly read is returned, and the file stays usable for other tensors.
    """

    def __init__(self, source: ByteSource, header: Header | None = None) -> None:
        self.source = source
        try:
            self.header = header if header is not None else read_header(source)
        except BaseException:
            source.close()
            raise
        self._closed = False
        self._lock = threading.Lock()
        self._data_start = self.header.data_start  # asked for on every read

    # What the source can do, asked on the first read rather than on every one, and not at
    # open: a process's first check of a source class costs more than a small header's parse,
    # and opening for keys() and metadata() needs none.  Each is a plain attribute after that.
    @cached_property
    def _views(self) -> ViewSource | None:
        return cast(ViewSource, self.source) if capabilities(self.source).view else None

    @cached_property
    def _writable_views(self) -> bool:
        return self._views is not None and not self._views.readonly

    @cached_property
    def _advisor(self) -> Advisable | None:
        advice = capabilities(self.source).advice and _WILLNEED is not None
        return cast(Advisable, self.source) if advice else None

    @cached_property
    def _residency(self) -> ResidencyAware | None:
        return cast(ResidencyAware, self.source) if capabilities(self.source).residency else None

    @cached_property
    def _ranged(self) -> RangedReadable | None:
        return cast(RangedReadable, self.source) if capabilities(self.source).ranged else None

    # --- header facts -----------------------------------------------------------------
    @property
    def name(self) -> str:
        """The source's name: the path, or the URL without credentials."""
        return self.source.name

    @property
    def metadata(self) -> dict[str, str] | None:
        return None if self.header.metadata is None else dict(self.header.metadata)

    def names(self) -> list[str]:
        """Names in file (offset) order."""
        return list(self.header.names)

    def sorted_names(self) -> list[str]:
        """Names sorted (``safe_open.keys()``)."""
        self.check_open()
        return sorted(self.names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.header.index

    def info(self, name: str) -> TensorInfo:
        # Every get_slice asks: check_open and entry inlined (each call layer costs about as
        # much as the lookup itself).
        if self._closed:
            raise FileClosed("File is closed")
        try:
            return self.header.lookup(name)
        except (KeyError, TypeError):
            raise _not_found(name) from None

    def describe(self, name: str) -> tuple[DType, tuple[int, ...]]:
        """``name``'s dtype and shape, all a ``get_slice`` keeps: answered from the header's
        columns without building the entry (FileClosed after close, TensorNotFound)."""
        if self._closed:
            raise FileClosed("File is closed")
        header = self.header
        try:
            # The built index straight, else the property that builds it (a property call
            # costs several times the dict lookup).
            i = (header._index or header.index)[name]
        except (KeyError, TypeError):
            raise _not_found(name) from None
        return header.dtypes[i], header.shapes[i]

    def entry(self, name: str) -> TensorInfo:
        """The header entry of ``name``, open or closed (the header outlives the source)."""
        try:
            return self.header.lookup(name)
        except (KeyError, TypeError):
            raise _not_found(name) from None

    def _position(self, name: str) -> int:
        """Where ``name`` is in file order (TensorNotFound when the header has no such tensor)."""
        try:
            return self.header.index[name]
        except (KeyError, TypeError):
            raise _not_found(name) from None

    def check_open(self) -> None:
        if self._closed:
            raise FileClosed("File is closed")

    # --- bytes --------------------------------------------------------------------------
    def _absolute(self, info: TensorInfo) -> int:
        return self._data_start + info.begin

    def raw(self, name: str) -> RawTensor:
        """The whole tensor: a zero-copy view when the source allows it, else a fresh read."""
        self.check_open()
        i = self._position(name)
        header = self.header
        if self._views is not None:  # the per-call path of get_tensor: no entry built
            begin = header.offsets[i]
            start = self._data_start + begin
            try:
                data = self._views.view(start, header.offsets[i + 1] - begin)
            except OSError as e:
                raise self._read_error(e, start, header.offsets[i + 1] - begin, name) from e
            return RawTensor(name, header.dtypes[i], header.shapes[i], data, True, self._writable_views)
        info = header.entry(i)
        start = self._data_start + info.begin
        try:
            # A big tensor is read like a whole file: in chunks, by the CPUs available.
            workers = read_workers(self.source, info.nbytes)
            if info.nbytes >= _io.memory.CHECK_FROM:  # the message is only worth building then
                self.check_memory(info.nbytes, f"tensor {info.name!r}", workers, bulk=False)
            buf = alloc(info.nbytes, populate=workers == 1)
            if info.nbytes:
                self.check_open()
                parallel_read(self.source, start, buf, workers)
        except OSError as e:
            raise self._read_error(e, start, info.nbytes, info.name) from e
        return RawTensor(info.name, info.dtype, info.shape, buf, False, True)

    def raw_all(self, threads: int | None = None, *, checked: bool = False, advise: bool = True) -> Iterator[RawTensor]:
        """Every tensor in file order, planned from the header in one go.

        View sources (mmap) hand out zero-copy views after one step for the whole data
        region.  A cached file (64 pages probed with ``mincore``) is mapped in now, one byte
        read per 64 KiB (the source's ``populate``; cheaper than ``MADV_POPULATE_READ``,
        which walks every page), so the tensors' first touches take no faults.  Otherwise the
        whole region is read ahead at once (the source's ``prefetch``: ``MADV_WILLNEED`` in
        pieces the kernel does not cut short), so the disk works on all of it while the
        tensors are built and touched.  Not one ``MADV_WILLNEED`` for the whole region: the
        kernel reads only its readahead cap of it, and faults then carry on in 2 MiB folios,
        slow to allocate on a machine whose host reclaims freed memory; not populating a cold
        file: that waits for the disk before any tensor is built; never ``MADV_RANDOM``: it
        turns readahead off (benchmarks/RESULTS.md compares them).  Other sources read the
        data region into one buffer with ``threads`` parallel reads (default: the CPUs
        available), and every tensor views that buffer; a buffer larger than the memory this
        process can have is refused before it is allocated (InsufficientMemory; ``checked``:
        the caller has checked it already).
        ``advise=False``: the caller has given the map its advice (``advise_all``) already.
        """
        threads = check_threads(threads)
        self.check_open()
        header = self.header
        total = header.data_size
        start = header.data_start
        if self._views is not None:
            try:
                region = self._views.view(start, total)  # also checks the file still holds it
            except OSError as e:
                raise self._read_error(e, start, total) from e
            if advise:
                self.advise_all()
            writable = self._writable_views
            offsets = header.offsets
            for i, (name, dtype, shape) in enumerate(zip(header.names, header.dtypes, header.shapes)):
                yield RawTensor(name, dtype, shape, region[offsets[i] : offsets[i + 1]], True, writable)
            return
        # Several reading threads fault the buffer in themselves, in parallel (see alloc).
        workers = read_workers(self.source, total, threads)
        if not checked:
            self.check_memory(total, f"all tensors ({len(header.names)})", workers, bulk=True)
        buf = alloc(total, populate=workers == 1)
        if total:
            self.check_open()
            try:
                parallel_read(self.source, start, buf, workers)
            except OSError as e:
                raise self._read_error(e, start, total, buffer=buf) from e
        yield from _views_of(header, buf)

    def advise_all(self, read_ahead: int | None = None) -> int:
        """Prepare a mapped file's data region for a bulk load (see ``raw_all``): map it in
        when it is cached, else read ahead its first ``read_ahead`` bytes (default: all, as
        far as the source's ``prefetch`` allows).  Returns the bytes asked to be read ahead;
        0 for a cached file or a source that takes no advice."""
        advisor = self._advisor
        total = self.header.data_size
        if advisor is None or total == 0:
            return 0
        start = self.header.data_start
        if self._residency is not None and self._residency.resident(start, total):
            # Cached already: map it now, one fault per 64 KiB, rather than when the tensors
            # are first touched (see MmapSource.populate).
            advisor.populate(start, total)
            return 0
        n = total if read_ahead is None else max(0, min(total, read_ahead))
        if n:
            advisor.prefetch(start, n)
        return n

    def region_read(self, threads: int | None = None) -> RegionRead:
        """The bulk read of a copying file (see ``copies``) as a fresh buffer and independent
        pieces to fill it, for a caller that schedules the reads of several files itself
        (``ShardedFile.raw_all``).  The caller checks the memory first (``check_memory``)."""
        self.check_open()
        return RegionRead(self, read_workers(self.source, self.header.data_size, threads))

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor:
        """Only the bytes a slice needs, in result order.

        One contiguous range over a view source is returned as a zero-copy view; otherwise
        the ranges are gathered into a fresh buffer (see ``_gather``).
        """
        info = self.info(name)
        base = self._absolute(info)
        ranges = list(plan.byte_ranges(name))
        try:
            if self._views is not None and len(ranges) == 1:
                begin, end = ranges[0]
                data = self._views.view(base + begin, end - begin)
                if self._advisor is not None and _WILLNEED is not None:
                    # Read exactly these pages now: faulting them one by one would trigger
                    # read-around of whole readahead windows on a cold file.
                    self._advisor.advise(base + begin, end - begin, _WILLNEED)
                return RawTensor(info.name, info.dtype, plan.shape, data, True, self._writable_views)
            if plan.nbytes >= _io.memory.CHECK_FROM:  # a fresh buffer, whatever the source
                self._check_alloc(plan.nbytes, f"a slice of tensor {info.name!r}", 1, "slice")
            out = alloc(plan.nbytes)
            self._gather(base, ranges, out)
        except OSError as e:
            raise self._read_error(e, base, info.nbytes, info.name) from e
        return RawTensor(info.name, info.dtype, plan.shape, out, False, True)

    def _gather(self, base: int, ranges: list[tuple[int, int]], out: memoryview) -> None:
        """Copy byte ranges (relative to ``base``) into ``out`` back to back.

        View sources copy straight from the map.  Others issue one read per range, except
        for many ranges packed close together: one read of their bounding block (at most
        ``_BLOCK_SLACK`` times the needed bytes) replaces thousands of small reads.
        """
        if not ranges:
            return
        needed = len(out)
        lo, hi = min(b for b, _ in ranges), max(e for _, e in ranges)
        if self._views is not None:
            self.check_open()
            block = self._views.view(base + lo, hi - lo) if hi > lo else memoryview(b"")
        elif self._ranged is not None:
            # Remote sources: nearby ranges share a request, the others run in parallel.
            requests, pos = [], 0
            for begin, end in ranges:
                requests.append((base + begin, out[pos : pos + end - begin]))
                pos += end - begin
            self.check_open()
            self._ranged.read_ranges(requests)
            return
        elif len(ranges) > _MANY_RANGES and lo <= hi and hi - lo <= _BLOCK_SLACK * needed:
            self._check_alloc(needed + hi - lo, "a slice", 1, "slice")
            block = alloc(hi - lo)
            self._read(base + lo, block)
        else:
            pos = 0
            for begin, end in ranges:
                n = end - begin
                self._read(base + begin, out[pos : pos + n])
                pos += n
            return
        pos = 0
        for begin, end in ranges:
            n = end - begin
            out[pos : pos + n] = block[begin - lo : end - lo]
            pos += n

    @property
    def copies(self) -> bool:
        """Whether reading a tensor allocates a buffer for it (pread, remote, file objects),
        rather than viewing a map or bytes already in memory."""
        return self._views is None

    def check_memory(self, nbytes: int, what: str, threads: int = 1, *, bulk: bool, source: str | None = None) -> None:
        """Raise InsufficientMemory when reading ``what`` copies (see ``copies``) into a buffer
        of ``nbytes`` (filled by ``threads`` threads) that would not fit in the memory this
        process can have (``io.memory.check_allocation``).  ``bulk``: a load of every tensor,
        which reading them one at a time avoids (the message's advice); ``source``: the name
        the message gives (default: this file's)."""
        if self.copies:
            self._check_alloc(nbytes, what, threads, "bulk" if bulk else "tensor", source)

    def _check_alloc(self, nbytes: int, what: str, threads: int, kind: str, source: str | None = None) -> None:
        if nbytes < _io.memory.CHECK_FROM:  # small: not worth a probe (nor building the advice)
            return
        if kind == "slice":
            advice = "read a smaller slice"
        else:
            one = "read tensors one at a time with get_tensor" if kind == "bulk" else "read part of it with get_slice"
            if self._ranged is not None:  # remote: no map to fall back on
                advice = f'{one}, or download the file and load it with backend="mmap"'
            else:
                advice = f'load it with backend="mmap" (mapped pages the kernel can evict), or {one}'
        _io.memory.check_allocation(nbytes, source=source or self.name, what=what, threads=threads, advice=advice)

    def _read(self, offset: int, buf: memoryview) -> None:
        if self._closed:
            raise FileClosed("File is closed")
        self.source.read_into(offset, buf)

    def read_data(self, pos: int, buf: memoryview, threads: int | None = None, tensor: str | None = None) -> None:
        """Fill ``buf`` with the data region's bytes from ``pos`` on (0 is the first byte after
        the header), with parallel reads where the source allows (``threads`` as in
        ``raw_all``).  A failure raises a SourceError naming ``tensor`` (default: the tensor
        the failing byte belongs to).  For loaders that stream the data region themselves
        (staging, the distributed loaders, the CLI's ranged reads)."""
        self.check_open()
        start = self.header.data_start + pos
        try:
            parallel_read(self.source, start, buf, threads)
        except OSError as e:
            raise self._read_error(e, start, len(buf), tensor, buf) from e

    def _read_error(
        self, e: OSError, offset: int, length: int, tensor: str | None = None, buffer: memoryview | None = None
    ) -> OSError:
        """``e``, raised reading ``length`` bytes at file offset ``offset`` (into ``buffer``), as a
        SourceError (of ``e``'s class when it is one) naming the source, the tensor and the offset.

        Our sources say where reading stopped (``SourceError.offset``).  When a read spanning
        several tensors failed without saying where (a bare OSError from another source), the
        span is read again tensor by tensor into ``buffer`` (the error path only) to find the
        tensor that fails; if none does, the whole span is named.
        """
        if isinstance(e, SourceError) and e.tensor is not None:
            return e  # already names its tensor
        data_start = self.header.data_start
        stopped = e.offset if isinstance(e, SourceError) else None
        if tensor is None and stopped is None and buffer is not None:
            found = self._failing_piece(offset, length, buffer)
            if found is not None:
                tensor, e, offset, length = found
                stopped = e.offset if isinstance(e, SourceError) else None
        if tensor is None:
            lo = (stopped if stopped is not None else offset) - data_start
            hi = (stopped + 1 if stopped is not None else offset + length) - data_start
            names = [t.name for t in self.header.tensors if t.begin < hi and lo < t.end] or ["?"]
            tensor = names[0]
            what = f"tensor {tensor!r}" if len(names) == 1 else f"tensors {names[0]!r} to {names[-1]!r}"
        else:
            what = f"tensor {tensor!r}"
        src = self.source.name
        where = f"at offset {stopped}" if stopped is not None else f"between offsets {offset} and {offset + length}"
        reason = str(e)
        if reason.startswith(src + ": "):
            reason = reason[len(src) + 2 :]
        context = dict(e.__dict__) if isinstance(e, SafetensorError) else {}
        context.update(offset=stopped if stopped is not None else offset, tensor=tensor, source=src, errno=e.errno)
        message = f"{src}: reading {what} failed {where}: {reason}"
        cls = type(e) if isinstance(e, SourceError) else SourceError
        try:
            return cls(message, **context)
        except TypeError:  # a subclass with a constructor of its own
            return SourceError(message, **context)

    def _failing_piece(self, offset: int, length: int, buffer: memoryview) -> tuple[str, OSError, int, int] | None:
        """Read [offset, offset + length) again one tensor at a time: (tensor, its error, its
        offset, its length) for the first piece that fails, None if every piece reads."""
        rel = offset - self.header.data_start
        pieces = [t for t in self.header.tensors if t.begin < rel + length and rel < t.end]
        if len(pieces) < 2:
            return None
        for t in pieces:
            lo, hi = max(t.begin, rel), min(t.end, rel + length)
            try:
                self.source.read_into(self.header.data_start + lo, buffer[lo - rel : hi - rel])
            except OSError as e:
                return t.name, e, self.header.data_start + lo, hi - lo
        return None

    # --- the CheckpointFiles interface: one file --------------------------------------------
    def parts(self) -> list[SafeFile]:
        return [self]

    def part_tensors(self, i: int) -> list[TensorInfo]:
        self.check_open()
        return list(self.header.tensors)

    def part_metadata(self, i: int) -> dict[str, str] | None:
        return self.metadata

    def part_of(self, name: str) -> int:
        self._position(name)
        return 0

    def file_of(self, name: str) -> SafeFile:
        self._position(name)
        return self

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.source.close()


class RegionRead:
    """A copying file's whole data region read into one fresh buffer, in pieces.

    ``pieces`` are ``(file offset, slice of buffer)``; each may be read in any thread
    (``read``), in any order, when the source is parallel-safe: ``_READ_CHUNK`` pieces then,
    else one piece (a remote source fans its one read out into concurrent requests itself).
    After every piece has been read, ``tensors()`` hands out the tensors in file order, each
    a view of the buffer; ``failed(e)`` turns a piece's error into the file's SourceError.
    """

    def __init__(self, file: SafeFile, workers: int) -> None:
        self.file = file
        header = file.header
        self.start = header.data_start
        self.size = header.data_size
        # One filling thread faults the buffer in fastest with MAP_POPULATE; several fault
        # their own chunks in parallel (see alloc).
        self.buffer = alloc(self.size, populate=workers == 1)
        step = _READ_CHUNK if capabilities(file.source).parallel else max(self.size, 1)
        self.pieces = [(self.start + pos, self.buffer[pos : pos + step]) for pos in range(0, self.size, step)]

    def read(self, piece: tuple[int, memoryview]) -> None:
        self.file.check_open()
        self.file.source.read_into(*piece)

    def failed(self, e: OSError) -> OSError:
        return self.file._read_error(e, self.start, self.size, buffer=self.buffer)

    def tensors(self) -> Iterator[RawTensor]:
        return _views_of(self.file.header, self.buffer)


def _views_of(header: Header, buf: memoryview) -> Iterator[RawTensor]:
    """Every tensor of ``header`` in file order, each a view of ``buf`` (its data region read
    into a fresh buffer)."""
    offsets = header.offsets
    for i, (name, dtype, shape) in enumerate(zip(header.names, header.dtypes, header.shapes)):
        yield RawTensor(name, dtype, shape, buf[offsets[i] : offsets[i + 1]], False, True)


@runtime_checkable
class TensorFile(Protocol):
    """An open checkpoint, one file (:class:`SafeFile`) or many shards behind an index
    (:class:`~pysafetensors.sharded.ShardedFile`): everything ``safe_open``, the CLI and
    the distributed loaders ask of it.

    ``names()`` is file order (shard by shard); ``sorted_names()`` is ``keys()``'s order;
    lookups raise TensorNotFound for an unknown name and FileClosed after ``close()``.
    """

    @property
    def name(self) -> str: ...

    @property
    def metadata(self) -> dict[str, str] | None: ...

    def names(self) -> list[str]: ...

    def sorted_names(self) -> list[str]: ...

    def __contains__(self, name: object, /) -> bool: ...

    def info(self, name: str) -> TensorInfo: ...

    def raw(self, name: str) -> RawTensor: ...

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor: ...

    def raw_all(self, threads: int | None = None) -> Iterator[RawTensor]: ...

    def check_open(self) -> None: ...

    def close(self) -> None: ...


if TYPE_CHECKING:  # a protocol for type checkers only: nothing checks it at run time

    class CheckpointFiles(Protocol):
        """The files behind an open checkpoint (a :class:`SafeFile`, or a
        :class:`~pysafetensors.sharded.ShardedFile`'s shards in index order): what the tools read
        beside the tensors (data regions, header sizes, each shard's metadata, where a tensor lies).

        ``part_tensors(i)`` are the tensors of ``parts()[i]`` that belong to the checkpoint, in
        file order; ``part_of``/``file_of`` raise TensorNotFound for an unknown name.
        """

        def parts(self) -> list[SafeFile]: ...

        def part_tensors(self, i: int) -> list[TensorInfo]: ...

        def part_metadata(self, i: int) -> dict[str, str] | None: ...

        def part_of(self, name: str) -> int: ...

        def file_of(self, name: str) -> SafeFile: ...


class RangedBytes:
    """A tensor's bytes read as they are sliced: ``[lo:hi]`` is ``read(lo, hi)``, that range
    only (a safetensors tensor on a source without zero-copy views, a GGUF tensor's stored bytes)."""

    def __init__(self, read: Callable[[int, int], Any], length: int) -> None:
        self.read = read
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: slice) -> Any:
        if not isinstance(key, slice):
            raise TypeError("RangedBytes supports byte-range slices only")
        start, stop, step = key.indices(self.length)
        if step != 1:
            raise ValueError("RangedBytes slices must be contiguous")
        return self.read(start, max(stop, start))

    def held(self, cap: int) -> Any:
        """The bytes fetched into memory once when they are at most ``cap`` bytes, else as they are."""
        return self[0 : self.length] if self.length <= cap else self

    def resident(self) -> int:
        return 0
