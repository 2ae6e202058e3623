"""Remote byte sources: HTTP(S) with Range requests (urllib3) and fsspec URLs.

Both fetch the first 100,001 bytes when opened (``Range: bytes=0-100000``, as huggingface_hub
does), so a header costs one request, or two when it is longer than that.  Later reads ask
for exactly the bytes the reader needs; ``read_ranges`` coalesces nearby ranges into one
request and fetches independent ones concurrently.

Every failure leaves as a :class:`~pysafetensors.errors.SourceError` subclass (``RemoteError``,
``RemoteTimeout``, ``RangeNotSupported``) or ``FileNotFoundError``, naming the redacted URL and,
for reads, the offset; the transport's own exceptions never escape.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import MaxRetryError, ProtocolError, ReadTimeoutError, ResponseError

from ..errors import FileClosed, RangeNotSupported, RemoteError, RemoteTimeout, SafetensorError
from ._fsspec import FsspecSource
from ._http_client import RETRY_STATUS, HttpClient, InsecureRedirect, ReplySchedule, describe_error
from ._ranged import PREFETCH, RangedSource
from .http_options import HTTPOptions
from .redact import redact_text, redact_url

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(?:(\d+)-(\d+)|\*)\s*/\s*(\d+|\*)\s*$", re.IGNORECASE)
_PIECE = 1 << 20  # most bytes asked of the socket per read: a reply is checked against its schedule between reads
# A reply body that breaks off, stalls for ``timeout`` or fails TLS mid-way is asked for again.
_BODY_FAULTS = (Urllib3Error, ConnectionError, TimeoutError)


class HTTPSource(RangedSource):
    """An ``http://`` or ``https://`` file read with Range requests.

    ``options`` is an :class:`HTTPOptions` (timeouts, retries, credentials, TLS...), or the same
    as a mapping or keywords (``HTTPSource(url, token=..., retries=8)``), checked once here.  A
    ``user:pass@`` part of the URL is sent as HTTP basic auth (and never shown).

    Redirects are followed (10 at most).  ``token``, ``headers``, ``user:pass@`` credentials,
    cookies and proxy credentials are sent only to the URL's own origin: a redirect that
    changes the scheme, host or port drops them.
    """

    def __init__(self, url: str, options: HTTPOptions | Mapping[str, Any] | None = None, **more: Any) -> None:
        self.url = url
        self.name = redact_url(url)
        try:
            scheme = urllib.parse.urlsplit(url).scheme.lower()
        except ValueError as e:  # "http://[::1/x"
            raise RemoteError(f"{self.name}: not a valid URL: {e}", url=self.name) from None
        if scheme not in ("http", "https"):
            raise ValueError(f"HTTPSource needs an http:// or https:// URL, got {self.name!r}")
        self.options = opts = HTTPOptions.parse(options, **more)
        self.coalesce_gap = opts.coalesce_gap
        self.max_workers = opts.max_workers
        self.chunk_size = opts.chunk_size
        self.requests = 0  # counters, for the curious and for tests
        self.bytes_received = 0
        self._count_lock = threading.Lock()
        self._closed = False
        self._prefix = b""
        self.size = 0
        self.etag: str | None = None  # a strong ETag of the first reply: later replies must match
        try:
            self._client = HttpClient(url, opts)
        except (ValueError, OSError) as e:
            raise RemoteError(redact_text(f"{self.name}: {e}"), url=self.name) from e
        try:
            self._open()
        except BaseException:
            self._client.close()
            raise

    # --- the first request: size and prefix -----------------------------------------
    def _open(self) -> None:
        def first(resp: Any, clock: ReplySchedule) -> None:
            if resp.status == 200:
                self._whole_file(resp, clock)
                return
            _, _, total = self._content_range(resp, 0)
            self.size = total
            self.etag = _strong_etag(resp)
            want = min(total, PREFETCH)
            buf = memoryview(bytearray(want))
            got = self._read_body(resp, buf, clock, rng)
            if got != want:
                raise ProtocolError(f"the reply ended after {got} of {want} bytes")
            self._prefix = bytes(buf)

        rng = f"bytes=0-{PREFETCH - 1}"
        self._request(lambda: rng, first, offset=0, empty_ok=True)

    def _whole_file(self, resp: Any, clock: ReplySchedule) -> None:
        length = resp.headers.get("Content-Length")
        # A 200 for a file no bigger than the prefix we asked for is exactly what we wanted.
        small = length is not None and length.isdigit() and int(length) <= PREFETCH
        _refuse_compressed(resp, self.name, "whole-file")
        if not (self.options.allow_full_download or small):
            raise RangeNotSupported(
                f"{self.name}: the server ignored the Range request and answered 200 with the whole file"
                + (f" ({length} bytes)" if length else "")
                + "; pass allow_full_download=True (storage_options={'allow_full_download': True}) to "
                "download it all",
                url=self.name,
            )
        # Allowed by the caller: the whole file, once, grown as it arrives (a Content-Length is
        # only a claim, so nothing is allocated up front on its word).
        data = bytearray()
        while True:
            piece = self._read_piece(resp, clock, len(data), "bytes=0-")
            if not piece:
                break
            data += piece
        if length is not None and length.isdigit() and len(data) != int(length):
            raise ProtocolError(f"the reply ended after {len(data)} of {length} bytes")
        self.size = len(data)
        self._prefix = bytes(data)  # every later read is served from memory

    def _content_range(self, resp: Any, expected_start: int) -> tuple[int, int, int]:
        if resp.status != 206:
            raise RemoteError(f"{self.name}: unexpected HTTP {resp.status} for a Range request", url=self.name)
        _refuse_compressed(resp, self.name, "ranged")
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

        def body(resp: Any, clock: ReplySchedule) -> None:
            nonlocal done
            if resp.status == 200:
                raise RangeNotSupported(
                    f"{self.name}: the server stopped honouring Range requests (200 for bytes {offset + done}-)",
                    url=self.name,
                    offset=offset + done,
                )
            _, _, total = self._content_range(resp, offset + done)
            etag = _strong_etag(resp)
            if total != self.size or (self.etag and etag and etag != self.etag):
                raise RemoteError(
                    f"{self.name}: the file changed while open (size {self.size} -> {total}, "
                    f"ETag {self.etag} -> {etag}); reopen it",
                    url=self.name,
                    offset=offset + done,
                )
            start = done
            done += self._read_body(resp, view[done:], clock, byte_range())
            if done < len(view):  # resumed from here on the next attempt
                raise ProtocolError(f"the reply ended after {done - start} of {len(view) - start} bytes")

        def byte_range() -> str:
            return f"bytes={offset + done}-{offset + len(view) - 1}"

        self._request(byte_range, body, offset=offset)

    def _read_body(self, resp: Any, view: memoryview, clock: ReplySchedule, rng: str) -> int:
        got = 0
        while got < len(view):
            piece = self._read_piece(resp, clock, got, rng, min(len(view) - got, _PIECE))
            if not piece:
                break
            # read1 hands back bytes: one copy into the caller's buffer (urllib3's readinto
            # copies the same way), the price of checking the schedule between socket reads.
            view[got : got + len(piece)] = piece
            got += len(piece)
        return got

    def _read_piece(self, resp: Any, clock: ReplySchedule, received: int, rng: str, amount: int = _PIECE) -> bytes:
        """One socket read of at most ``amount`` bytes, with the wait bounded by the schedule."""
        wait = clock.wait(received)
        if wait is None:
            raise self._too_slow(clock, received, rng)
        sock = clock.sock
        if sock is not None:
            sock.settimeout(wait)
        try:
            piece = bytes(resp.read1(amount))
        except ReadTimeoutError:
            if clock.wait(received) is None:
                raise self._too_slow(clock, received, rng) from None
            raise  # silent for a whole ``timeout``: retried
        self._count(len(piece))
        return piece

    def _too_slow(self, clock: ReplySchedule, received: int, rng: str) -> RemoteTimeout:
        elapsed = time.monotonic() - clock.start
        opts = self.options
        rule = (
            f"slower than min_rate={opts.min_rate:g} B/s after the timeout={opts.timeout:g} s grace"
            if opts.min_rate
            else f"past the timeout={opts.timeout:g} s deadline"
        )
        return RemoteTimeout(
            f"{self.name}: Range {rng}: {received} bytes in {elapsed:.1f} s, {rule}",
            url=self.name,
            range=rng,
            elapsed=elapsed,
            offset=_range_start(rng),
        )

    def _count(self, n: int, requests: int = 0) -> None:
        with self._count_lock:
            self.bytes_received += n
            self.requests += requests

    def _request(
        self, byte_range: Callable[[], str], handle: Callable[[Any, ReplySchedule], None], *, offset: int,
        empty_ok: bool = False,
    ) -> None:  # fmt: skip
        """GET ``byte_range()`` and give the reply to ``handle``; body faults are retried.

        urllib3 retries connection failures and retryable statuses inside ``open``; a body
        that breaks off or stalls is asked for again here, counted by the same Retry object.
        """
        retry = self._client.policy
        attempts = 0
        while True:
            if self._closed:
                raise FileClosed("File is closed")
            rng = byte_range()
            attempts += 1
            before = len(retry.history)
            try:
                resp = self._client.open({"Range": rng}, retry)
            except MaxRetryError as e:
                raise self._transport_error(e, rng, offset) from None
            except (Urllib3Error, ValueError, OSError) as e:  # e.g. a redirect to an unparsable Location
                if self._closed:
                    raise FileClosed("File is closed") from None
                raise RemoteError(
                    redact_text(f"{self.name}: request for {rng} failed: {describe_error(e)}"), url=self.name, offset=offset
                ) from None
            retry = resp.retries or retry
            self._count(0, requests=1 + len(retry.history) - before)
            complete = False
            try:
                if resp.status >= 400:
                    if resp.status == 416 and empty_ok:
                        self._empty(resp)
                        return
                    raise self._status_error(resp.status, rng, offset)
                handle(resp, ReplySchedule(self.options.timeout, self.options.min_rate, resp))
                complete = True
                return
            except SafetensorError:
                raise
            except _BODY_FAULTS as e:
                fault: Exception = e
            finally:
                self._client.release(resp, complete)
            if self._closed:
                raise FileClosed("File is closed")
            read_error = fault if isinstance(fault, (ProtocolError, ReadTimeoutError)) else ProtocolError(str(fault))
            try:
                retry = retry.increment("GET", self._client.url, error=read_error)
            except MaxRetryError:
                kind = RemoteTimeout if isinstance(fault, (ReadTimeoutError, TimeoutError)) else RemoteError
                raise kind(
                    redact_text(
                        f"{self.name}: reading {rng} (offset {_range_start(rng)}) failed after {attempts} attempts: "
                        f"{describe_error(fault)}"
                    ),
                    url=self.name,
                    offset=_range_start(rng),
                    range=rng,
                ) from None
            retry.sleep()

    def _transport_error(self, e: MaxRetryError, rng: str, offset: int) -> Exception:
        if self._closed:
            return FileClosed("File is closed")
        if isinstance(e, InsecureRedirect):
            return RemoteError(
                f"{self.name}: refusing the redirect from https:// to {redact_url(e.target)}: plain http would "
                "expose the request; pass allow_insecure_redirect=True (storage_options) to follow it "
                "without credentials",
                url=self.name,
                offset=offset,
            )
        reason = e.reason
        if isinstance(reason, ResponseError) and "redirect" in str(reason):
            return RemoteError(f"{self.name}: too many redirects for {rng}", url=self.name, offset=offset)
        if isinstance(reason, (ReadTimeoutError, TimeoutError)):
            return RemoteTimeout(
                f"{self.name}: Range {rng}: no complete reply (status line and headers) within "
                f"timeout={self.options.timeout:g} s, retried {self.options.retries} times",
                url=self.name, offset=offset, range=rng,
            )  # fmt: skip
        text = describe_error(reason) if reason is not None else "failed"
        return RemoteError(
            redact_text(f"{self.name}: request for {rng} failed: {text}"), url=self.name, offset=offset, range=rng
        )

    def _empty(self, resp: Any) -> None:
        m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        if not m or m.group(3) in (None, "*"):
            raise self._status_error(416, "bytes=0-", 0)
        self.size = int(m.group(3))
        if self.size:  # 416 for bytes=0- on a non-empty file is nonsense
            raise self._status_error(416, "bytes=0-", 0)

    def close(self) -> None:
        self._closed = True
        self._client.close()

    def _status_error(self, code: int, rng: str, offset: int) -> Exception:
        if code == 404 or code == 410:
            return FileNotFoundError(f"No such file or directory: {self.name}")
        hint = ""
        if code in (401, 403):
            hint = (" (pass a token: storage_options={'token': ...} or headers={'Authorization': ...};"
                    " on the command line -H 'Authorization: Bearer ...', or HF_TOKEN for the Hub)")
        retried = " (after retries)" if code in RETRY_STATUS else ""
        return RemoteError(
            f"{self.name}: HTTP {code} for Range {rng}{retried}{hint}", url=self.name, status=code, offset=offset
        )


def _refuse_compressed(resp: Any, name: str, what: str) -> None:
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        # Offsets and lengths would count compressed bytes: the data could not be trusted.
        raise RemoteError(
            f"{name}: the server compressed a {what} reply (Content-Encoding: {encoding}) although "
            "'Accept-Encoding: identity' was asked; compressed downloads are not decoded",
            url=name,
            encoding=encoding,
        )


def _strong_etag(resp: Any) -> str | None:
    etag = resp.headers.get("ETag")
    return etag if etag and not etag.startswith("W/") else None


def _range_start(rng: str) -> int:
    m = re.match(r"bytes=(\d+)-", rng)
    return int(m.group(1)) if m else 0


__all__ = ["PREFETCH", "FsspecSource", "HTTPOptions", "HTTPSource"]
