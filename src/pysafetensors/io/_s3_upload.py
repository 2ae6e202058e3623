"""An S3 multipart upload through s3fs with several parts in flight, and nothing published
until :meth:`S3MultipartUpload.close`.

s3fs's own file object (``S3File``) uploads one part at a time while the writer waits, and a
part given to botocore as bytes is copied up to three more times on its way to the socket
(aiohttp slices it and joins it to the headers, asyncio buffers what the socket did not take).
Here a filled part is handed over as a file object reading the part's own buffer
(:class:`_PartBody`), which aiohttp sends 64 KiB at a time, and uploads on s3fs's event loop
while the next part fills; at most ``in_flight`` parts are uploading at once, so memory holds
at most ``in_flight + 1`` parts.
Requests go through ``S3FileSystem._call_s3``: the filesystem's credentials, its extra
arguments (``s3_additional_kwargs``: encryption, ACL...), its retries and its error
translation.  A file smaller than one part is a single ``PutObject``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import shlex
import threading
from typing import Any

from ..errors import UploadNotAborted, WriteError


class _PartBody(io.RawIOBase):
    """A part's bytes as a seekable binary file, without copying them: botocore reads it to
    checksum it and seeks back (also before a retry), aiohttp reads it in small pieces."""

    def __init__(self, buffer: bytearray) -> None:
        super().__init__()
        self._view = memoryview(buffer)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        out = memoryview(b).cast("B")
        n = max(0, min(len(out), len(self._view) - self._pos))
        out[:n] = self._view[self._pos : self._pos + n]
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def __len__(self) -> int:
        return len(self._view)


class S3MultipartUpload:
    """The object ``key`` of the s3fs filesystem ``fs``, written in order (``write``),
    published by ``close`` (CompleteMultipartUpload, or one PutObject), thrown away by
    ``discard`` (AbortMultipartUpload; in-flight parts are cancelled and waited for first)."""

    def __init__(self, fs: Any, key: str, part_size: int, in_flight: int) -> None:
        self.fs = fs
        self.bucket, self.key, _ = fs.split_path(key)
        if not self.key:
            raise WriteError(f"s3://{self.bucket}: a save needs an object key, not a bucket alone")
        self.part_size = part_size
        self.in_flight = max(1, in_flight)
        self.upload_id: str | None = None
        self.closed = False
        self._buf = bytearray(part_size)
        self._fill = 0
        self._pending: list[tuple[int, concurrent.futures.Future[Any], threading.Event]] = []
        self._parts: list[dict[str, Any]] = []
        self._next = 1

    def _call_tracked(self, method: str, **kwargs: Any) -> tuple[concurrent.futures.Future[Any], threading.Event]:
        """A call whose end (done, failed or cancelled) sets the returned event: cancelling the
        future only asks the loop to stop the request; the event says it has stopped."""
        ended = threading.Event()

        async def tracked() -> Any:
            try:
                return await self.fs._call_s3(method, **kwargs)
            finally:
                ended.set()

        return asyncio.run_coroutine_threadsafe(tracked(), self.fs.loop), ended

    def _sync(self, method: str, **kwargs: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(self.fs._call_s3(method, **kwargs), self.fs.loop).result()

    def write(self, data: memoryview) -> int:
        view = data.cast("B") if data.format != "B" or data.ndim != 1 else data
        done = 0
        while done < len(view):
            n = min(len(view) - done, self.part_size - self._fill)
            self._buf[self._fill : self._fill + n] = view[done : done + n]
            self._fill += n
            done += n
            if self._fill == self.part_size:
                self._send_part()
        return done

    def _send_part(self) -> None:
        if self.upload_id is None:
            self.upload_id = self._sync("create_multipart_upload", Bucket=self.bucket, Key=self.key)["UploadId"]
        while len(self._pending) >= self.in_flight:
            self._collect(self._pending.pop(0))
        # The filled buffer goes to the client as it is; the next part gets a fresh one.
        body = _PartBody(self._buf if self._fill == len(self._buf) else self._buf[: self._fill])
        self._buf = bytearray(self.part_size)
        self._fill = 0
        number = self._next
        self._next += 1
        future, ended = self._call_tracked(
            "upload_part", Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=body
        )
        self._pending.append((number, future, ended))

    def _collect(self, pending: tuple[int, concurrent.futures.Future[Any], threading.Event]) -> None:
        number, future, _ = pending
        out = future.result()
        part = {"PartNumber": number, "ETag": out["ETag"]}
        for checksum in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumSHA1", "ChecksumSHA256", "ChecksumCRC64NVME"):
            if checksum in out:
                part[checksum] = out[checksum]
        self._parts.append(part)

    def close(self) -> None:
        """Publish the object: the last part and CompleteMultipartUpload, or one PutObject."""
        if self.closed:
            return
        self.closed = True
        if self.upload_id is None:
            self._sync("put_object", Bucket=self.bucket, Key=self.key, Body=bytes(self._buf[: self._fill]))
            self._buf = bytearray()
            return
        if self._fill:
            self._send_part()
        while self._pending:
            self._collect(self._pending.pop(0))
        self._buf = bytearray()
        self._sync(
            "complete_multipart_upload", Bucket=self.bucket, Key=self.key, UploadId=self.upload_id,
            MultipartUpload={"Parts": sorted(self._parts, key=lambda p: p["PartNumber"])},
        )
        self.upload_id = None

    def discard(self) -> None:
        """Abort: stop the parts in flight and wait until they have stopped, then
        AbortMultipartUpload, repeated (up to 3 times) while S3 still lists the upload, as S3
        asks of a part that raced the abort.  An upload that stays (every abort failed, or S3
        still lists it) raises UploadNotAborted naming it and the command that removes it."""
        self.closed = True
        self._buf = bytearray()
        pending, self._pending = self._pending, []
        for _, future, _ in pending:
            future.cancel()
        for _, _, ended in pending:
            ended.wait(timeout=60)
        if self.upload_id is None:
            return
        upload_id, self.upload_id = self.upload_id, None
        reason = "S3 still lists it after 3 aborts"
        for _ in range(3):
            try:
                self._sync("abort_multipart_upload", Bucket=self.bucket, Key=self.key, UploadId=upload_id)
            except Exception as e:  # noqa: BLE001 - every failure is reported the same way, below
                reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                continue
            try:
                self._sync("list_parts", Bucket=self.bucket, Key=self.key, UploadId=upload_id)
            except Exception:  # noqa: BLE001 - NoSuchUpload: gone, as it should be
                return
            reason = "S3 still lists it after 3 aborts"
        raise not_aborted(self.bucket, self.key, upload_id, reason)


def not_aborted(bucket: str, key: str, upload_id: str, reason: str) -> UploadNotAborted:
    """The error for an upload left behind: its id, and the command that removes it."""
    command = " ".join(["aws s3api abort-multipart-upload", "--bucket", shlex.quote(bucket), "--key", shlex.quote(key),
                        "--upload-id", shlex.quote(upload_id)])
    return UploadNotAborted(
        f"the multipart upload {upload_id} of s3://{bucket}/{key} could not be aborted ({reason[:300]}); S3 keeps "
        f"the parts it holds, billed, until it is: remove it with `{command}` (or an S3 lifecycle rule "
        "AbortIncompleteMultipartUpload)",
        bucket=bucket, key=key, upload_id=upload_id,
    )


__all__ = ["S3MultipartUpload", "not_aborted"]
