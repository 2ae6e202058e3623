"""HTTP for :class:`~pysafetensors.io.remote.HTTPSource`, through urllib3.

urllib3's ``PoolManager`` keeps keep-alive connections per origin (a TLS handshake per tensor
would otherwise dominate), follows redirects and retries connection failures and 408/429/5xx
replies with backoff and ``Retry-After``.  This module adds the rules urllib3 leaves to its
caller:

- **Credentials stay with their origin.** ``Authorization`` (from ``token=``, ``headers=`` or a
  ``user:pass@`` URL), ``Cookie``, ``Proxy-Authorization`` and every header the caller passed
  in ``headers=`` are dropped when a redirect changes the scheme, host or port.
- **No silent downgrade.** A redirect from ``https://`` to ``http://`` is refused unless
  ``allow_insecure_redirect=True`` (and then it is followed without those headers).
- **Bounded waits on the way.** ``Retry-After`` is capped at :data:`RETRY_AFTER_CAP` seconds,
  the body of a reply that is retried or redirected is only drained for reuse when it is small,
  and a reply's status line and headers share one deadline (:class:`_HeaderDeadlines`).
- **The resolved URL is reused.** After a redirect (the Hub sends reads to a CDN) later
  requests go straight to the final URL; a redirect, 401 or 403 there (an expired signed URL)
  sends the client back through the original URL.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import urllib3
import urllib3.connection
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from .http_options import HTTPOptions, origin
from .redact import redact_url

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
MAX_REDIRECTS = 10
RETRY_AFTER_CAP = 10.0  # seconds: a server cannot park a reader with Retry-After: 86400
BACKOFF_CAP = 10.0
_DRAIN_LIMIT = 64 * 1024  # bodies of retried/redirected replies up to this size are read to keep the connection


class InsecureRedirect(MaxRetryError):
    """An https:// URL redirected to http:// (refused unless allow_insecure_redirect=True)."""

    def __init__(self, pool: Any, url: str, target: str) -> None:
        super().__init__(pool, url, None)
        self.target = target


class RedirectPolicy(Retry):
    """urllib3's Retry plus the downgrade rule, the Retry-After cap and bounded draining."""

    allow_insecure_redirect = False

    def new(self, **kw: Any) -> Any:
        fresh = super().new(**kw)
        fresh.allow_insecure_redirect = self.allow_insecure_redirect
        return fresh

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> Any:
        if response is not None and error is None:
            location = response.get_redirect_location()
            if location and url and not self.allow_insecure_redirect:
                target = urllib.parse.urljoin(url, location)
                if is_downgrade(url, target):
                    _discard(response)
                    raise InsecureRedirect(_pool, url, target)
            # urllib3 reads the whole body of a reply it retries or redirects (to reuse the
            # connection): only do that for small bodies, close the connection otherwise.
            length = response.headers.get("Content-Length", "")
            if not (length.isdigit() and int(length) <= _DRAIN_LIMIT):
                _discard(response)
        return super().increment(method, url, response, error, _pool, _stacktrace)

    def parse_retry_after(self, retry_after: str) -> float:
        return min(RETRY_AFTER_CAP, super().parse_retry_after(retry_after))


class _QuietRetries(logging.Filter):
    """Drops urllib3's records about retries of this module's requests.

    urllib3 warns "Retrying (...) after connection broken by ...: /path?query" on every retry,
    and Python prints unhandled warnings to stderr: that would put signed URLs' queries on the
    terminal, and the outcome is reported by the source's own error anyway.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(a, RedirectPolicy) for a in args)


for _name in ("urllib3.connectionpool", "urllib3.util.retry"):
    logging.getLogger(_name).addFilter(_QuietRetries())


def _discard(response: Any) -> None:
    # close() shuts the connection too, so nothing of the body is read; a half-dead connection
    # may fail to close, and it is gone either way.
    with contextlib.suppress(Exception):
        response.close()


def is_downgrade(url: str, target: str) -> bool:
    """True when following ``url`` -> ``target`` leaves TLS (https to http)."""
    return origin(url)[0] == "https" and origin(target)[0] != "https"


def split_userinfo(url: str) -> tuple[str, str | None]:
    """The URL without ``user:pass@`` and the matching ``Basic`` Authorization value (or None)."""
    p = urllib.parse.urlsplit(url)
    if "@" not in p.netloc:
        return url, None
    userinfo, _, hostport = p.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    clean = urllib.parse.urlunsplit((p.scheme, hostport, p.path, p.query, p.fragment))
    return clean, "Basic " + base64.b64encode(token).decode("ascii")


class _HeaderDeadlines:
    """Shuts the socket of a reply whose status line and headers are late.

    http.client reads them one socket read at a time, each bounded only by the socket timeout
    (urllib3's ``Timeout`` sets that timeout once per request, ``total`` included), so a server
    sending a byte per second would hold a reader for weeks.  One thread watches the replies
    being read and shuts a late one's socket, which ends its read at once; it looks again at
    least every :attr:`IDLE` seconds and stops after that long with nothing to watch.
    """

    IDLE = 1.0

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._due: dict[Any, float] = {}  # connection -> when its headers are late
        self._wake = 0.0
        self._thread: threading.Thread | None = None

    def watch(self, conn: Any, seconds: float) -> None:
        due = time.monotonic() + seconds
        with self._cv:
            self._due[conn] = due
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="pysafetensors-http-deadlines", daemon=True)
                self._thread.start()
            elif due < self._wake:
                self._cv.notify()

    def done(self, conn: Any) -> bool:
        """Stop watching ``conn``: True when its deadline had passed and its socket was shut."""
        with self._cv:
            return self._due.pop(conn, None) is None

    def _run(self) -> None:
        with self._cv:
            while True:
                now = time.monotonic()
                for conn in [c for c, due in self._due.items() if due <= now]:
                    del self._due[conn]
                    sock: socket.socket | None = conn.sock
                    if sock is not None:
                        with contextlib.suppress(OSError):  # already closed
                            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: TLS state untouched
                idle = not self._due
                self._wake = min([*self._due.values(), now + self.IDLE])  # a look at least every IDLE s
                self._cv.wait(self._wake - now)
                if idle and not self._due:
                    self._thread = None
                    return


_DEADLINES = _HeaderDeadlines()


_T = TypeVar("_T")


def _reply_in_time(conn: Any, read_reply: Callable[[], _T]) -> _T:
    """``read_reply()`` (http.client reading the status line and headers), within ``conn.timeout``."""
    limit = conn.timeout
    if not isinstance(limit, (int, float)) or limit <= 0:
        return read_reply()
    _DEADLINES.watch(conn, limit)
    try:
        reply = read_reply()
    except BaseException:
        if not _DEADLINES.done(conn):
            raise
    else:
        if not _DEADLINES.done(conn):
            return reply
    # The socket was shut: the read failed, or the headers were cut short.  Either way, too late.
    raise TimeoutError("the reply's status line and headers missed their deadline")


class _Connection(urllib3.connection.HTTPConnection):
    def getresponse(self) -> urllib3.HTTPResponse:  # type: ignore[override]  # as urllib3 declares it
        return _reply_in_time(self, super().getresponse)


class _TLSConnection(urllib3.connection.HTTPSConnection):
    def getresponse(self) -> urllib3.HTTPResponse:  # type: ignore[override]  # as urllib3 declares it
        return _reply_in_time(self, super().getresponse)


class _Pool(urllib3.HTTPConnectionPool):
    ConnectionCls = _Connection


class _TLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _TLSConnection


def _pool_manager(url: str, maxsize: int, verify: bool | str) -> urllib3.PoolManager:
    tls: dict[str, Any] = {}
    if verify is False:
        tls["cert_reqs"] = "CERT_NONE"
    elif isinstance(verify, str):
        tls["cert_reqs"] = "CERT_REQUIRED"
        tls["ca_cert_dir" if os.path.isdir(verify) else "ca_certs"] = verify
    pool_kw: dict[str, Any] = {"num_pools": 8, "maxsize": maxsize, "block": False, **tls}
    p = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(p.scheme.lower())
    if proxy and not urllib.request.proxy_bypass(p.hostname or ""):
        if urllib.parse.urlsplit(proxy).scheme.lower() not in ("http", "https"):
            raise ValueError(f"unsupported proxy {redact_url(proxy)} for {p.scheme}:// URLs (only http(s) proxies)")
        manager: urllib3.PoolManager = urllib3.ProxyManager(proxy, **pool_kw)
    else:
        manager = urllib3.PoolManager(**pool_kw)
    manager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}
    return manager


class HttpClient:
    """Ranged GETs of one resource: the pool, the retry policy and the resolved URL."""

    def __init__(self, url: str, options: HTTPOptions | Mapping[str, Any] | None = None) -> None:
        self.options = opts = HTTPOptions.parse(options)
        self.url, basic = split_userinfo(url)
        user = dict(opts.headers)
        if opts.token:
            user["Authorization"] = f"Bearer {opts.token}"
        self.headers = {"User-Agent": "pysafetensors", "Accept-Encoding": "identity", **user}
        if basic and not any(k.lower() == "authorization" for k in self.headers):
            self.headers["Authorization"] = basic
        # What never leaves the origin: credentials and anything the caller chose to send.
        self.private = CREDENTIAL_HEADERS | {k.lower() for k in user}
        self.policy = RedirectPolicy(
            total=None,
            connect=opts.retries,
            read=opts.retries,
            status=opts.retries,
            other=0,  # TLS failures and the like do not get better by asking again
            redirect=MAX_REDIRECTS,
            status_forcelist=RETRY_STATUS,
            allowed_methods=frozenset({"GET"}),
            backoff_factor=opts.backoff,
            backoff_max=BACKOFF_CAP,
            backoff_jitter=opts.backoff,
            raise_on_status=False,
            raise_on_redirect=True,
            respect_retry_after_header=True,
            remove_headers_on_redirect=self.private,
        )
        self.policy.allow_insecure_redirect = opts.allow_insecure_redirect
        # Connecting and each wait for bytes; the reply's headers share one deadline (_HeaderDeadlines).
        self.timeout = urllib3.Timeout(connect=opts.timeout, read=opts.timeout)
        self._pool = _pool_manager(self.url, opts.max_workers, opts.verify)
        self._direct: tuple[str, dict[str, str]] | None = None  # resolved URL and the headers it gets

    def open(self, extra: Mapping[str, str], retry: Retry) -> Any:
        """The response (any status, body unread) to GET with ``extra`` headers.

        Raises urllib3's MaxRetryError (InsecureRedirect included) when connecting or
        redirecting fails for good.  The caller reads the body and calls :meth:`release`.
        """
        limits = self.timeout
        direct = self._direct
        if direct is not None:
            url, headers = direct
            resp = self._pool.urlopen(
                "GET", url, headers={**headers, **extra}, retries=retry, redirect=False,
                preload_content=False, decode_content=False, timeout=limits,
            )  # fmt: skip
            if not (resp.get_redirect_location() or resp.status in (401, 403)):
                return resp
            # Moved, or a signed redirect target expired: resolve again from the original URL.
            self.release(resp, complete=False)
            self._direct = None
            retry = resp.retries or retry
        seen = len(retry.history)
        resp = self._pool.urlopen(
            "GET", self.url, headers={**self.headers, **extra}, retries=retry, redirect=True,
            preload_content=False, decode_content=False, timeout=limits,
        )  # fmt: skip
        if resp.status < 400:
            final = final_url(self.url, resp.retries.history[seen:] if resp.retries else ())
            if origin(final) == origin(self.url):
                self._direct = (final, self.headers)
            else:
                self._direct = (final, {k: v for k, v in self.headers.items() if k.lower() not in self.private})
        return resp

    @staticmethod
    def release(resp: Any, complete: bool) -> None:
        """Give the connection back: kept alive only when its body was read to the end.

        A reply longer than the range asked for (or of unknown length) is cut off: its leftover
        bytes would otherwise be read as the next reply on that connection.
        """
        if not (complete and getattr(resp, "length_remaining", None) == 0):
            _discard(resp)
        resp.release_conn()

    def close(self) -> None:
        # urllib3 2 closes a forgotten pool only when it is garbage-collected (an error's
        # traceback can keep it alive for long): close each one now, then forget them.
        pools = self._pool.pools
        for key in pools.keys():  # noqa: SIM118 - the container refuses plain iteration
            with contextlib.suppress(KeyError):
                pools[key].close()
        self._pool.clear()


class ReplySchedule:
    """When a reply's body must have arrived: ``timeout`` of grace, then ``min_rate`` bytes/s."""

    def __init__(self, timeout: float, min_rate: float, resp: Any) -> None:
        self.timeout = timeout
        self.min_rate = min_rate
        self.start = time.monotonic()
        connection = getattr(resp, "connection", None)
        self.sock = getattr(connection, "sock", None)

    def wait(self, received: int) -> float | None:
        """Seconds the next socket read may wait; None once the body is behind its schedule."""
        allowance = self.timeout + (received / self.min_rate if self.min_rate else 0.0)
        left = self.start + allowance - time.monotonic()
        return min(self.timeout, left) if left > 0 else None


_OBJECT_PREFIX = re.compile(r"<[^<>]* object at 0x[0-9a-f]+>:?\s*|\b\w*(?:Connection|Pool)\([^()]*\):\s*")


def describe_error(e: BaseException) -> str:
    """An exception as one line, without urllib3's ``<... object at 0x...>:`` / ``Pool(host=...):`` prefixes."""
    return _OBJECT_PREFIX.sub("", str(e)).strip() or type(e).__name__


def final_url(url: str, history: Sequence[Any]) -> str:
    """The URL a chain of redirects (urllib3's retry history) ended at; ``url`` when there was none."""
    for entry in reversed(history):
        if entry.redirect_location and entry.url:
            return urllib.parse.urljoin(str(entry.url), str(entry.redirect_location))
    return url
