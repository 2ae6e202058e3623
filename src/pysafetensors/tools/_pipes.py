"""Inputs that cannot be mapped or seeked: a pipe (``/dev/stdin``), a FIFO, a character device.

They are read into memory once, bounded by what the header declares (never more than
STREAM_CAP), and then read like bytes (:func:`stream_source`: what every reading tool opens such
an input as).  A GGUF stream (its magic first) declares no total
size: it is read to its end, up to STREAM_CAP.
"""

from __future__ import annotations

import json
import os
import stat

from ..errors import SourceError
from ..format.header import HEADER_CAP, N_LEN
from ..gguf.header import is_gguf
from ..io.registry import url_scheme
from ..io.regular import file_kind, is_stream
from ..io.sources import MemorySource

# A pipe or character device is read into memory; this bounds what its header may claim.
STREAM_CAP = 4 << 30


def _read_exact(fd: int, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        part = os.read(fd, min(n - got, 16 << 20))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _declared_data_end(header: bytes) -> int:
    """The largest data offset the header names (0 when it names none or is not JSON).

    Only a bound on how much of a stream to read; the reader validates the header itself.
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


def read_stream(path: str) -> bytes:
    """The bytes of a pipe, FIFO or character device: the length prefix, the header, then the
    data region the header declares plus one byte (so trailing bytes are reported), never more
    than STREAM_CAP.  Opened non-blocking so a FIFO without a writer reads as empty instead of
    hanging; the reads themselves block as for any pipe.  A stream that ends before the 8-byte
    length prefix is a SourceError saying what it is (:func:`too_short`; its ``code`` is
    ``header_too_small``, the problem ``validate`` lists for such a file).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        os.set_blocking(fd, True)
        data = _read_exact(fd, N_LEN)
        if len(data) < N_LEN:
            raise too_short(path, os.fstat(fd).st_mode, len(data), N_LEN)
        if is_gguf(data):
            data += _read_exact(fd, STREAM_CAP + 1 - N_LEN)
            if len(data) > STREAM_CAP:
                raise SourceError(
                    f"{path}: not a regular file, and this GGUF stream is over the {STREAM_CAP:,}-byte limit for "
                    "reading a stream into memory; save it to a file first",
                    size=len(data),
                )
            return data
        n = int.from_bytes(data, "little")
        if n > HEADER_CAP:
            return data  # the reader reports the oversized header
        header = _read_exact(fd, n)
        data += header
        if len(header) < n:
            return data
        end = _declared_data_end(header)
        if N_LEN + n + end > STREAM_CAP:
            raise SourceError(
                f"{path}: not a regular file, and its header declares {N_LEN + n + end:,} bytes, over the "
                f"{STREAM_CAP:,}-byte limit for reading a stream into memory; save it to a file first",
                size=N_LEN + n + end,
            )
        return data + _read_exact(fd, end + 1)
    finally:
        os.close(fd)


def too_short(path: str, mode: int, got: int, need: int) -> SourceError:
    """The error for a stream that ended before its first ``need`` bytes: it names what the
    input is (a FIFO, a character device...), not "a file of 0 bytes": an empty FIFO is one no
    program wrote to, ``/dev/null`` a device, and neither is a truncated file."""
    kind = file_kind(mode)
    what = f"{path}: {kind}, not a regular file"
    if got == 0:
        hint = " (no program wrote to it before closing it)" if stat.S_ISFIFO(mode) else ""
        return SourceError(f"{what}, and it gave no bytes{hint}: there is no safetensors or GGUF file to read",
                           size=0, kind=kind, code="header_too_small")
    return SourceError(f"{what}, and it ended after {got} bytes, before the {need} bytes a safetensors or GGUF "
                       "file starts with", size=got, kind=kind, code="header_too_small")


def stream_source(path: str) -> MemorySource | None:
    """A local pipe, FIFO, socket or character device read into memory (:func:`read_stream`);
    None for anything else (a regular file, a directory, a URL, a path that does not exist)."""
    if url_scheme(path) is not None or not is_stream(path):
        return None
    return MemorySource(read_stream(path), name=path)
