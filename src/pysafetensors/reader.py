"""SafeFile: a validated header over a ByteSource, handing out raw tensor bytes.

No framework code here: the adapters turn a RawTensor into a numpy array, a torch tensor...
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Iterator
from functools import cached_property
from typing import Any, NamedTuple

from .errors import FileClosed, TensorNotFound, UnsupportedShape
from .format.dtypes import DType
from .format.header import N_LEN, Header, TensorInfo, parse_header, parse_header_length
from .format.slicing import SlicePlan
from .io.sources import supports_view

_BIG_BUFFER = 1 << 20
# Parallel reads split into chunks this size: big enough that per-call overhead vanishes,
# small enough that 2-16 threads stay balanced on a few hundred MiB.
_READ_CHUNK = 16 << 20
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
    mmap call: for a buffer one thread is about to fill, that costs ~35% less CPU than taking
    131,072 separate page faults for 512 MiB.  A buffer several threads fill is better left
    unpopulated: each thread faults in its own chunks while it copies, so the faults run in
    parallel instead of in one thread before any copy starts (512 MiB with 2 threads:
    0.19-0.29 s against 0.26-1.03 s populated; benchmarks/RESULTS.md).
    """
    if nbytes >= _BIG_BUFFER:
        anonymous = getattr(mmap, "MAP_ANONYMOUS", None)
        if anonymous is None:  # Windows: an anonymous map takes no flags
            return memoryview(mmap.mmap(-1, nbytes))
        flags = mmap.MAP_PRIVATE | anonymous | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        return memoryview(mmap.mmap(-1, nbytes, flags=flags))
    return memoryview(bytearray(nbytes))


def default_threads() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def read_workers(source: Any, nbytes: int, threads: int | None = None) -> int:
    """How many threads ``parallel_read`` uses for ``nbytes`` from ``source``."""
    workers = default_threads() if threads is None else max(1, int(threads))
    if workers == 1 or nbytes <= _READ_CHUNK or not getattr(source, "parallel_safe", False):
        return 1
    return min(workers, -(-nbytes // _READ_CHUNK))


def parallel_read(source: Any, offset: int, buf: memoryview, threads: int | None = None) -> None:
    """Fill ``buf`` from ``source`` at ``offset``, with several threads when the source allows.

    ``os.preadv`` releases the GIL, so threads overlap page-cache copies and disk reads.
    Sources without a ``parallel_safe`` flag (file objects) are read in one call.
    """
    n = len(buf)
    workers = read_workers(source, n, threads)
    if workers == 1:
        source.read_into(offset, buf)
        return
    from concurrent.futures import ThreadPoolExecutor  # lazily: 7 ms of imports

    starts = range(0, n, _READ_CHUNK)

    def job(start: int) -> None:
        source.read_into(offset + start, buf[start : start + _READ_CHUNK])

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(job, starts):
            pass  # re-raises the first error


def read_header_bytes(source: Any) -> bytearray:
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
    if n:
        source.read_into(N_LEN, memoryview(buf))
    return buf


def read_header(source: Any) -> Header:
    """Read and validate a header, never allocating more than min(cap, file size)."""
    return parse_header(read_header_bytes(source), source.size)


class SafeFile:
    """An open safetensors file.  Thread-safe for reads; ``close`` is idempotent."""

    def __init__(self, source: Any, header: Header | None = None) -> None:
        self.source = source
        try:
            self.header = header if header is not None else read_header(source)
        except BaseException:
            source.close()
            raise
        self._zero_copy = supports_view(source)
        self._writable_views = not getattr(source, "readonly", False)
        self._closed = False
        self._lock = threading.Lock()

    # --- header facts -----------------------------------------------------------------
    @cached_property
    def _by_name(self) -> dict[str, TensorInfo]:
        # Built on first lookup: opening for keys()/metadata() never pays for it.
        return self.header.by_name()

    @property
    def metadata(self) -> dict[str, str] | None:
        return None if self.header.metadata is None else dict(self.header.metadata)

    def names(self) -> list[str]:
        """Names in file (offset) order."""
        return [t.name for t in self.header.tensors]

    def info(self, name: str) -> TensorInfo:
        self.check_open()
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise TensorNotFound(f"File does not contain tensor {name}", tensor=name) from None

    def check_open(self) -> None:
        if self._closed:
            raise FileClosed("File is closed")

    # --- bytes --------------------------------------------------------------------------
    def _absolute(self, info: TensorInfo) -> int:
        return self.header.data_start + info.begin

    def raw(self, name: str) -> RawTensor:
        """The whole tensor: a zero-copy view when the source allows it, else a fresh read."""
        info = self.info(name)
        if self._zero_copy:
            data = self.source.view(self._absolute(info), info.nbytes)
            return RawTensor(info.name, info.dtype, info.shape, data, True, self._writable_views)
        # A big tensor is read like a whole file: in chunks, by the CPUs available.
        workers = read_workers(self.source, info.nbytes)
        buf = alloc(info.nbytes, populate=workers == 1)
        if info.nbytes:
            self.check_open()
            parallel_read(self.source, self._absolute(info), buf, workers)
        return RawTensor(info.name, info.dtype, info.shape, buf, False, True)

    def raw_all(self, threads: int | None = None) -> Iterator[RawTensor]:
        """Every tensor in file order, planned from the header in one go.

        View sources (mmap) hand out zero-copy views after one step for the whole data
        region.  A cached file (64 pages probed with ``mincore``) is mapped in now, one byte
        read per 64 KiB (the source's ``populate``; cheaper than ``MADV_POPULATE_READ``,
        which walks every page), so the tensors' first touches take no faults.  Otherwise the
        whole region is read ahead at once (the source's ``prefetch``: ``MADV_WILLNEED`` in pieces the kernel does not cut short), so the disk
        works on all of it while the tensors are built and touched.  Measured alternatives
        (benchmarks/RESULTS.md): one ``MADV_WILLNEED`` (the kernel reads 8 MiB of it, faults
        carry on in 2 MiB folios) was 2-3x slower on an idle machine; populating a cold file
        is synchronous and was slower; ``MADV_RANDOM`` 10x slower.
        Other sources read the data region into one buffer with ``threads``
        parallel reads (default: the CPUs available), and every tensor views that buffer.
        """
        self.check_open()
        header = self.header
        total = header.data_size
        if self._zero_copy:
            advise = getattr(self.source, "advise", None)
            if advise is not None and hasattr(mmap, "MADV_WILLNEED"):
                resident = getattr(self.source, "resident", None)
                hot = total > 0 and resident is not None and resident(header.data_start, total)
                if hot:
                    # Cached already: map it now, one fault per 64 KiB, rather than when the
                    # tensors are first touched (see MmapSource.populate).
                    self.source.populate(header.data_start, total)
                else:
                    self.source.prefetch(header.data_start, total)  # advise's companion
            region = self.source.view(header.data_start, total)
            for t in header.tensors:
                yield RawTensor(t.name, t.dtype, t.shape, region[t.begin : t.end], True, self._writable_views)
            return
        # Several reading threads fault the buffer in themselves, in parallel (see alloc).
        workers = read_workers(self.source, total, threads)
        buf = alloc(total, populate=workers == 1)
        if total:
            self.check_open()
            parallel_read(self.source, header.data_start, buf, workers)
        for t in header.tensors:
            yield RawTensor(t.name, t.dtype, t.shape, buf[t.begin : t.end], False, True)

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor:
        """Only the bytes a slice needs, in result order.

        One contiguous range over a view source is returned as a zero-copy view; otherwise
        the ranges are gathered into a fresh buffer (see ``_gather``).
        """
        info = self.info(name)
        base = self._absolute(info)
        ranges = list(plan.byte_ranges(name))
        if self._zero_copy and len(ranges) == 1:
            begin, end = ranges[0]
            data = self.source.view(base + begin, end - begin)
            advise = getattr(self.source, "advise", None)
            if advise is not None and hasattr(mmap, "MADV_WILLNEED"):
                # Read exactly these pages now: faulting them one by one would trigger
                # read-around of whole readahead windows on a cold file.
                advise(base + begin, end - begin, mmap.MADV_WILLNEED)
            return RawTensor(info.name, info.dtype, plan.shape, data, True, self._writable_views)
        out = alloc(plan.nbytes)
        self._gather(base, ranges, out)
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
        if self._zero_copy:
            self.check_open()
            block = self.source.view(base + lo, hi - lo) if hi > lo else memoryview(b"")
        elif getattr(self.source, "read_ranges", None) is not None:
            # Remote sources: nearby ranges share a request, the others run in parallel.
            requests, pos = [], 0
            for begin, end in ranges:
                requests.append((base + begin, out[pos : pos + end - begin]))
                pos += end - begin
            self.check_open()
            self.source.read_ranges(requests)
            return
        elif len(ranges) > _MANY_RANGES and lo <= hi and hi - lo <= _BLOCK_SLACK * needed:
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

    def _read(self, offset: int, buf: memoryview) -> None:
        if self._closed:
            raise FileClosed("File is closed")
        self.source.read_into(offset, buf)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.source.close()


def open_file(source: Any) -> SafeFile:
    """Open a SafeFile, giving header errors upstream's safe_open wording."""
    return SafeFile(source)
