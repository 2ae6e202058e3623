"""The one stream policy: an input that cannot be seeked (a pipe, ``/dev/stdin``, a FIFO, a
character device) is copied once to an anonymous temporary file, then read from there like a
regular file.

Readers jump around a file (a header's tensors are read by offset, a zip's directory is at its
end), so a stream is copied before it is read.  How much is copied depends on the reader:

- ``whole=False`` (the reading commands: inspect, validate, diff...): a safetensors stream is
  copied up to what its header declares plus one byte (so trailing bytes are still reported);
  a GGUF stream, which declares no total size, to its end.
- ``whole=True`` (convert): the stream to its end.

Every copy is bounded by ``max_input_size`` (:func:`default_max_input_size` when None: the
smaller of 64 GiB and the free space of the temporary directory less 64 MiB); a longer stream,
or a header declaring more, raises :class:`~pysafetensors.errors.InputTooLarge` naming the cap,
and the partial copy is gone (the file is anonymous).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from typing import IO

from ..errors import InputTooLarge, SourceError
from ..format._frame import GGUF_MAGIC
from ..format.header import HEADER_CAP, N_LEN
from .protocols import ByteSource
from .regular import file_kind
from .sources import FileObjectSource, MmapSource

#: The cap on a streamed input when none is given, before the free-space bound.
DEFAULT_MAX_INPUT_SIZE = 64 << 30
#: Space left free on the temporary directory's filesystem while copying.
SPOOL_RESERVE = 64 << 20
_CHUNK = 1 << 20


def default_max_input_size(directory: str | None = None) -> int:
    """The cap on a streamed input: min(64 GiB, free space of ``directory`` (default: the
    temporary directory) less 64 MiB)."""
    free = shutil.disk_usage(directory or tempfile.gettempdir()).free
    return max(0, min(DEFAULT_MAX_INPUT_SIZE, free - SPOOL_RESERVE))


def too_short(path: str, mode: int, got: int, need: int, wanted: str) -> SourceError:
    """The error for a stream that ended before its first ``need`` bytes: it names what the
    input is (a FIFO, a character device...), not "a file of 0 bytes": an empty FIFO is one no
    program wrote to, ``/dev/null`` a device, and neither is a truncated file.  Its ``code`` is
    ``header_too_small``, the problem ``validate`` lists for a file as short."""
    kind = file_kind(mode)
    what = f"{path}: {kind}, not a regular file"
    if got == 0:
        hint = " (no program wrote to it before closing it)" if stat.S_ISFIFO(mode) else ""
        return SourceError(f"{what}, and it gave no bytes{hint}: there is no {wanted}",
                           size=0, kind=kind, code="header_too_small")
    return SourceError(f"{what}, and it ended after {got} bytes, before the {need} bytes a safetensors or GGUF "
                       "file starts with",
                       size=got, kind=kind, code="header_too_small")


def _too_large(path: str, where: str, limit: int, declared: int | None) -> InputTooLarge:
    said = f"its header declares {declared:,} bytes, more than" if declared is not None else "it is longer than"
    return InputTooLarge(
        f"{path}: not a regular file, so it is copied to {where} before it is read, and {said} the {limit:,}-byte "
        "cap on a streamed input (the smaller of 64 GiB and the free space there less 64 MiB, unless set with "
        "--max-input-size or max_input_size=); save it to a file first, or raise the cap",
        limit=limit, size=declared, source=path,
    )


def declared_data_end(header: bytes) -> int:
    """The largest data offset the header names (0 when it names none or is not JSON).

    Only a bound on how much of a stream to copy; the reader validates the header itself.
    """
    try:
        obj = json.loads(header)
    except (ValueError, RecursionError):
        return 0
    ends = [0]
    if isinstance(obj, dict):
        for entry in obj.values():
            offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
            if isinstance(offsets, list) and offsets and all(type(o) is int for o in offsets):
                ends.append(max(offsets))
    return max(ends)


class _Copy:
    """Copies from a stream's descriptor into a temporary file, never past ``limit`` bytes."""

    def __init__(self, path: str, fd: int, out: IO[bytes], where: str, limit: int) -> None:
        self.path, self.fd, self.out, self.where, self.limit = path, fd, out, where, limit
        self.written = 0

    def take(self, n: int | None = None) -> bytes:
        """Up to ``n`` more bytes (None: to the end), written to the copy; what was read of them
        when ``n`` is small enough to keep (the length prefix, the header), else b""."""
        keep = n is not None and n <= HEADER_CAP + N_LEN
        parts: list[bytes] = []
        left = n
        while left is None or left > 0:
            chunk = os.read(self.fd, _CHUNK if left is None else min(left, _CHUNK))
            if not chunk:
                break
            if self.written + len(chunk) > self.limit:
                raise _too_large(self.path, self.where, self.limit, None)
            try:
                self.out.write(chunk)
            except OSError as e:  # the disk filled up faster than the free space said (another writer)
                raise SourceError(f"{self.path}: not a regular file, and copying it to {self.where} failed after "
                                  f"{self.written:,} bytes: {e.strerror or e}; save it to a file first",
                                  source=self.path, errno=e.errno) from e
            self.written += len(chunk)
            if keep:
                parts.append(chunk)
            if left is not None:
                left -= len(chunk)
        return b"".join(parts)


def spool(path: str, *, whole: bool = False, max_input_size: int | None = None, directory: str | None = None,
          wanted: str = "safetensors or GGUF file to read") -> IO[bytes]:
    """The stream ``path`` copied to an anonymous temporary file in ``directory`` (default: the
    temporary directory), positioned at 0; the caller closes it.

    See the module docstring for how much is copied (``whole``) and the cap (``max_input_size``).
    A stream that ends before 8 bytes raises :func:`too_short` (``wanted`` names what was
    expected); with ``whole``, only one that gives no bytes at all.  Opened non-blocking, so a FIFO without a writer reads as empty instead of
    hanging; the reads themselves block as for any pipe.
    """
    where = directory or tempfile.gettempdir()
    limit = default_max_input_size(where) if max_input_size is None else max_input_size
    out = tempfile.TemporaryFile(dir=where)  # noqa: SIM115 - returned open, the caller closes it
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            os.set_blocking(fd, True)
            copy = _Copy(path, fd, out, where, limit)
            prefix = copy.take(N_LEN)
            if len(prefix) < N_LEN and not (whole and prefix):
                raise too_short(path, os.fstat(fd).st_mode, len(prefix), N_LEN, wanted)
            n = int.from_bytes(prefix, "little")
            if whole or prefix[:4] == GGUF_MAGIC:
                copy.take()
            elif n <= HEADER_CAP:  # over it: the reader reports the length prefix alone
                header = copy.take(n)
                if len(header) == n:  # a header cut short is reported by the reader
                    end = declared_data_end(header)
                    if N_LEN + n + end > limit:
                        raise _too_large(path, where, limit, N_LEN + n + end)
                    copy.take(min(end + 1, limit - copy.written))
        finally:
            os.close(fd)
        out.flush()
        out.seek(0)
    except BaseException:
        out.close()
        raise
    return out


class _OwnedFileSource(FileObjectSource):
    """A spooled copy read through its file object, which this source closes."""

    def close(self) -> None:
        self._f.close()


def spooled_source(path: str, *, max_input_size: int | None = None) -> ByteSource:
    """The stream ``path`` (:func:`spool`, as a reading command copies it) as a source named
    ``path``: mapped where the copy can be reopened (``/proc/self/fd``), else read through it."""
    copy = spool(path, max_input_size=max_input_size)
    proc = f"/proc/self/fd/{copy.fileno()}"
    if os.path.exists(proc):
        try:
            return MmapSource(proc, name=path)  # the map keeps the anonymous file alive
        finally:
            copy.close()
    return _OwnedFileSource(copy, name=path)  # type: ignore[arg-type]


__all__ = ["DEFAULT_MAX_INPUT_SIZE", "SPOOL_RESERVE", "declared_data_end", "default_max_input_size",
           "spool", "spooled_source", "too_short"]
