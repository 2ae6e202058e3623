"""The viewer's local server: the page, and JSON endpoints over the inputs named on the command line.

A local port is reachable by every web page the user visits, and tensor names and metadata are
attacker-controlled, so the server:

- binds 127.0.0.1 unless told otherwise;
- answers only requests that carry the run's random token: in the URL once (``/?token=...``,
  which sets an HttpOnly, SameSite=Strict cookie and sends the browser on to ``/``), then in the cookie;
  anything else gets 403;
- answers only when the Host header names the address it listens on (``127.0.0.1:PORT``,
  ``localhost:PORT`` or the explicit ``--host``), which defeats DNS rebinding;
- is read-only: endpoints take a tensor *name* and an input *number*, never a path or URL, so
  nothing but the inputs given on the command line can be opened;
- sends a strict Content-Security-Policy and ``nosniff`` with every reply;
- reads no request body: a request that announces one (and any method but GET and HEAD) is
  answered, then its connection closed, so a body is never read as the next request;
- gives each request :attr:`ViewServer.request_timeout` seconds, in all, to arrive (request line
  and headers; an idle kept-alive connection waits as long for its next one), and holds at most
  :attr:`ViewServer.max_connections` connections: a new one past that closes the one that has
  waited longest without sending a whole request, so slow or idle connections cannot pin a
  thread each while real requests still get through.
"""

from __future__ import annotations

import contextlib
import hmac
import http.server
import io
import json
import mimetypes
import re
import secrets
import socket
import threading
import time
import urllib.parse
from importlib import resources
from typing import Any

from ..errors import SafetensorError
from ..io.redact import redact_text
from .data import ViewSession

CSP = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
STATIC_FILES = frozenset({"index.html", "app.js", "app.css"})
# The answer to the URL with the token: the cookie, and a page that goes on to "/" by itself.  Not
# a redirect: a navigation that began on another site or in a file (the browser is opened on a
# redirect file) would carry the redirect's next request as cross-site, without the
# SameSite=Strict cookie; this page's own step to "/" is same-site, so the cookie goes with it.
ENTER_PAGE = (b'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
              b'<meta http-equiv="refresh" content="0;url=/"><link rel="icon" href="data:,"><title>pysafetensors view</title></head>'
              b'<body><p><a href="/">Open the viewer</a></p></body></html>\n')
COOKIE = "pysafetensors_view_"  # + the port: cookies are per host, not per port, and two viewers may run
_INPUT_NUMBER = re.compile(r"[0-9]{1,3}")


def static_bytes(name: str) -> bytes:
    """One of the page's files, shipped as package data."""
    return resources.files("pysafetensors.view").joinpath("static").joinpath(name).read_bytes()


class ViewServer(http.server.ThreadingHTTPServer):
    """A ThreadingHTTPServer that knows its token, the hosts it answers to, and the session.

    Each accepted connection is tracked (``_connections``: socket -> [state, since]) from its
    accept until its thread ends: "waiting" while a request is on its way (or none yet),
    "busy" while one is answered.  That is what the connection cap works on."""

    daemon_threads = True
    block_on_close = False
    #: seconds a request (its line and headers) may take to arrive, from the connection's accept
    #: or the previous reply; also how long an idle kept-alive connection stays open
    request_timeout = 20.0
    #: seconds a reply may take to be sent (a client that stops reading gives up its thread then)
    response_timeout = 300.0
    #: connections held at once; one more closes the longest-waiting one that sent no whole request
    max_connections = 64

    def __init__(self, session: ViewSession, host: str = "127.0.0.1", port: int = 0) -> None:
        self.session = session
        self.token = secrets.token_urlsafe(24)
        self.visited = threading.Event()  # set when a browser first trades the URL's token for the cookie
        self.bind_host = host
        self._connections: dict[socket.socket, list[Any]] = {}
        self._connections_lock = threading.Lock()
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), _Handler)
        self.port = int(self.server_address[1])
        self.cookie = f"{COOKIE}{self.port}"
        names = {"127.0.0.1", "localhost", _url_host(host), _url_host(self.url_host)}
        self.allowed_hosts = {f"{n}:{self.port}".lower() for n in names}

    @property
    def url_host(self) -> str:
        """The address the printed URL names: the bound one, or loopback for a wildcard bind."""
        if self.bind_host in ("0.0.0.0", ""):
            return "127.0.0.1"
        if self.bind_host == "::":
            return "::1"
        return self.bind_host

    @property
    def url(self) -> str:
        """The URL to open: the page, with the run's token (traded for a cookie on first visit)."""
        return f"http://{_url_host(self.url_host)}:{self.port}/?token={self.token}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # a browser closing a connection is no error

    # --- the connection cap ---------------------------------------------------------------------
    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            room = len(self._connections) < self.max_connections or self._evict_longest_waiting()
            if room:
                self._connections[request] = ["waiting", time.monotonic()]
        if not room:  # every connection is busy answering: this one is closed unanswered
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def _evict_longest_waiting(self) -> bool:
        """Close the connection that has waited longest for a whole request (its thread then
        reads the end of the stream and ends); False when every connection is busy."""
        waiting = [(since, sock) for sock, (state, since) in self._connections.items() if state == "waiting"]
        if not waiting:
            return False
        _, sock = min(waiting, key=lambda entry: entry[0])
        del self._connections[sock]
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        return True

    def mark(self, request: Any, state: str) -> None:
        """A tracked connection is now "waiting" (for a request) or "busy" (answering one)."""
        with self._connections_lock:
            entry = self._connections.get(request)
            if entry is not None:
                entry[0], entry[1] = state, time.monotonic()

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Stop listening, and end every open connection (their threads then end at once)."""
        super().server_close()
        with self._connections_lock:
            open_now, self._connections = list(self._connections), {}
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _DeadlineReader(io.RawIOBase):
    """A connection's reads, each given only what is left of the request's deadline
    (``handler.deadline``): a request trickled in a byte at a time still ends on time.  With no
    deadline (a reply being sent), the server's response timeout."""

    def __init__(self, handler: _Handler) -> None:
        super().__init__()
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        handler = self._handler
        sock = handler.connection
        if handler.deadline is None:
            sock.settimeout(handler.server.response_timeout)
        else:
            left = handler.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            sock.settimeout(left)
        return int(sock.recv_into(buffer))


class _Handler(http.server.BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"
    deadline: float | None = None

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the terminal shows the URL and errors, not an access log

    # --- one request at a time, each on time, never a body --------------------------------------
    def setup(self) -> None:
        super().setup()
        self.rfile = io.BufferedReader(_DeadlineReader(self), 64 * 1024)

    def handle_one_request(self) -> None:
        self.deadline = time.monotonic() + self.server.request_timeout
        self.server.mark(self.request, "waiting")
        super().handle_one_request()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.deadline = None  # the request is in: now the reply, under the response timeout
        self.connection.settimeout(self.server.response_timeout)
        self.server.mark(self.request, "busy")
        # No body is ever read: a request announcing one (or any method but GET and HEAD) is
        # answered, then its connection closed, so its body is never taken for a request.
        headers = getattr(self, "headers", None)  # unset when the request line itself was refused
        has_body = headers is not None and (
            headers.get("Transfer-Encoding") is not None or (headers.get("Content-Length") or "0").strip() != "0"
        )
        if has_body or self.command not in ("GET", "HEAD"):
            self.close_connection = True
        return ok

    # --- checks -----------------------------------------------------------------------------
    def _host_ok(self) -> bool:
        return (self.headers.get("Host") or "").lower() in self.server.allowed_hosts

    def _token_from_cookie(self) -> str | None:
        for header in self.headers.get_all("Cookie") or []:
            for part in header.split(";"):
                name, _, value = part.strip().partition("=")
                if name == self.server.cookie:
                    return value
        return None

    def _authorized(self, query: dict[str, list[str]]) -> tuple[bool, bool]:
        """(authorized, came with the URL token) for this request."""
        token = self.server.token
        given = query.get("token", [None])[0]
        if given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode()):
            return True, True
        cookie = self._token_from_cookie()
        return cookie is not None and hmac.compare_digest(cookie.encode("utf-8", "replace"), token.encode()), False

    # --- replies ----------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        # A message from a library below may quote a URL: shown without its secrets, as the CLI's are.
        self._json(status, {"error": redact_text(message)})

    def do_POST(self) -> None:
        self._error(405, "read-only server")

    do_PUT = do_DELETE = do_PATCH = do_POST

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self._host_ok():
            self._error(403, "unexpected Host header")
            return
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        ok, via_url = self._authorized(query)
        if not ok:
            self._error(403, "missing or wrong token: open the URL the command printed")
            return
        if via_url:  # trade the URL token for a cookie, and drop it from the address bar
            cookie = f"{self.server.cookie}={self.server.token}; HttpOnly; SameSite=Strict; Path=/"
            self._send(200, ENTER_PAGE, "text/html; charset=utf-8", {"Set-Cookie": cookie})
            self.server.visited.set()
            return
        path = url.path
        try:
            if path == "/":
                self._send(200, static_bytes("index.html"), "text/html; charset=utf-8")
            elif path.startswith("/static/"):
                self._static(path[len("/static/"):])
            elif path.startswith("/api/"):
                self._api(path[len("/api/"):], query)
            else:
                self._error(404, "not found")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _static(self, name: str) -> None:
        if name not in STATIC_FILES:  # a fixed list: no path from the request reaches the disk
            self._error(404, "not found")
            return
        ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        self._send(200, static_bytes(name), ctype)

    def _api(self, endpoint: str, query: dict[str, list[str]]) -> None:
        session = self.server.session

        def one(name: str) -> str:
            values = query.get(name)
            if not values:
                raise _BadRequest(f"missing parameter {name!r}")
            return values[0]

        try:
            if endpoint == "checkpoint":
                self._send(200, session.document_json(), "application/json; charset=utf-8")
            elif endpoint == "tensors":
                i = _input_number(query.get("i", ["0"])[0], session)
                self._send(200, session.tensors_json(i), "application/json; charset=utf-8")
            elif endpoint == "values":
                self._json(200, session.values(_input_number(query.get("i", ["0"])[0], session), one("name")))
            elif endpoint == "valuediff":
                if len(session.inputs) != 2:
                    raise _BadRequest("a value diff needs two inputs")
                self._json(200, session.value_diff(one("name")))
            else:
                self._error(404, "unknown endpoint")
        except (BrokenPipeError, ConnectionResetError):
            raise
        except _BadRequest as e:
            self._error(400, str(e))
        except KeyError as e:  # a tensor name the inputs do not hold
            self._error(404, str(e.args[0]) if e.args else "not found")
        except SafetensorError as e:  # e.g. a tensor whose data is corrupt: the page shows it
            self._error(422, str(e))
        except Exception as e:  # noqa: BLE001 - the server keeps running; the page shows the error
            self._error(500, f"{type(e).__name__}: {e}")


class _BadRequest(Exception):
    pass


def _input_number(text: str, session: ViewSession) -> int:
    if not _INPUT_NUMBER.fullmatch(text) or int(text) >= len(session.inputs):
        raise _BadRequest(f"input must be 0..{len(session.inputs) - 1}")
    return int(text)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


__all__ = ["CSP", "ViewServer", "static_bytes"]
