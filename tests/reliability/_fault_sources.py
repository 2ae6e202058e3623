"""Sources that fail the way real ones do, for the I/O fault tests (test_read_faults.py).

``FaultySource`` wraps any ByteSource and raises a bare ``OSError(EIO)`` from a given byte on;
``FaultyURLSource`` is the same behind a ``faulty://`` URL (for the CLI); ``FaultyFile`` is a
binary file object failing with EIO or stopping short; ``FaultyMemoryFS`` is fsspec's memory
filesystem failing with EIO; ``DroppingServer`` drops HTTP connections halfway through bodies.
Each is armed and disarmed through a shared state, so one test can break a source mid-read and
mend it again.
"""

from __future__ import annotations

import contextlib
import errno
import io
import re
import socket
from typing import Any

from fsspec.implementations.memory import MemoryFileSystem
from servers import RangeServer

from pysafetensors.io.sources import PreadSource


class FaultySource:
    """A ByteSource over a real one: a read reaching byte ``state["at"]`` fills the buffer up to
    it, then raises a bare ``OSError(EIO)`` (no offset: a foreign source's failure)."""

    parallel_safe = True

    def __init__(self, inner: Any, state: dict[str, Any], name: str | None = None) -> None:
        self._inner = inner
        self._state = state
        self.size = inner.size
        self.name = name or inner.name

    def read_into(self, offset: int, buffer: memoryview) -> None:
        at = self._state.get("at")
        if at is not None and offset + len(buffer) > at:
            if at > offset:
                self._inner.read_into(offset, buffer[: at - offset])
            raise OSError(errno.EIO, "Input/output error")
        self._inner.read_into(offset, buffer)

    def close(self) -> None:
        self._inner.close()


WRAPPER_STATE: dict[str, Any] = {}


class FaultyURLSource(FaultySource):
    """``faulty:///path``: a FaultySource over that file, for the CLI (which takes paths and URLs)."""

    def __init__(self, url: str, **_: Any) -> None:
        super().__init__(PreadSource(url[len("faulty://") :]), WRAPPER_STATE, name=url)


class FaultyFile(io.RawIOBase):
    """A seekable binary file over ``data``.  From byte ``state["at"]`` on, reads fail with EIO
    (``mode="eio"``) or stop as at the end of a file, after dribbling out small pieces
    (``mode="short"``)."""

    def __init__(self, data: bytes, state: dict[str, Any], mode: str) -> None:
        self._data = data
        self._state = state
        self._mode = mode
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else self._pos + pos if whence == 1 else len(self._data) + pos
        return self._pos

    def readinto(self, b: Any) -> int:
        end = len(self._data)
        at = self._state.get("at")
        if at is not None:
            if self._mode == "eio" and self._pos >= at:
                raise OSError(errno.EIO, "Input/output error")
            end = min(end, at)
        n = max(0, min(len(b), end - self._pos, 4096 if self._mode == "short" else len(b)))
        b[:n] = self._data[self._pos : self._pos + n]
        self._pos += n
        return n


class FaultyMemoryFS(MemoryFileSystem):
    """fsspec's memory filesystem, whose reads of a path in ``fail`` past the given byte raise EIO."""

    protocol = ("faultymem",)
    fail: dict[str, int] = {}  # noqa: RUF012 - shared on purpose, like MemoryFileSystem.store

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        at = self.fail.get(self._strip_protocol(path))
        if at is not None and (end is None or end > at):
            raise OSError(errno.EIO, "Input/output error")
        return bytes(super().cat_file(path, start, end, **kwargs))


_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class DroppingServer(RangeServer):
    """A RangeServer that, while ``drop_from`` is set, answers every request for bytes from there
    on with a 206 promising the range, sends half of it and drops the connection."""

    drop_from: int | None = None

    def serve(self, h: Any, head: bool) -> None:
        m = _RANGE.match(h.headers.get("Range") or "")
        data = self.files.get(h.path.split("?", 1)[0].lstrip("/"))
        if self.drop_from is None or m is None or data is None or int(m.group(1)) < self.drop_from:
            return super().serve(h, head)
        start = int(m.group(1))
        end = min(int(m.group(2)), len(data) - 1) if m.group(2) else len(data) - 1
        body = data[start : end + 1]
        with self.lock:
            self.log.requests += 1
        h.send_response(206)
        h.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(body[: len(body) // 2])
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
        h.close_connection = True
        return None
