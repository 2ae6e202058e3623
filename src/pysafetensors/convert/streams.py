"""Inputs that cannot be seeked (a pipe, ``/dev/stdin``, a FIFO, a character device).

A checkpoint's readers jump around the file (a zip's directory is at its end, storages are read
by offset), so such an input is first copied to an anonymous temporary file, once, to its end.
The copy is bounded by the free space of the temporary directory (less a reserve), checked
before each chunk is written: a stream larger than the disk can hold is refused with a message
naming it, never left to fill the disk.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from ..errors import ConversionError
from ..io.regular import file_kind

# Space left free on the temporary directory's filesystem while spooling.
SPOOL_RESERVE = 64 << 20
_CHUNK = 1 << 20


def spool_limit(directory: str | None = None) -> int:
    """How many bytes a spooled copy may take in ``directory`` (default: the temporary directory)."""
    free = shutil.disk_usage(directory or tempfile.gettempdir()).free
    return max(0, free - SPOOL_RESERVE)


@contextmanager
def spooled(path: str, limit: int | None = None, directory: str | None = None) -> Iterator[IO[bytes]]:
    """The stream ``path`` copied to an anonymous temporary file (removed on exit), positioned at 0.

    ``limit`` bounds the copy (default :func:`spool_limit`); a longer stream raises
    ConversionError naming ``path``.  Opened non-blocking, so a FIFO without a writer reads as
    empty instead of hanging; the reads themselves block as for any pipe.
    """
    where = directory or tempfile.gettempdir()
    limit = spool_limit(where) if limit is None else limit
    with tempfile.TemporaryFile(dir=where) as copy:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        written = 0
        try:
            os.set_blocking(fd, True)
            while chunk := os.read(fd, _CHUNK):
                if written + len(chunk) > limit:
                    raise ConversionError(
                        f"{path}: not a regular file, so it is copied to {where} before converting, and it is "
                        f"larger than the {limit:,} bytes free there; save it to a file first",
                        path=path,
                        limit=limit,
                    )
                copy.write(chunk)
                written += len(chunk)
            if written == 0:  # an empty FIFO, /dev/null: say what it is, not "the file is empty"
                mode = os.fstat(fd).st_mode
                hint = " (no program wrote to it before closing it)" if stat.S_ISFIFO(mode) else ""
                raise ConversionError(f"{path}: {file_kind(mode)}, not a regular file, and it gave no bytes{hint}: "
                                      "there is no checkpoint to convert", path=path, kind=file_kind(mode))
            copy.flush()
        except OSError as e:  # the disk filled up faster than the free space said (another writer)
            raise ConversionError(
                f"{path}: not a regular file, and copying it to {where} before converting failed after "
                f"{written:,} bytes: {e.strerror or e}; save it to a file first",
                path=path,
            ) from e
        finally:
            os.close(fd)
        copy.seek(0)
        yield copy
