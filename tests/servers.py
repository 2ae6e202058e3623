"""A tiny threaded HTTP server on 127.0.0.1 that serves in-memory files with Range support.

It counts requests and body bytes per path, can ignore Range, fail transiently, or require a
token.  Used as a context manager it stops itself; threads are daemons either way.
"""

from __future__ import annotations

import re
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


@dataclass
class Log:
    requests: int = 0
    bytes_sent: int = 0
    ranges: list[str | None] = field(default_factory=list)


class RangeServer:
    """Serve ``files`` (path -> bytes) at ``http://127.0.0.1:<port>/<path>``.

    Options: ``ignore_range`` (always 200 + whole body), ``fail_first`` (that many requests
    answered ``fail_status``, or dropped mid-body when ``fail_status`` is "reset"),
    ``token`` (require ``Authorization: Bearer <token>``), ``redirects`` (path -> URL, 302).
    """

    def __init__(
        self,
        files: dict[str, bytes],
        *,
        ignore_range: bool = False,
        fail_first: int = 0,
        fail_status: int | str = 503,
        token: str | None = None,
        redirects: dict[str, str] | None = None,
    ) -> None:
        self.files = dict(files)
        self.redirects = dict(redirects or {})  # path -> absolute URL (302)
        self.auth_seen: list[str | None] = []
        self.connections: set[tuple[str, int]] = set()  # client (host, port): one per TCP connection
        self.require_query: str | None = None  # answer 403 unless the query string is exactly this
        self.ignore_range = ignore_range
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.token = token
        self.log = Log()
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self.handle_get(head=True)

            def do_GET(self) -> None:
                self.handle_get(head=False)

            def handle_get(self, head: bool) -> None:
                server.serve(self, head)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def reset_log(self) -> None:
        with self.lock:
            self.log = Log()

    def serve(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        rng = h.headers.get("Range")
        with self.lock:
            self.log.requests += 1
            self.log.ranges.append(rng)
            failing = self.fail_first > 0
            if failing:
                self.fail_first -= 1
        path = h.path.split("?", 1)[0].lstrip("/")
        with self.lock:
            self.auth_seen.append(h.headers.get("Authorization"))
            self.connections.add(h.client_address[:2])
        if self.require_query is not None and h.path.partition("?")[2] != self.require_query:
            return self.reply(h, 403, b"signature expired")
        if path in self.redirects:
            return self.reply(h, 302, b"", extra={"Location": self.redirects[path]})
        if self.token is not None and h.headers.get("Authorization") != f"Bearer {self.token}":
            return self.reply(h, 401, b"unauthorized")
        if failing and self.fail_status != "reset":
            return self.reply(h, int(self.fail_status), b"try again")
        data = self.files.get(path)
        if data is None:
            return self.reply(h, 404, b"not found")
        m = _RANGE.match(rng or "")
        if self.ignore_range or m is None:
            return self.reply(h, 200, data, head=head)
        size = len(data)
        if m.group(1):
            start = int(m.group(1))
            end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        else:
            start, end = max(0, size - int(m.group(2))), size - 1
        if start >= size:
            return self.reply(h, 416, b"", extra={"Content-Range": f"bytes */{size}"})
        body = data[start : end + 1]
        if failing:  # "reset": promise the body, send half of it, drop the connection
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body[: len(body) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return None
        extra = {"Content-Range": f"bytes {start}-{end}/{size}", "ETag": f'"{hash(data) & 0xFFFFFFFF:x}"'}
        return self.reply(h, 206, body, extra=extra, head=head)

    def reply(
        self, h: BaseHTTPRequestHandler, status: int, body: bytes, extra: dict[str, str] | None = None, head: bool = False
    ) -> None:
        h.send_response(status)
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "none" if self.ignore_range else "bytes")
        h.end_headers()
        if not head:
            with self.lock:  # counted before sending: the client may look at the log the moment it has the body
                self.log.bytes_sent += len(body)
            try:
                h.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client hung up (it saw a 200 it did not want)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> RangeServer:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
