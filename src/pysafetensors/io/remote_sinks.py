"""Saving to URLs: one file streamed to an fsspec store and published all at once.

How a file gets to the store, and what a reader can see on the way:

* ``s3://`` (s3fs): an S3 multipart upload to the target key (``_s3_upload``).  Parts go out
  while the tensors are written: a part is sent each time :data:`PART_SIZE` bytes have
  collected, up to :data:`UPLOAD_BUFFER` bytes of parts upload at once, so memory holds the
  tensor being written plus at most ``UPLOAD_BUFFER + PART_SIZE``.  The upload is completed
  by ``commit`` and aborted by ``abort`` (any error or interrupt inside a save).  S3 shows
  the object only when the upload completes, so there is never a torn object, and an
  existing object at the key is replaced only then.  A file smaller than one part is a
  single PUT, equally all or nothing.
* Every other fsspec store (``memory://``, ``gs://``, ``az://``, ``sftp://``...): the file is
  written to a hidden temporary name beside the target, then moved onto it with ``fs.mv`` by
  ``commit`` (a rename where the store has one, else its copy and delete); ``abort`` removes
  the temporary object.  A store whose ``mv`` fails leaves the target untouched and the save
  raises :class:`~pysafetensors.errors.WriteError`.
* A writer killed outright (SIGKILL, a lost machine) cannot clean up after itself: on S3 the
  object never appears but the parts already sent stay, billed, as a pending multipart
  upload; on other stores the temporary object stays.  :func:`remove_stale_uploads` lists and
  removes both; an S3 lifecycle rule (``AbortIncompleteMultipartUpload``) does it server side.
  A save that fails and whose abort fails too (the network gone) raises
  :class:`~pysafetensors.errors.UploadNotAborted`, naming the upload id and the
  ``aws s3api abort-multipart-upload`` command that removes it.

``durable=True`` means the store acknowledged the final commit and the object is there at its
full size (one extra ``info``/HEAD request after the commit).  ``http(s)://`` targets are
refused with :class:`~pysafetensors.errors.UnwritableTarget`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SafetensorError, UnwritableTarget, UploadNotAborted, WriteError
from ._fsspec import filesystem
from ._s3_upload import S3MultipartUpload
from .redact import redact_text, redact_url
from .registry import url_scheme
from .sinks import Buffer, CommitOnExit, default_durable, pwrite_all, reserve_fd, temp_name

# A part is uploaded each time this many bytes have collected; a file smaller is one PUT.
PART_SIZE = 8 << 20
# At most this many bytes of parts upload at once (S3: UPLOAD_BUFFER // part size parts in
# flight, at least one); memory holds these plus the part being filled (and the HTTP
# client's own buffers: benchmarks/write_remote.py measures the whole).
UPLOAD_BUFFER = 24 << 20
# S3 allows 10,000 parts per upload: larger files get larger parts (see part_size).
MAX_PARTS = 10_000
# The most handed to the store's file object at once, so its buffer never holds more than
# about one part plus this (a whole tensor given at once would be copied into it whole).
_CHUNK = 1 << 20
# The incremental writer's staged file is read back and uploaded in pieces of this size.
_UPLOAD_CHUNK = 8 << 20

_READ_ONLY = {"http", "https"}
_MULTIPART = {"s3", "s3a"}  # stores written by an abortable multipart upload to the key itself
_NO_DIRECTORIES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"}  # keys, not directories


def part_size(total: int | None) -> int:
    """The multipart part size for a file of ``total`` bytes: :data:`PART_SIZE`, or more for
    files that would otherwise need over :data:`MAX_PARTS` parts (a whole number of MiB)."""
    if not total or total <= 0:
        return PART_SIZE
    need = -(-total // (MAX_PARTS - 1))  # one part spare: parts run a little over the size
    mib = 1 << 20
    return max(PART_SIZE, -(-need // mib) * mib)


def _protocols(fs: Any) -> set[str]:
    p = fs.protocol
    return {p} if isinstance(p, str) else set(p)


def _detail(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _write_error(what: str, shown: str, e: BaseException) -> SafetensorError:
    """``e`` from a store as a WriteError naming the redacted URL (SafetensorErrors pass)."""
    if isinstance(e, SafetensorError):
        return e
    if isinstance(e, NotImplementedError):
        return UnwritableTarget(redact_text(f"cannot save to {shown}: the store cannot {what} ({_detail(e)})"), url=shown)
    errno = getattr(e, "errno", None)
    return WriteError(redact_text(f"{what} {shown} failed: {_detail(e)}"), url=shown, errno=errno)


def writable_filesystem(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(fs, path)`` for a URL to write to (:func:`pysafetensors.io._fsspec.filesystem`).

    ``http(s)://`` raises UnwritableTarget; a missing backend MissingBackend (with the
    package to install); anything else the filesystem raises a WriteError."""
    shown = redact_url(url)
    if url_scheme(url) in _READ_ONLY:
        raise UnwritableTarget(
            f"cannot save to {shown}: http(s) URLs are read-only (there is no standard way to write "
            "a file over HTTP); save to a local path or a store URL (s3://, gs://, memory://...) instead",
            url=shown,
        )

    def fail(e: BaseException, unknown_scheme: str | None) -> Exception:
        if unknown_scheme is None:
            return _write_error("opening", shown, e)
        return UnwritableTarget(
            f"cannot save to {shown}: unsupported URL scheme {unknown_scheme!r}: not file, or a protocol fsspec knows",
            url=shown,
        )

    return filesystem(url, storage_options, fail)


def _discard(f: Any) -> None:
    """Throw away an open fsspec file without publishing it."""
    # fsspec's buffered files publish what they hold when closed (also from __del__):
    # marked closed, this one never will.
    try:
        f.closed = True
    except AttributeError:  # not an fsspec buffered file (memory://'s BytesIO): close is harmless
        f.close()


class RemoteFileSink(CommitOnExit):
    """One file at an fsspec URL, streamed as it is written and published by ``commit``.

    See the module docstring for what each store guarantees.  ``reserve(size)`` (before the
    first write) sizes the upload's parts for the file; ``write`` hands the store at most
    1 MiB at a time, so an fsspec file's buffer stays about one part.  Used as a context manager, an
    exception inside the block aborts (as :class:`~pysafetensors.io.sinks.AtomicFileSink`).
    """

    def __init__(
        self, url: str, *, durable: bool | None = None, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.url = url
        self.path = redact_url(url)
        self.durable = default_durable() if durable is None else bool(durable)
        self.fs, self.key = writable_filesystem(url, storage_options)
        self.multipart = bool(_protocols(self.fs) & _MULTIPART)
        if self.key.endswith("/") or url.split("?", 1)[0].endswith("/"):
            raise WriteError(f"cannot save to {self.path}: it names a directory, not a file", url=self.path)
        self._check_not_directory()
        parent, base = posixpath.split(self.key.rstrip("/"))
        self.write_key = self.key if self.multipart else posixpath.join(parent, temp_name(base))
        self.block_size = PART_SIZE
        self.bytes_written = 0
        self._file: Any = None
        self._done = False

    def _check_not_directory(self) -> None:
        try:
            is_dir = bool(self.fs.isdir(self.key))
        except Exception:  # noqa: BLE001 - cannot tell (no list permission...): the write will say
            is_dir = False
        if is_dir:
            raise WriteError(
                f"cannot save to {self.path}: it is a directory (a prefix holding other objects), not a file; "
                "saves replace their target with a new file, so choose a file name",
                url=self.path,
            )

    def _open(self) -> Any:
        if self._done:
            raise WriteError(f"the save to {self.path} is already finished")
        if self._file is None:
            try:
                if self.multipart:
                    in_flight = max(1, UPLOAD_BUFFER // self.block_size)
                    self._file = S3MultipartUpload(self.fs, self.write_key, self.block_size, in_flight)
                else:
                    self._file = self.fs.open(self.write_key, "wb", block_size=self.block_size)
            except Exception as e:  # noqa: BLE001
                raise _write_error("opening", self.path, e) from None
        return self._file

    def reserve(self, size: int) -> None:
        """Size the upload's parts for a file of ``size`` bytes (before the first write)."""
        if self._file is None:
            self.block_size = part_size(size)

    def write(self, buffers: Sequence[Buffer]) -> None:
        f = self._open()
        for b in buffers:
            view = memoryview(b).cast("B")
            for start in range(0, len(view), _CHUNK):
                try:
                    f.write(view[start : start + _CHUNK])
                except Exception as e:  # noqa: BLE001
                    raise self._failed("writing", e) from None
            self.bytes_written += len(view)

    def pwrite(self, buffer: Buffer, offset: int) -> None:
        raise WriteError(
            f"{self.path}: a store file is written in order; use StagedUploadSink (open_sink(..., "
            "random_access=True)) for writes at any offset",
            url=self.path,
        )

    def commit(self) -> None:
        """Publish the file: complete the upload (S3), or move the temp object onto the target."""
        f = self._open()  # an empty file still creates its object
        self._done = True
        try:
            f.close()  # S3: the last parts, then CompleteMultipartUpload (or one PUT)
            self.fs.invalidate_cache(self.key)
        except BaseException as e:
            if isinstance(e, Exception):
                raise self._failed("saving", e) from None
            _leave_word(self._cleanup())
            raise
        if not self.multipart:
            try:
                self.fs.mv(self.write_key, self.key)
            except BaseException as e:
                self._cleanup()
                if isinstance(e, Exception):
                    raise _write_error("moving the finished file onto", self.path, e) from None
                raise
        if self.durable:
            self._confirm()

    def _confirm(self) -> None:
        """The object is there at its full size (durable saves: the store acknowledged it)."""
        try:
            self.fs.invalidate_cache(self.key)
            size = int(self.fs.info(self.key)["size"])
        except Exception as e:  # noqa: BLE001
            raise _write_error("confirming", self.path, e) from None
        if size != self.bytes_written:
            raise WriteError(
                f"saving {self.path}: the store reports {size} bytes after the commit, {self.bytes_written} were written",
                url=self.path,
            )

    def _cleanup(self) -> UploadNotAborted | None:
        """Throw the upload away; an S3 upload that could not be aborted is returned (not raised:
        the caller says it beside the error that brought it here)."""
        left = None
        if self._file is not None:
            try:
                if self.multipart:  # an S3MultipartUpload: abort it
                    self._file.discard()
                else:
                    _discard(self._file)
            except UploadNotAborted as e:
                left = e
            except Exception:  # noqa: BLE001, S110 - best effort: the error being raised matters more
                pass
        if not self.multipart and self._file is not None:
            with contextlib.suppress(Exception):  # never created, or already gone
                self.fs.rm(self.write_key)
        return left

    def _failed(self, doing: str, e: BaseException) -> SafetensorError:
        """The error for a write or a commit that failed, raised after the upload is thrown away:
        when that fails too, the error names the upload left behind and how to remove it."""
        self._done = True
        left = self._cleanup()
        error = _write_error(doing, self.path, e)
        if left is None:
            return error
        return UploadNotAborted(f"{error}; then {left}", **{**vars(left), "url": self.path})

    def abort(self) -> None:
        """Discard everything written: abort the multipart upload / remove the temp object.

        An S3 upload that cannot be aborted raises UploadNotAborted when nothing else is being
        raised; while another error is on its way up (the reason for the abort), that error gets
        the upload's description as a note (Python 3.11+) and it is also given as a warning."""
        if self._done:
            return
        self._done = True
        left = self._cleanup()
        if left is not None and sys.exc_info()[1] is None:
            raise left
        _leave_word(left)


def _leave_word(left: UploadNotAborted | None) -> None:
    """Tell about an upload left behind while another exception is being raised."""
    if left is None:
        return
    current = sys.exc_info()[1]
    if current is not None and hasattr(current, "add_note"):
        current.add_note(str(left))
    warnings.warn(str(left), RuntimeWarning, stacklevel=3)


class StagedUploadSink(CommitOnExit):
    """Writes at any offset (the incremental writer) for a URL target: staged in a local temp
    file, uploaded through a :class:`RemoteFileSink` by ``commit``.

    The temp file is unnamed (``tempfile.TemporaryFile``, in ``TMPDIR``): it needs local disk
    for the whole file, and disappears with the process however it ends.  The URL is checked
    (scheme, backend, credentials where the filesystem checks them) when the sink is made.
    """

    def __init__(
        self, url: str, *, durable: bool | None = None, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self._remote = RemoteFileSink(url, durable=durable, storage_options=storage_options)
        self.path = self._remote.path
        try:
            self._tmp = tempfile.TemporaryFile(prefix=".pysafetensors-upload-")  # noqa: SIM115 - closed by commit/abort
        except OSError as e:
            self._remote.abort()
            raise WriteError(f"cannot create a local staging file for {self.path}: {e}", errno=e.errno) from e
        self._fd = self._tmp.fileno()
        self._name = f"the local staging file of {self.path}"
        self._end = 0
        self._done = False

    def reserve(self, size: int) -> None:
        reserve_fd(self._fd, size, self._name)
        self._remote.reserve(size)

    def pwrite(self, buffer: Buffer, offset: int) -> None:
        pwrite_all(self._fd, buffer, offset, self._name)

    def write(self, buffers: Sequence[Buffer]) -> None:
        for b in buffers:
            view = memoryview(b).cast("B")
            pwrite_all(self._fd, view, self._end, self._name)
            self._end += len(view)

    def commit(self) -> None:
        """Upload the staged file, then publish it (see RemoteFileSink.commit)."""
        if self._done:
            return
        self._done = True
        try:
            size = os.fstat(self._fd).st_size
            buf = memoryview(bytearray(min(_UPLOAD_CHUNK, max(size, 1))))
            for off in range(0, size, _UPLOAD_CHUNK):
                n = os.preadv(self._fd, [buf[: min(_UPLOAD_CHUNK, size - off)]], off)
                if n <= 0:
                    raise WriteError(f"reading back {self._name} failed at offset {off}")
                self._remote.write([buf[:n]])
            self._remote.commit()
        except BaseException:
            self._remote.abort()
            raise
        finally:
            self._tmp.close()

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        self._remote.abort()
        self._tmp.close()


def remove_object(url: str, storage_options: Mapping[str, Any] | None = None) -> None:
    """Delete the object at ``url`` (best effort: missing, or a failure, is ignored)."""
    with contextlib.suppress(Exception):
        fs, path = writable_filesystem(url, storage_options)
        fs.rm(path)


__all__ = [
    "MAX_PARTS",
    "PART_SIZE",
    "RemoteFileSink",
    "StagedUploadSink",
    "part_size",
    "remove_object",
    "writable_filesystem",
]
