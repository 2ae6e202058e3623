"""Open a path for reading only when it is a regular file, without ever blocking; what a path
that is not one is (:func:`file_kind`, :func:`is_stream`).

``open()`` of a FIFO waits for a writer that may never come, and a directory or a device
opens fine and fails later with an error that names nothing.  ``open_regular`` opens with
``O_NONBLOCK`` (a FIFO opens at once), checks the descriptor it got (no window between a
check and the open) and refuses anything but a regular file with a ``NotARegularFile`` naming
the path and what it is.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import DirectoryNotFile, NotARegularFile

# What a file that is not a regular file is, in words: the one table of file kinds.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def file_kind(mode: int) -> str:
    """What a non-regular ``st_mode`` is, in words ("a FIFO", "a directory"...)."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is, once links are followed, something read only in order: a pipe or FIFO,
    a socket or a character device (``/dev/stdin``).  False when it is missing or unreachable."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def open_regular(path: str | os.PathLike[str], *, write: bool = False) -> int:
    """A read-only descriptor of ``path`` (read-write with ``write``: an edit in place; blocking
    mode), if it is a regular file.

    FileNotFoundError keeps upstream's "No such file or directory: <path>" wording; a
    directory raises DirectoryNotFile (also an IsADirectoryError), a FIFO, socket or device
    NotARegularFile.
    """
    name = os.fspath(path)
    flags = (os.O_RDWR if write else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"No such file or directory: {name}") from None
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket, or a FIFO opened write-only elsewhere
            raise NotARegularFile(f"{name}: not a regular file ({e.strerror})", errno=e.errno, filename=name) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise DirectoryNotFile(f"{name}: is a directory, not a safetensors file", errno=errno.EISDIR,
                                   strerror="Is a directory", filename=name)
        if not stat.S_ISREG(mode):
            raise NotARegularFile(
                f"{name}: is {file_kind(mode)}, not a regular file; safetensors files are read by offset, "
                "so only regular files can be opened",
                errno=errno.EINVAL,
                filename=name,
            )
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)  # regular files ignore it, but leave the descriptor as open() would
    except BaseException:
        os.close(fd)
        raise
    return fd
