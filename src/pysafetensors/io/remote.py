"""Remote byte sources: HTTP(S) with Range requests (stdlib only) and fsspec URLs.

Both fetch the first 100,001 bytes when opened (``Range: bytes=0-100000``, as huggingface_hub
does), so a header costs one request, or two when it is longer than that.  Later reads ask
for exactly the bytes the reader needs; ``read_ranges`` coalesces nearby ranges into one
request and fetches independent ones concurrently.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from .._optional import require
from ..errors import FileClosed, MissingBackend, RangeNotSupported, RemoteError, SourceError
from ._http_client import HttpClient
from ._ranged import PREFETCH, RangedSource, coalesce
from .redact import redact_url as _redact

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)\s*/\s*(\d+|\*)\s*$", re.IGNORECASE)
_TRANSIENT = (
    ConnectionError,
    TimeoutError,
    socket.timeout,
    http.client.HTTPException,  # IncompleteRead, RemoteDisconnected, BadStatusLine...
    urllib.error.URLError,
)


class HTTPSource(RangedSource):
    """An ``http://`` or ``https://`` file read with Range requests (urllib, no dependency).

    Args:
        url: the file's URL (redirects are followed; credentials never cross hosts).
        headers: extra request headers (for example ``{"Authorization": "Bearer ..."}``).
        token: shorthand for ``Authorization: Bearer <token>``.
        timeout: seconds per request (connect and each read).
        retries: attempts after the first for 5xx/429/408 replies, resets and timeouts; the
            wait doubles from ``backoff`` seconds (with jitter, at most 10 s, or Retry-After).
        allow_full_download: when the server ignores Range and sends the whole file (200),
            keep it in memory instead of raising RangeNotSupported.
        coalesce_gap: ranges closer than this many bytes are fetched in one request.
        max_workers: concurrent requests for independent ranges and for the ``chunk_size``
            pieces of a large read.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.25,
        allow_full_download: bool = False,
        coalesce_gap: int = 256 * 1024,
        max_workers: int = 8,
        chunk_size: int = 16 << 20,
    ) -> None:
        if urllib.parse.urlsplit(url).scheme.lower() not in ("http", "https"):
            raise ValueError(f"HTTPSource needs an http:// or https:// URL, got {url!r}")
        self.url = url
        self.name = _redact(url)
        self._headers = {"User-Agent": "pysafetensors", "Accept-Encoding": "identity", **dict(headers or {})}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.allow_full_download = allow_full_download
        self.coalesce_gap = coalesce_gap
        self.max_workers = max_workers
        self.chunk_size = max(1, int(chunk_size))
        self.requests = 0  # counters, for the curious and for tests
        self.bytes_received = 0
        self._count_lock = threading.Lock()
        self._client = HttpClient(url, self._headers, timeout)
        self._closed = False
        self._prefix = b""
        self.size = 0
        self.etag: str | None = None  # a strong ETag of the first reply: later replies must match
        self._open()

    # --- the first request: size and prefix -----------------------------------------
    def _open(self) -> None:
        def first(resp: Any) -> None:
            if resp.status == 200:
                self._whole_file(resp)
                return
            _, _, total = self._content_range(resp, 0)
            self.size = total
            self.etag = _strong_etag(resp)
            want = min(total, PREFETCH)
            buf = memoryview(bytearray(want))
            got = self._read_body(resp, buf)
            if got != want:
                raise http.client.IncompleteRead(bytes(buf[:got]), want - got)
            self._prefix = bytes(buf)

        self._with_retries(f"bytes=0-{PREFETCH - 1}", first, empty_ok=True)

    def _whole_file(self, resp: Any) -> None:
        length = resp.headers.get("Content-Length")
        # A 200 for a file no bigger than the prefix we asked for is exactly what we wanted.
        small = length is not None and length.isdigit() and int(length) <= PREFETCH
        if not (self.allow_full_download or small):
            resp.close()
            raise RangeNotSupported(
                f"{self.name}: the server ignored the Range request and answered 200 with the whole file"
                + (f" ({length} bytes)" if length else "")
                + "; pass allow_full_download=True (storage_options={'allow_full_download': True}) to "
                "download it all",
                url=self.name,
            )
        data = resp.read()  # allowed by the caller: the whole file, once
        self._count(len(data))
        if length is not None and len(data) != int(length):
            raise http.client.IncompleteRead(data, int(length) - len(data))
        self.size = len(data)
        self._prefix = data  # every later read is served from memory

    def _content_range(self, resp: Any, expected_start: int) -> tuple[int, int, int]:
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # Ranges would then count compressed bytes: the data could not be trusted.
            raise RemoteError(f"{self.name}: the server compressed a ranged reply ({encoding})", url=self.name)
        value = resp.headers.get("Content-Range", "")
        m = _CONTENT_RANGE.match(value)
        if not m or m.group(3) == "*" or m.group(1) is None:
            raise RemoteError(
                f"{self.name}: 206 reply with an unusable Content-Range {value!r} (need 'bytes a-b/total')",
                url=self.name,
            )
        start, end, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if start != expected_start:
            raise RemoteError(
                f"{self.name}: asked for bytes from {expected_start}, the server sent from {start}",
                url=self.name,
                offset=expected_start,
            )
        return start, end, total

    # --- ranged reads -----------------------------------------------------------------
    def _fetch(self, offset: int, view: memoryview) -> None:
        done = 0

        def body(resp: Any) -> None:
            nonlocal done
            if resp.status == 200:
                resp.close()
                raise RangeNotSupported(
                    f"{self.name}: the server stopped honouring Range requests (200 for bytes {offset + done}-)",
                    url=self.name,
                )
            _, _, total = self._content_range(resp, offset + done)
            etag = _strong_etag(resp)
            if total != self.size or (self.etag and etag and etag != self.etag):
                raise RemoteError(
                    f"{self.name}: the file changed while open (size {self.size} -> {total}, "
                    f"ETag {self.etag} -> {etag}); reopen it",
                    url=self.name,
                )
            done += self._read_body(resp, view[done:])
            if done < len(view):
                raise http.client.IncompleteRead(b"", len(view) - done)

        self._with_retries(lambda: f"bytes={offset + done}-{offset + len(view) - 1}", body)

    def _read_body(self, resp: Any, view: memoryview) -> int:
        got = 0
        while got < len(view):
            n = resp.readinto(view[got:])
            if not n:
                break
            got += n
            self._count(n)
        return got

    def _count(self, n: int, request: bool = False) -> None:
        with self._count_lock:
            self.bytes_received += n
            self.requests += request

    def _with_retries(self, byte_range: Any, handle: Any, empty_ok: bool = False) -> None:
        attempt = 0
        while True:
            if self._closed:
                raise FileClosed("File is closed")
            rng = byte_range() if callable(byte_range) else byte_range
            self._count(0, request=True)
            wait: float | None = None
            try:
                with self._client.get({"Range": rng}) as resp:
                    handle(resp)
                return
            except urllib.error.HTTPError as e:
                e.close()
                if e.code == 416 and empty_ok:
                    self._empty(e)
                    return
                if e.code not in RETRY_STATUS or attempt >= self.retries:
                    raise self._status_error(e.code, rng) from e
                wait = _retry_after(e.headers.get("Retry-After") if e.headers else None)
            except (RangeNotSupported, FileClosed):
                raise
            except RemoteError:
                raise
            except _TRANSIENT as e:
                if attempt >= self.retries:
                    raise RemoteError(
                        f"{self.name}: request for {rng} failed after {attempt + 1} attempts: {e}", url=self.name
                    ) from e
            except OSError as e:
                raise RemoteError(f"{self.name}: request for {rng} failed: {e}", url=self.name) from e
            attempt += 1
            delay = min(10.0, self.backoff * (2 ** (attempt - 1))) * (0.5 + random.random() / 2)
            time.sleep(wait if wait is not None else delay)

    def _empty(self, e: urllib.error.HTTPError) -> None:
        m = _CONTENT_RANGE.match(e.headers.get("Content-Range", "") if e.headers else "")
        if not m or m.group(3) in (None, "*"):
            raise self._status_error(416, "bytes=0-") from e
        self.size = int(m.group(3))
        if self.size:  # 416 for bytes=0- on a non-empty file is nonsense
            raise self._status_error(416, "bytes=0-") from e

    def close(self) -> None:
        self._closed = True
        self._client.close()

    def _status_error(self, code: int, rng: str) -> Exception:
        if code == 404 or code == 410:
            return FileNotFoundError(f"No such file or directory: {self.name}")
        hint = ""
        if code in (401, 403):
            hint = " (pass a token: storage_options={'token': ...} or headers={'Authorization': ...})"
        return RemoteError(f"{self.name}: HTTP {code} for Range {rng}{hint}", url=self.name, status=code)


def _strong_etag(resp: Any) -> str | None:
    etag = resp.headers.get("ETag")
    return etag if etag and not etag.startswith("W/") else None


def _retry_after(value: str | None) -> float | None:
    try:
        return min(10.0, max(0.0, float(value))) if value else None
    except ValueError:
        return None


class FsspecSource(RangedSource):
    """A file behind any fsspec URL (``s3://``, ``gs://``, ``memory://``, ``hf://``...).

    ``storage_options`` go to the filesystem (credentials, endpoint_url, anon=True...).
    Ranged reads use ``fs.cat_file`` / ``fs.cat_ranges``, so async filesystems fetch
    coalesced ranges concurrently.
    """

    def __init__(
        self,
        url: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        coalesce_gap: int = 256 * 1024,
        **options: Any,
    ) -> None:
        fsspec = require("fsspec", "fsspec")
        self.url = url
        self.name = _redact(url) if "://" in url else url
        self.coalesce_gap = coalesce_gap
        self.max_workers = 1  # cat_ranges does its own concurrency
        self._closed = False
        self._prefix = b""
        opts = {**dict(storage_options or {}), **options}
        scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
        try:
            self.fs, self.path = fsspec.core.url_to_fs(url, **opts)
        except ImportError as e:
            module = str(getattr(e, "name", "") or "") or _BACKEND_MODULES.get(scheme, f"a backend for {scheme}")
            raise MissingBackend(_BACKEND_MODULES.get(scheme, module), "fsspec", scheme) from e
        except ValueError as e:
            raise RemoteError(f"{self.name}: fsspec cannot open this URL: {e}", url=self.name) from e
        try:
            self.size = int(self.fs.size(self.path))
        except FileNotFoundError:
            raise FileNotFoundError(f"No such file or directory: {self.name}") from None
        except Exception as e:
            raise RemoteError(f"{self.name}: cannot stat: {e}", url=self.name) from e
        self._prefix = self._cat(0, min(self.size, PREFETCH))

    def _cat(self, start: int, end: int) -> bytes:
        try:
            data = self.fs.cat_file(self.path, start=start, end=end)
        except FileNotFoundError:
            raise FileNotFoundError(f"No such file or directory: {self.name}") from None
        except Exception as e:
            raise RemoteError(f"{self.name}: read of bytes {start}-{end} failed: {e}", url=self.name) from e
        if len(data) != end - start:
            raise SourceError(
                f"{self.name}: short read at offset {start}: wanted {end - start} bytes, got {len(data)}",
                offset=start,
            )
        return bytes(data)

    def _fetch(self, offset: int, view: memoryview) -> None:
        view[:] = self._cat(offset, offset + len(view))

    def _fetch_parallel(self, requests: Sequence[tuple[int, memoryview]]) -> None:
        groups = coalesce(requests, self.coalesce_gap)
        if len(groups) <= 1:
            for g in groups:
                self._fetch_group(g)
            return
        spans = [(g[0][0], max(o + len(b) for o, b in g)) for g in groups]
        try:
            blobs = self.fs.cat_ranges(
                [self.path] * len(spans), [s for s, _ in spans], [e for _, e in spans], on_error="raise"
            )
        except Exception as e:
            raise RemoteError(f"{self.name}: ranged read failed: {e}", url=self.name) from e
        for g, (start, end), blob in zip(groups, spans, blobs):
            if isinstance(blob, BaseException) or len(blob) != end - start:
                raise SourceError(f"{self.name}: short read at offset {start}", offset=start)
            for offset, buf in g:
                buf[:] = blob[offset - start : offset - start + len(buf)]


# Install hints for fsspec protocols whose implementation lives in another package.
_BACKEND_MODULES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "adl": "adlfs",
    "hf": "huggingface_hub",
    "oci": "ocifs",
    "ssh": "paramiko",
    "sftp": "paramiko",
}
