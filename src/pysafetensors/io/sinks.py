"""Local sinks: where written bytes go on this machine.  AtomicFileSink never leaves a torn file
behind; StagedDirectory publishes a sharded save's files as a set.

:func:`pysafetensors.io.targets.open_sink` picks the sink for a save's target (these for a path,
:mod:`pysafetensors.io.remote_sinks` for a URL).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from ..errors import WriteError
from .regular import file_kind

if TYPE_CHECKING:
    from typing_extensions import Self

Buffer = bytes | bytearray | memoryview


class Sink(Protocol):
    def write(self, buffers: Sequence[Buffer]) -> None:
        """Append ``buffers`` in order."""

    def pwrite(self, buffer: Buffer, offset: int) -> None:
        """Write ``buffer`` at an absolute offset (incremental writer)."""


class FileSink(Sink, Protocol):
    """A sink for one file that appears only on ``commit`` (what :func:`pysafetensors.io.targets.open_sink` returns)."""

    path: str  # the target as messages show it (a URL without its secrets)

    def reserve(self, size: int) -> None:
        """Announce the file's final size before the first write."""

    def commit(self) -> None:
        """Publish the file (replacing an existing one); nothing is visible before."""

    def abort(self) -> None:
        """Discard what was written; an existing file is left as it was."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


def _writev_all(fd: int, buffers: Sequence[Buffer], name: str) -> int:
    """Write every buffer in order (retrying short writes); returns the bytes written."""
    views = [memoryview(b).cast("B") for b in buffers]
    views = [v for v in views if len(v)]
    total = sum(len(v) for v in views)
    iov_max = 1024
    while views:
        batch = views[:iov_max]
        try:
            n = os.writev(fd, batch)
        except OSError as e:
            raise WriteError(f"writing {name} failed: {e}", errno=e.errno) from e
        # Drop what was written, keeping the unwritten tail of a partly written buffer.
        while n and views:
            if n >= len(views[0]):
                n -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][n:]
                n = 0
    return total


def _writer_tag() -> str:
    """Names this host and PID namespace, so a PID in a temp file name can be checked for life.

    A temp file whose tag differs was written by a process we cannot see (another machine on
    a network filesystem, another container): its PID means nothing here and it is never removed.
    """
    try:
        ns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        ns = ""
    return hashlib.sha1(f"{socket.gethostname()}:{ns}".encode()).hexdigest()[:8]


_TAG = _writer_tag()
_STAGING = ".staging"


def temp_name(base: str) -> str:
    """The name a writer of file ``base`` gives its temp file beside it (hidden; carries the
    host tag and PID, so a dead writer's leftover can be recognised)."""
    import secrets  # here, not at module level: it imports hmac, which only writing needs

    return f".{base}.{_TAG}.{os.getpid()}.{secrets.token_hex(6)}.tmp"


def staging_name(label: str) -> str:
    """The name of a sharded save's hidden staging directory (tagged as temp files are)."""
    import secrets

    return f".{label}{_STAGING}.{_TAG}.{os.getpid()}.{secrets.token_hex(6)}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another sink of ours (a thread) may be writing it right now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists but belongs to someone else (EPERM), or we cannot tell
    return True


def _dead_writers(directory: str, prefix: str, suffix: str = "") -> list[str]:
    """Paths in ``directory`` named ``{prefix}{pid}.{token}{suffix}`` whose PID no longer runs."""
    pattern = re.compile(re.escape(prefix) + r"([0-9]+)\.[0-9a-f]{12}" + re.escape(suffix))
    try:
        names = [e.name for e in os.scandir(directory) if e.name.startswith(prefix)]
    except OSError:
        return []
    dead = []
    for name in names:
        m = pattern.fullmatch(name)
        if m is not None and not _pid_alive(int(m.group(1))):
            dead.append(os.path.join(directory, name))
    return dead


def remove_stale_temps(path: str | os.PathLike[str]) -> list[str]:
    """Delete temp files beside ``path`` left by writers that died (SIGKILL, power loss...).

    Only names of the form ``.{basename}.{tag}.{pid}.{token}.tmp`` with this host's tag and a
    PID that no longer runs are removed, so a live writer's temp file is never touched.
    Returns the paths removed.  Best effort: errors are ignored.
    """
    directory, base = os.path.split(os.path.abspath(os.fspath(path)))
    removed: list[str] = []
    for stale in _dead_writers(directory, f".{base}.{_TAG}.", ".tmp"):
        try:
            os.unlink(stale)
            removed.append(stale)
        except OSError:
            pass
    return removed


_DURABLE_ENV = "PYSAFETENSORS_DURABLE"


def default_durable() -> bool:
    """Whether saves fsync by default: off, unless ``PYSAFETENSORS_DURABLE`` is set to 1/true/yes/on."""
    return os.environ.get(_DURABLE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@cache
def _libc_fallocate() -> Callable[..., int] | None:
    """fallocate(2) through ctypes (Linux; Python has only glibc's posix_fallocate, which on a
    filesystem without fallocate silently writes a zero into every block instead)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).fallocate
        fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
        fn.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None

    def call(fd: int, size: int) -> int:
        return 0 if fn(fd, 0, 0, size) == 0 else ctypes.get_errno()

    return call


_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def pwrite_all(fd: int, buffer: Buffer, offset: int, name: str) -> None:
    """Write all of ``buffer`` at ``offset`` of ``fd`` (retrying short writes)."""
    view = memoryview(buffer).cast("B")
    done = 0
    while done < len(view):
        try:
            done += os.pwrite(fd, view[done:], offset + done)
        except OSError as e:
            raise WriteError(f"writing {name} failed: {e}", errno=e.errno) from e


def truncate_fd(fd: int, size: int, name: str) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError as e:
        raise WriteError(f"sizing {name} to {size} bytes failed: {e}", errno=e.errno) from e


def reserve_fd(fd: int, size: int, name: str) -> None:
    """Allocate ``size`` bytes for ``fd`` (fallocate; a sparse ftruncate where unsupported), so
    a full disk fails before any data is copied."""
    if size <= 0:
        return
    fallocate = _libc_fallocate()
    err = fallocate(fd, size) if fallocate is not None else errno.EOPNOTSUPP
    if err in _NO_SPACE:
        raise WriteError(f"cannot save {name}: no room for {size} bytes ({os.strerror(err)})", errno=err)
    if err:
        truncate_fd(fd, size, name)


def _fsync_directory(path: str) -> None:
    """Make a rename in ``path``'s directory durable (best effort: not supported everywhere)."""
    try:
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _refuse_special(path: str, doing: str, advice: str) -> None:
    """WriteError when ``path`` exists and is not a regular file (a symlink judged by what it
    points to); nothing there (or not reachable) passes: the real operation gives the real error."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise WriteError(f"{doing}: it is {file_kind(mode)}, not a regular file; {advice}",
                         errno=errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, filename=path)


def check_replaceable(path: str) -> None:
    """Refuse to replace ``path`` when it exists and is not a regular file.

    A save replaces its target with a new regular file; over a FIFO, a device node (``/dev/null``
    as root) or a socket that would destroy the special file rather than write into it, and a
    directory cannot be replaced at all.  A symlink is judged by what it points to; one to a
    regular file (or a dangling one) is replaced by the new file, the file it pointed to is left
    as it was.
    """
    _refuse_special(path, f"cannot save to {path}",
                    "saves replace their target with a new file, so choose a regular file path")


def check_removable(path: str) -> None:
    """Refuse to delete ``path`` as a leftover of an earlier save when it is not a regular file.

    A sharded save removes the files of the checkpoint it replaces (an old index, shards of
    another count); a FIFO, device node, socket or directory that happens to carry such a name
    was not written by a save, so it is never deleted.
    """
    _refuse_special(path, f"cannot remove {path}, a name an earlier save's checkpoint uses",
                    "move it away or save into another directory")


class CommitOnExit:
    """A file sink as a context manager: ``commit`` when the block ends normally, ``abort``
    when it raises, so an interrupted write never publishes a partial file."""

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class AtomicFileSink(CommitOnExit):
    """Writes a temp file beside ``path``; ``commit`` renames it into place.

    The temp file is created with mode 0o666 so the umask applies exactly as it does for
    ``open()``; when ``path`` already exists its mode is kept, as ``open(path, "wb")`` would.
    Until ``commit`` the old file is untouched; on any error the temp file is removed.  The
    temp name embeds a host/PID-namespace tag and the writer's PID; after each successful
    commit, temp files of the same target left by dead writers are removed.

    The rename is atomic for every reader and against the writer being killed at any point.
    ``durable=True`` adds ``fsync`` of the file before the rename and of the directory after,
    so the new file also survives a power loss; it costs the time to write the whole file to
    the disk.  ``None`` means ``default_durable()``.
    """

    def __init__(self, path: str | os.PathLike[str], *, durable: bool | None = None) -> None:
        self.path = os.fspath(path)
        self.durable = default_durable() if durable is None else bool(durable)
        check_replaceable(self.path)
        directory, base = os.path.split(os.path.abspath(self.path))
        self.tmp_path = os.path.join(directory, temp_name(base))
        try:
            self._fd = os.open(
                self.tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666
            )
        except OSError as e:
            raise WriteError(f"cannot create a temporary file beside {self.path}: {e}", errno=e.errno) from e
        try:
            mode = stat.S_IMODE(os.stat(self.path).st_mode)
            os.fchmod(self._fd, mode)
        except OSError:
            pass  # no existing file: the umask-derived mode stands

    def write(self, buffers: Sequence[Buffer]) -> None:
        # No early writeback (sync_file_range) here: it submits the I/O in this thread, where
        # the kernel's flusher threads otherwise do it in parallel with the copying.
        _writev_all(self._fd, buffers, self.path)

    def pwrite(self, buffer: Buffer, offset: int) -> None:
        pwrite_all(self._fd, buffer, offset, self.path)

    def reserve(self, size: int) -> None:
        """Give the temp file its final size before writing: its blocks are allocated at once
        (fallocate), so a full disk fails here, before any data is copied, and writes never
        extend the file (ext4 journals the inode on every extending write).  Where fallocate is
        unsupported: a sparse ftruncate."""
        reserve_fd(self._fd, size, self.path)

    def truncate(self, size: int) -> None:
        truncate_fd(self._fd, size, self.path)

    def commit(self) -> None:
        try:
            if self.durable:
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1
            os.replace(self.tmp_path, self.path)
        except OSError as e:
            self.abort()
            raise WriteError(f"saving {self.path} failed: {e}", errno=e.errno) from e
        if self.durable:
            _fsync_directory(self.path)
        remove_stale_temps(self.path)

    def abort(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1
        try:
            os.unlink(self.tmp_path)
        except FileNotFoundError:
            pass


# --- a set of files published as one -----------------------------------------------------


class StagedDirectory:
    """Write several files into ``directory`` as one unit (a sharded checkpoint).

    Files are written, each atomically (``file``), into a hidden staging subdirectory of
    ``directory`` (same filesystem, so moving them in is a rename); nothing in ``directory``
    changes until ``publish``, which moves them in, one rename each, in the order given, and
    then removes the names the caller lists.  A save that fails or is killed before ``publish``
    leaves ``directory`` untouched; its staging directory is removed by ``abort``, or, after a
    kill, by the next ``StagedDirectory`` of the same label there (its name carries the
    writer's host tag and PID, checked for life as temp files are).

    Publishing is a sequence of renames, not one: what a reader can see between two of them
    is up to the caller's order (see ``pysafetensors.sharded.write_sharded``).
    """

    def __init__(self, directory: str | os.PathLike[str], label: str, *, durable: bool | None = None) -> None:
        self.directory = os.fspath(directory)
        self.label = label
        self.durable = default_durable() if durable is None else bool(durable)
        remove_stale_staging(self.directory, label)
        self.path = os.path.join(self.directory, staging_name(label))
        try:
            os.mkdir(self.path, 0o700)
        except OSError as e:
            raise WriteError(f"cannot create a staging directory in {self.directory}: {e}", errno=e.errno) from e
        self._staged: list[str] = []

    def file(self, name: str) -> str:
        """The staging path to write file ``name`` at (through an AtomicFileSink)."""
        self._staged.append(name)
        return os.path.join(self.path, name)

    def exists(self, name: str) -> bool:
        """Whether ``name`` exists in the target directory now."""
        return os.path.lexists(os.path.join(self.directory, name))

    def set_aside(self, name: str) -> None:
        """Move ``name`` out of the target directory into the staging directory (gone from
        readers' view at once; deleted with the staging directory).  Only a regular file is
        moved (``check_removable``)."""
        check_removable(os.path.join(self.directory, name))
        try:
            os.replace(os.path.join(self.directory, name), os.path.join(self.path, f"{name}.old"))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise WriteError(f"cannot move {name} out of {self.directory}: {e}", errno=e.errno) from e

    def publish(self, order: Iterable[str], remove: Iterable[str] = ()) -> None:
        """Move the staged files into the directory in ``order``, then delete ``remove``.

        A name held by something other than a regular file is never replaced (WriteError) nor
        removed (left in place).  The caller checks every name before it writes anything
        (``LocalDirectory.check_names``); this guards against one appearing since.
        """
        for name in order:
            check_replaceable(os.path.join(self.directory, name))
            try:
                os.replace(os.path.join(self.path, name), os.path.join(self.directory, name))
            except OSError as e:
                raise WriteError(f"cannot move {name} into {self.directory}: {e}", errno=e.errno) from e
        if self.durable:
            _fsync_directory(os.path.join(self.directory, "."))
        for name in remove:
            try:
                check_removable(os.path.join(self.directory, name))
                os.remove(os.path.join(self.directory, name))
            except OSError:
                pass  # best effort: the new set is in place; a leftover is not part of it
        shutil.rmtree(self.path, ignore_errors=True)

    def abort(self) -> None:
        """Discard everything staged; the target directory is left as it was."""
        shutil.rmtree(self.path, ignore_errors=True)


def remove_stale_staging(directory: str | os.PathLike[str], label: str) -> list[str]:
    """Delete staging directories of ``label`` in ``directory`` left by writers that died
    (named as temp files are, so the same host-tag and PID rule applies)."""
    removed = _dead_writers(os.fspath(directory), f".{label}{_STAGING}.{_TAG}.")
    for stale in removed:
        shutil.rmtree(stale, ignore_errors=True)
    return removed


class LocalDirectory:
    """A local directory as the target of a sharded save (the interface
    :class:`~pysafetensors.io.remote_prefix.RemotePrefix` shares for URL prefixes)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name = path

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def ensure(self) -> None:
        """Create the directory (and its parents) when missing."""
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise WriteError(f"cannot create {self.path}: {e}", errno=e.errno) from e

    def names(self) -> list[str]:
        """The names the directory holds now."""
        return os.listdir(self.path)

    def check_names(self, replace: Iterable[str], remove: Iterable[str] = ()) -> None:
        """Refuse, before a save writes anything, names it would replace or remove that are held
        by something other than a regular file (a FIFO, device node, socket or directory):
        WriteError naming the path."""
        for n in replace:
            check_replaceable(self.join(n))
        for n in remove:
            check_removable(self.join(n))

    def remove(self, names: Iterable[str]) -> None:
        """Delete ``names`` from the directory; missing ones are skipped, one that is not a
        regular file is refused (WriteError, see ``check_removable``)."""
        for n in names:
            path = os.path.join(self.path, n)
            check_removable(path)
            try:
                os.remove(path)
            except FileNotFoundError:
                pass

    def stage(self, label: str, *, durable: bool | None = None, names: Sequence[str] = ()) -> StagedDirectory:
        """A staging area for the files of one save (``names``: what it will write; unused here)."""
        return StagedDirectory(self.path, label, durable=durable)
