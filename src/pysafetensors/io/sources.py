"""Local byte sources: ``MmapSource`` (zero-copy views of a copy-on-write map), ``PreadSource``
(``os.preadv`` from many threads), ``MemorySource`` (bytes already in memory) and
``FileObjectSource`` (any readable, seekable binary file object).

Remote sources live in ``remote.py``; :func:`pysafetensors.io.registry.open_source` picks one of
either kind for what a caller passed.  The protocols they implement are in ``protocols.py``.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import sys
import threading
from functools import cache
from typing import Any, BinaryIO

from ..errors import FileClosed, SourceError
from .protocols import ReadsInto
from .regular import open_regular

_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)  # a platform constant (absent on Windows)
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
# Copies out of a map at least this big run in ctypes.memmove, which releases the GIL, so
# several threads copy (and take page faults) at once.
_COPY_WITHOUT_GIL = 1 << 20


def _short_read(name: str, offset: int, wanted: int, got: int) -> SourceError:
    return SourceError(
        f"{name}: short read at offset {offset}: wanted {wanted} bytes, got {got} "
        "(was the file truncated while open?)",
        offset=offset + got,
        source=name,
    )


@cache
def _libc_mincore() -> Any:
    """libc ``mincore`` through ctypes (Linux only), looked up once; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
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
    from .memory import mem_available  # the probe (and the memory check's module) on first use

    available = mem_available()
    if available is not None:
        return available
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * mmap.PAGESIZE
    except (AttributeError, ValueError, OSError):
        return None


# Linux maps this much around a faulting page of a cached file (``fault_around_bytes``, 64 KiB
# by default since 3.15), so touching one byte per window maps a whole range.
_FAULT_AROUND = 64 << 10


class MmapSource:
    """The file mapped copy-on-write: views are zero-copy, writes never reach the file.

    A handle holds one file descriptor: the duplicate the map keeps (Python's ``mmap`` dups
    the one it is given, which is closed at once).  ``read_into`` copies out of the map.
    Views and reads first compare the file's current size (an ``fstat`` on the map's
    descriptor) with the range, so a file another process has truncated gives a SourceError
    rather than the SIGBUS that touching the lost pages would raise.  Bytes already handed
    out as views, and a truncation racing a copy, keep that hazard (SECURITY.md): ``pread``
    is the backend for files others may shrink.
    """

    parallel_safe = True  # big copies run with the GIL released (ctypes.memmove)
    readonly = False  # views are writable; writes land in private copy-on-write pages

    def __init__(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        self.name = name or os.fspath(path)
        fd = open_regular(path)  # regular files only, refused before a FIFO could block
        try:
            st = os.fstat(fd)
            self.size = st.st_size
            self._dev = st.st_dev
            # ACCESS_COPY (MAP_PRIVATE): shares the page cache for reads; a caller writing
            # into a tensor gets private pages instead of corrupting the file.
            try:
                self._map: mmap.mmap | None = (
                    mmap.mmap(fd, self.size, access=mmap.ACCESS_COPY) if self.size else None
                )
            except OSError as e:
                if e.errno == errno.ENOMEM:  # an address-space limit (ulimit -v) below the file
                    from .memory import mapping_refused

                    raise mapping_refused(self.size, self.name, e) from e
                raise
        finally:
            os.close(fd)  # the map holds its own duplicate
        self._view = memoryview(self._map) if self._map is not None else memoryview(b"")
        self._closed = False

    def view(self, offset: int, length: int) -> memoryview:
        m = self._map  # one read: a concurrent close() may set it to None at any moment
        if m is None:
            if self._closed:
                raise FileClosed("File is closed")
            if offset + length > self.size:
                raise _short_read(self.name, offset, length, max(0, self.size - offset))
            return memoryview(b"")
        if offset + length > self.size:
            raise _short_read(self.name, offset, length, max(0, self.size - offset))
        if length:
            self._check_size(m, offset, length)
        try:
            return self._view[offset : offset + length]
        except ValueError:
            # close() in another thread released the view after the check above.
            raise FileClosed("File is closed") from None

    def _check_size(self, m: mmap.mmap, offset: int, length: int) -> None:
        """Raise SourceError when the file no longer holds ``[offset, offset + length)``."""
        try:
            now = m.size()  # fstat on the map's descriptor: the file's size at this moment
        except (ValueError, OSError) as e:
            # A close() in another thread closes that descriptor (EBADF) or the map (ValueError).
            if isinstance(e, ValueError) or self._closed:
                raise FileClosed("File is closed") from None
            raise SourceError(f"{self.name}: cannot stat the file: {e}", offset=offset, source=self.name) from e
        if offset + length > now:
            if self._closed:  # the descriptor closed under fstat may have been reused meanwhile
                raise FileClosed("File is closed")
            raise SourceError(
                f"{self.name}: short read at offset {max(offset, now)}: the file is {now} bytes now, "
                f"{self.size} when it was opened (was the file truncated while open?)",
                offset=max(offset, now),
                source=self.name,
            )

    def read_into(self, offset: int, buffer: memoryview) -> None:
        view = buffer.cast("B") if buffer.format != "B" else buffer
        n = len(view)
        region = self.view(offset, n)  # open, in bounds, still in the file
        if not n:
            return
        if n < _COPY_WITHOUT_GIL:
            # Ask for exactly these pages first: a fault on a cold map would read a whole
            # readahead window around them (the header of a file opened for its keys).
            if _WILLNEED is not None:
                self.advise(offset, n, _WILLNEED)
            view[:] = region
            return
        self.prefetch(offset, n)
        dst = (ctypes.c_char * n).from_buffer(view)
        src = (ctypes.c_char * n).from_buffer(region)
        try:
            ctypes.memmove(dst, src, n)
        finally:
            del dst, src  # release the buffer exports: close() may unmap now

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

        One ``MADV_WILLNEED`` reads only up to ``readahead_cap``, so the range is hinted in
        pieces of that size; the IO is queued at once and the first touches find it in
        flight.  Read ahead this way, the page cache fills in small folios rather than the
        2 MiB ones fault-driven readahead grows to, which on a VM that hands freed memory back
        to its host (free page reporting, reported in 2 MiB blocks) saves a host fault per
        4 KiB page.  At most half the available memory is hinted, so a file larger than
        memory does not evict its own first pages.
        """
        if self._map is None or length <= 0 or _WILLNEED is None:
            return
        free = _free_bytes()
        if free is None:  # cannot tell how much would fit: one hint, which the kernel caps
            self.advise(offset, length, _WILLNEED)
            return
        length = min(length, self.size - offset, free // 2)
        step = readahead_cap(self._dev)
        end = offset + length
        for start in range(offset, end, step):
            self.advise(start, min(step, end - start), _WILLNEED)

    def populate(self, offset: int, length: int) -> None:
        """Map a cached byte range into this process's page tables: read one byte per 64 KiB.

        Each read takes one fault, which maps the whole 64 KiB window around it (the kernel's
        fault-around) or a whole 2 MiB folio, so the tensors' first touches find every page
        mapped.  ``MADV_POPULATE_READ`` takes the same faults but also walks every page of the
        range, which costs more than the faults.  Reading an uncached page waits for the disk,
        so this is for ranges known to be cached.
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

    def release(self, offset: int, length: int) -> None:
        """Take the pages wholly inside a byte range out of this process's page tables
        (``MADV_DONTNEED``), once the range has been copied out: the page cache keeps them and
        a later touch maps them again, but they no longer count in this process's memory beside
        the copy.  The map is copy-on-write, so a page written through a view would lose the
        write: only for ranges no view handed out covers (the header, copied at open).
        """
        if _DONTNEED is None or length <= 0:
            return
        page = mmap.PAGESIZE
        start = -(-offset // page) * page  # pages that straddle the ends are kept
        end = min(offset + length, self.size) // page * page
        if end > start:
            self.advise(start, end - start, _DONTNEED)

    def resident(self, offset: int, length: int, probes: int = 64) -> bool | None:
        """Whether a byte range looks cached: ``probes`` pages spread evenly over it are all in
        the page cache (``mincore``; a full scan would cost as much as the load it speeds
        up).  None where that cannot be asked (not Linux, or the map is closed)."""
        m = self._map
        mincore = _libc_mincore()
        if m is None or mincore is None or length <= 0:
            return None
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
        self._closed = True
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

    def __init__(self, path: str | os.PathLike[str], name: str | None = None) -> None:
        self.name = name or os.fspath(path)
        self._fd = open_regular(path)
        try:
            self.size = os.fstat(self._fd).st_size
        except OSError:
            os.close(self._fd)
            raise
        self._lock = threading.Lock()
        self._active = 0
        self._closed = False

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
            raise SourceError(
                f"{name}: read failed at offset {offset + done}: {e}", offset=offset + done, source=name, errno=e.errno
            ) from e
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
        self.name = name or _file_name(fileobj)
        self._lock = threading.Lock()
        # readinto fills the caller's buffer in place; plain read() returns a copy to move.
        self._readinto = fileobj.readinto if isinstance(fileobj, ReadsInto) else None
        try:
            self.size = fileobj.seek(0, os.SEEK_END)
        except (OSError, AttributeError, ValueError) as e:
            raise SourceError(f"{self.name}: file object is not seekable: {e}", source=self.name) from e

    def read_into(self, offset: int, buffer: memoryview) -> None:
        view = buffer.cast("B") if buffer.format != "B" else buffer
        done = 0
        with self._lock:
            try:
                self._f.seek(offset)
                while done < len(view):
                    if self._readinto is not None:
                        n = self._readinto(view[done:])
                    else:
                        chunk = self._f.read(len(view) - done)
                        n = len(chunk)
                        view[done : done + n] = chunk
                    if not n:
                        raise _short_read(self.name, offset, len(view), done)
                    done += n
            except SourceError:
                raise
            except (OSError, ValueError) as e:
                raise SourceError(
                    f"{self.name}: read failed at offset {offset + done}: {e}",
                    offset=offset + done,
                    source=self.name,
                    errno=e.errno if isinstance(e, OSError) else None,
                ) from e

    def close(self) -> None:
        pass  # the caller owns the file object


def _file_name(fileobj: object) -> str:
    # A file object's ``name`` is optional (BytesIO has none) and may be a descriptor number.
    name = getattr(fileobj, "name", None)
    return name if isinstance(name, str) and name else "<file object>"
