"""A small stdlib HTTP client for ranged GETs: redirects, no credential leaks, keep-alive.

The first request goes through urllib (proxies, redirects).  When the final URL needs no
proxy, later requests reuse keep-alive connections to it (a TLS handshake per tensor would
otherwise dominate); a redirect or 401/403 there (an expired signed URL) sends the client
back through the original URL.  Errors >= 400 surface as ``urllib.error.HTTPError`` either way.
"""

from __future__ import annotations

import http.client
import io
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_MAX_IDLE = 16
_CREDENTIALS = ("authorization", "cookie", "proxy-authorization")


def _strip_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _CREDENTIALS}


class NoAuthAcrossHosts(urllib.request.HTTPRedirectHandler):
    """Follow redirects (the Hub redirects to a CDN) but never send credentials to another host."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
            for key in list(new.headers):
                if key.lower() in _CREDENTIALS:
                    del new.headers[key]
        return new


def _proxied(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    return parts.scheme in proxies and not urllib.request.proxy_bypass(parts.hostname or "")


class HttpClient:
    """GETs of one resource with extra headers per request (the Range)."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout: float) -> None:
        self.url = url
        self.headers = dict(headers)
        self.timeout = timeout
        self._opener = urllib.request.build_opener(NoAuthAcrossHosts())
        self._direct: str | None = None  # final URL after redirects, reachable without a proxy
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def get(self, extra: Mapping[str, str]) -> Iterator[Any]:
        """A response (status < 400) for GET with ``extra`` headers; HTTPError otherwise."""
        direct = self._direct
        if direct is None:
            request = urllib.request.Request(self.url, headers={**self.headers, **extra})
            with self._opener.open(request, timeout=self.timeout) as resp:
                final = resp.geturl()
                if urllib.parse.urlsplit(final).scheme in ("http", "https") and not _proxied(final):
                    self._direct = final
                yield resp
            return
        conn, resp = self._send(direct, extra)
        reusable = False
        try:
            if 300 <= resp.status < 400 or resp.status in (401, 403):
                # Moved, or a signed redirect target expired: resolve again from the original URL.
                resp.read()
                self._direct = None
                reusable = not resp.will_close
                self._release(conn, reusable)
                conn = None
                with self.get(extra) as again:
                    yield again
                return
            if resp.status >= 400:
                body = resp.read()
                reusable = not resp.will_close
                raise urllib.error.HTTPError(direct, resp.status, resp.reason, resp.headers, io.BytesIO(body))
            yield resp
            # Reusable only when the body was read to its end (the reader asks for exact ranges).
            reusable = resp.isclosed() and not resp.will_close
        finally:
            if conn is not None:
                self._release(conn, reusable)

    def _send(self, url: str, extra: Mapping[str, str]) -> tuple[Any, Any]:
        parts = urllib.parse.urlsplit(url)
        headers = {**self.headers, **extra}
        if parts.netloc != urllib.parse.urlsplit(self.url).netloc:
            headers = _strip_credentials(headers)
        target = urllib.parse.urlunsplit(("", "", parts.path or "/", parts.query, ""))
        for fresh in (False, True):
            conn = self._acquire(parts, fresh)
            try:
                conn.request("GET", target, headers=headers)
                return conn, conn.getresponse()
            except (ConnectionError, http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError):
                conn.close()
                if fresh:
                    raise
                # An idle keep-alive connection the server had closed: try once on a new one.
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _acquire(self, parts: urllib.parse.SplitResult, fresh: bool) -> http.client.HTTPConnection:
        if not fresh:
            with self._lock:
                while self._idle:
                    conn = self._idle.pop()
                    if (conn.host, conn.port) == (parts.hostname, parts.port or conn.default_port):
                        return conn
                    conn.close()
        if parts.scheme == "https":
            return http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)

    def _release(self, conn: http.client.HTTPConnection, reusable: bool) -> None:
        with self._lock:
            if reusable and not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
