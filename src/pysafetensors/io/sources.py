"""ByteSource: a handful of methods that give the reader a file's bytes.

``size``, ``name``, ``read_into(offset, buffer)`` and ``close()`` are the whole protocol.
A source that can hand out zero-copy views also has ``view(offset, length)``; the reader
checks for it (``supports_view``).
"""

from __future__ import annotations

import mmap
import os
import sys
import threading
from functools import cache
from typing import Any, BinaryIO, Protocol, runtime_checkable

from ..errors import FileClosed, SourceError
from .regular import open_regular


@runtime_checkable
class ByteSource(Protocol):
    size: int
    name: str

    def read_into(self, offset: int, buffer: memoryview) -> None:
        """Fill ``buffer`` with the bytes at ``offset``; raise SourceError on a short read."""

    def close(self) -> None: ...


def supports_view(source: object) -> bool:
    return callable(getattr(source, "view", None))


def _short_read(name: str, offset: int, wanted: int, got: int) -> SourceError:
    return SourceError(
        f"{name}: short read at offset {offset}: wanted {wanted} bytes, got {got} "
        "(was the file truncated while open?)",
        offset=offset,
    )


def _open_fd(path: str | os.PathLike[str]) -> int:
    # Regular files only, refused before a FIFO could block (io/regular.py).
    return open_regular(path)


@cache
def _libc_mincore() -> Any:
    """libc ``mincore`` through ctypes (Linux only), looked up once; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).mincore
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        fn.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return fn


@cache
def readahead_cap(dev: int) -> int:
    """The most bytes one ``WILLNEED`` hint reads ahead on the block device ``dev``.

    Linux caps each hint at the larger of the device's readahead window and its largest
    request (``read_ahead_kb``, ``max_sectors_kb``); a longer hint silently reads only that
    much.  128 KiB (the usual default window) where sysfs does not say, e.g. off Linux or on
    network and FUSE filesystems.
    """
    base = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"
    for queue in (base + "/queue", base + "/../queue"):  # a partition's queue is its disk's
        try:
            with open(queue + "/read_ahead_kb") as f:
                window = int(f.read())
            with open(queue + "/max_sectors_kb") as f:
                request = int(f.read())
        except (OSError, ValueError):
            continue
        return max(window, request, 4) << 10
    return 128 << 10


def _free_bytes() -> int | None:
    """Memory available without swapping (Linux ``MemAvailable``: free plus reclaimable cache;
    elsewhere the free pages), or None where it cannot be asked."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * mmap.PAGESIZE
    except (AttributeError, ValueError, OSError):
        return None


# Linux maps this much around a faulting page of a cached file (``fault_around_bytes``, 64 KiB
# by default since 3.15), so touching one byte per window maps a whole range.
_FAULT_AROUND = 64 << 10


class MmapSource:
    """The file mapped copy-on-write: views are zero-copy, writes never reach the file."""

    parallel_safe = True  # read_into is a pread on the kept descriptor

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.name = os.fspath(path)
        fd = _open_fd(path)
        try:
            self.size = os.fstat(fd).st_size
            # ACCESS_COPY (MAP_PRIVATE): shares the page cache for reads; a caller writing
            # into a tensor gets private pages instead of corrupting the file.
            self._map: mmap.mmap | None = (
                mmap.mmap(fd, self.size, access=mmap.ACCESS_COPY) if self.size else None
            )
        except BaseException:
            os.close(fd)
            raise
        # The descriptor stays open for read_into (header, staging reads): a pread reads just
        # the bytes asked for, where a fault on a cold map reads a whole readahead window
        # (8 MiB here) and copies through page faults.
        self._pread = PreadSource._from_fd(fd, self.name)
        self._view = memoryview(self._map) if self._map is not None else memoryview(b"")

    def view(self, offset: int, length: int) -> memoryview:
        if self._map is None:
            if self.size:
                raise FileClosed("File is closed")
            return memoryview(b"")
        if offset + length > self.size:
            raise _short_read(self.name, offset, length, max(0, self.size - offset))
        try:
            return self._view[offset : offset + length]
        except ValueError:
            # close() in another thread released the view after the check above.
            raise FileClosed("File is closed") from None

    def read_into(self, offset: int, buffer: memoryview) -> None:
        if self._map is None and self.size:
            raise FileClosed("File is closed")
        self._pread.read_into(offset, buffer)

    def advise(self, offset: int, length: int, advice: int) -> None:
        """Pass an madvise hint for a byte range (ignored where unsupported)."""
        m = self._map  # one read: a concurrent close() may set it to None at any moment
        if m is None or not hasattr(m, "madvise") or length <= 0:
            return
        page = mmap.PAGESIZE
        start = offset - offset % page
        try:
            m.madvise(advice, start, min(length + offset - start, self.size - start))
        except (OSError, ValueError):
            pass

    def prefetch(self, offset: int, length: int) -> None:
        """Start reading a byte range into the page cache, all of it, without waiting for it.

        One ``MADV_WILLNEED`` reads only up to ``readahead_cap`` (8 MiB on the benchmark
        machine), so the range is hinted in pieces of that size; the IO is queued at once and
        the first touches find it in flight.  Read ahead this way, the page cache fills in small
        folios rather than the 2 MiB ones fault-driven readahead grows to, which on a VM that
        hands freed memory back to its host (free page reporting, reported in 2 MiB blocks)
        saves a host fault per 4 KiB page: a cold 512 MiB load here took 0.31-0.49 s this way
        against 0.74-1.03 s with one hint (benchmarks/RESULTS.md).  At most half the available
        memory is hinted, so a file larger than memory does not evict its own first pages.
        """
        if self._map is None or length <= 0:
            return
        free = _free_bytes()
        if free is None:  # cannot tell how much would fit: one hint, which the kernel caps
            self.advise(offset, length, mmap.MADV_WILLNEED)
            return
        length = min(length, self.size - offset, free // 2)
        try:
            step = readahead_cap(os.fstat(self._pread.fileno()).st_dev)
        except (OSError, FileClosed):
            return
        end = offset + length
        for start in range(offset, end, step):
            self.advise(start, min(step, end - start), mmap.MADV_WILLNEED)

    def populate(self, offset: int, length: int) -> None:
        """Map a cached byte range into this process's page tables: read one byte per 64 KiB.

        Each read takes one fault, which maps the whole 64 KiB window around it (the kernel's
        fault-around) or a whole 2 MiB folio, so the tensors' first touches find every page
        mapped.  Measured on 512 MiB cached in small folios: 30-40 ms, against 47-60 ms for
        ``MADV_POPULATE_READ`` (the same 8,200 faults, plus a walk over all 131,072 pages) and
        69-85 ms when the pages are first touched one by one (upstream); in 2 MiB folios,
        1.6 ms against 2.7-18 ms (benchmarks/RESULTS.md).  Reading an uncached page waits for
        the disk, so this is for ranges known to be cached.
        """
        if length <= 0:
            return
        try:
            region = self.view(offset, min(length, max(0, self.size - offset)))
        except (FileClosed, OSError):
            return
        if len(region):
            bytes(region[:: max(_FAULT_AROUND, mmap.PAGESIZE)])  # one byte per window, in C
            region[-1]  # and the window holding the last byte

    def resident(self, offset: int, length: int, probes: int = 64) -> bool | None:
        """Whether a byte range looks cached: ``probes`` pages spread evenly over it are all in
        the page cache (``mincore``; a full scan costs ~10 ms per 512 MiB, as much as the load
        it would speed up).  None where that cannot be asked (not Linux, or the map is closed)."""
        m = self._map
        mincore = _libc_mincore()
        if m is None or mincore is None or length <= 0:
            return None
        import ctypes

        page = mmap.PAGESIZE
        first = offset - offset % page
        last = min(offset + length, self.size) - 1
        last -= last % page
        npages = (last - first) // page + 1
        step = max(1, npages // probes)
        vec = (ctypes.c_ubyte * 1)()
        try:
            anchor = ctypes.c_char.from_buffer(m)  # an export: released right below
        except (TypeError, ValueError, BufferError):
            return None
        try:
            base = ctypes.addressof(anchor)
            for k in range(0, npages, step):
                if mincore(base + first + k * page, page, vec) != 0:
                    return None
                if not vec[0] & 1:  # bit 0: resident; the others are reserved
                    return False
            if mincore(base + last, page, vec) != 0:
                return None
            return bool(vec[0] & 1)
        finally:
            del anchor

    def close(self) -> None:
        self._pread.close()
        m, self._map = self._map, None
        if m is None:
            return
        try:
            self._view.release()
            m.close()
        except BufferError:
            # Tensors handed out still view the map; it is unmapped when the last one goes.
            pass


class PreadSource:
    """Reads with os.preadv into fresh buffers; safe to use from many threads at once."""

    parallel_safe = True  # read_into may run in several threads at once (preadv drops the GIL)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._init(_open_fd(path), os.fspath(path))

    def _init(self, fd: int, name: str) -> None:
        self.name = name
        self._fd = fd
        try:
            self.size = os.fstat(fd).st_size
        except OSError:
            os.close(fd)
            raise
        self._lock = threading.Lock()
        self._active = 0
        self._closed = False

    @classmethod
    def _from_fd(cls, fd: int, name: str) -> PreadSource:
        """Adopt an open descriptor (closed by ``close``)."""
        self = cls.__new__(cls)
        self._init(fd, name)
        return self

    def _acquire(self) -> int:
        with self._lock:
            if self._closed:
                raise FileClosed("File is closed")
            self._active += 1
            return self._fd

    def _release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._closed and self._active == 0 and self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def read_into(self, offset: int, buffer: memoryview) -> None:
        fd = self._acquire()
        try:
            _pread_full(fd, buffer, offset, self.name)
        finally:
            self._release()

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # Close now unless a read is in flight; the last reader closes it otherwise, so a
            # recycled descriptor number can never be read by mistake.
            if self._active == 0:
                os.close(self._fd)
                self._fd = -1


def _pread_full(fd: int, buffer: memoryview, offset: int, name: str) -> None:
    view = buffer.cast("B") if buffer.format != "B" else buffer
    done = 0
    total = len(view)
    while done < total:
        try:
            n = os.preadv(fd, [view[done:]], offset + done)
        except OSError as e:
            raise SourceError(f"{name}: read failed at offset {offset + done}: {e}") from e
        if n == 0:
            raise _short_read(name, offset, total, done)
        done += n


class MemorySource:
    """Bytes already in memory (bytes, bytearray, memoryview, mmap): zero-copy views."""

    def __init__(self, data: Any, name: str = "<bytes>") -> None:
        self._data = memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" or data.ndim != 1 else data
        self.size = len(self._data)
        self.name = name
        self.readonly = self._data.readonly

    def view(self, offset: int, length: int) -> memoryview:
        if offset + length > self.size:
            raise _short_read(self.name, offset, length, max(0, self.size - offset))
        return self._data[offset : offset + length]

    def read_into(self, offset: int, buffer: memoryview) -> None:
        buffer[:] = self.view(offset, len(buffer))

    def close(self) -> None:
        pass


class FileObjectSource:
    """Any readable, seekable binary file object; reads are serialised with a lock."""

    def __init__(self, fileobj: BinaryIO, name: str | None = None) -> None:
        self._f = fileobj
        self.name = name or str(getattr(fileobj, "name", "<file object>"))
        self._lock = threading.Lock()
        try:
            self.size = fileobj.seek(0, os.SEEK_END)
        except (OSError, AttributeError, ValueError) as e:
            raise SourceError(f"{self.name}: file object is not seekable: {e}") from e

    def read_into(self, offset: int, buffer: memoryview) -> None:
        view = buffer.cast("B") if buffer.format != "B" else buffer
        with self._lock:
            try:
                self._f.seek(offset)
                done = 0
                while done < len(view):
                    readinto = getattr(self._f, "readinto", None)
                    if readinto is not None:
                        n = readinto(view[done:])
                    else:
                        chunk = self._f.read(len(view) - done)
                        n = len(chunk)
                        view[done : done + n] = chunk
                    if not n:
                        raise _short_read(self.name, offset, len(view), done)
                    done += n
            except (OSError, ValueError) as e:
                raise SourceError(f"{self.name}: read failed at offset {offset}: {e}") from e

    def close(self) -> None:
        pass  # the caller owns the file object


BACKENDS = ("mmap", "pread")


def open_source(obj: Any, backend: str = "mmap") -> Any:
    """A ByteSource for a path, PathLike, bytes-like object or binary file object."""
    if isinstance(obj, (str, os.PathLike)):
        return MmapSource(obj) if backend == "mmap" else PreadSource(obj)
    if isinstance(obj, (bytes, bytearray, memoryview, mmap.mmap)):
        return MemorySource(obj)
    if hasattr(obj, "read") and hasattr(obj, "seek"):
        fileno = getattr(obj, "fileno", None)
        if fileno is not None and backend == "mmap":
            try:
                fd = fileno()
                return MmapSource(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else FileObjectSource(obj)
            except (OSError, ValueError, AttributeError):
                pass
        return FileObjectSource(obj)
    raise TypeError(
        f"cannot read safetensors from {type(obj).__name__}: expected a path, bytes-like object "
        "or binary file object"
    )
