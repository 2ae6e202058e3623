"""The viewer's server against raw sockets (security round 3, items 3 and 4): a request body is
never read as a request (no smuggled GET after a POST), slow and idle connections end on time and
cannot pin a thread each, and real requests are served through it all."""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pysafetensors.view import ViewServer, ViewSession

from .conftest import serving
from .test_server import login, request


@pytest.fixture
def served(minilm: Path) -> Iterator[ViewServer]:
    with serving(ViewSession.open([str(minilm)])) as server:
        yield server


def _connect(server: ViewServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def _read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, bool]:
    """Everything the server sends within ``limit`` seconds, and whether it closed the connection."""
    sock.settimeout(0.2)
    out = bytearray()
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return bytes(out), True
        if not chunk:
            return bytes(out), True
        out += chunk
    return bytes(out), False


def _get(server: ViewServer, cookie: str, path: str = "/api/checkpoint") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nCookie: {cookie}\r\n\r\n".encode()


@pytest.mark.parametrize("how", ["POST with a length", "POST chunked", "GET with a length", "PUT with a length"])
def test_a_body_is_never_read_as_a_request(served: ViewServer, how: str) -> None:
    cookie = login(served)
    smuggled = _get(served, cookie)
    method = how.split()[0]
    head = f"{method} /api/checkpoint HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nCookie: {cookie}\r\n"
    if "chunked" in how:
        body = f"{len(smuggled):x}\r\n".encode() + smuggled + b"\r\n0\r\n\r\n"
        message = head.encode() + b"Transfer-Encoding: chunked\r\n\r\n" + body
    else:
        message = head.encode() + f"Content-Length: {len(smuggled)}\r\n\r\n".encode() + smuggled
    with _connect(served) as sock:
        sock.sendall(message)
        got, closed = _read_until_closed(sock, 10)
    assert got.count(b"HTTP/1.1 ") == 1, got[:400]  # one reply: the body was not a second request
    assert closed, "the connection stays open after a request with a body"
    assert b"Connection: close" in got
    if method != "GET":
        assert got.startswith(b"HTTP/1.1 405 "), got[:200]
    # Kept-alive requests without a body are still answered one after the other.
    with _connect(served) as sock:
        sock.sendall(_get(served, cookie, "/static/app.css") + _get(served, cookie, "/static/app.js"))
        got, closed = _read_until_closed(sock, 3)
    assert got.count(b"HTTP/1.1 200 ") == 2 and not closed


def _server_threads() -> int:
    return sum(1 for t in threading.enumerate() if "process_request_thread" in t.name)


@pytest.mark.slow
def test_idle_connections_cannot_pin_a_thread_each(served: ViewServer) -> None:
    cookie = login(served)
    before = _server_threads()
    idle: list[socket.socket] = []
    try:
        for i in range(300):
            sock = _connect(served)
            if i % 2:
                sock.sendall(b"GET / HT")  # a request line that never ends
            idle.append(sock)
        time.sleep(1)  # let the server accept them all
        assert _server_threads() - before <= served.max_connections + 8, _server_threads()
        r = request(served, "/api/checkpoint", cookie=cookie)  # a real request gets through
        assert r.status == 200 and r.json()["inputs"][0]["summary"]["parameter_count"] == 22_713_728
        assert _server_threads() - before <= served.max_connections + 8
    finally:
        for sock in idle:
            with contextlib.suppress(OSError):
                sock.close()


def test_a_request_trickled_in_ends_at_its_deadline(served: ViewServer) -> None:
    served.request_timeout = 1.0
    with _connect(served) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n")
        closed = False
        end = time.monotonic() + 15
        while time.monotonic() < end and not closed:
            try:
                sock.sendall(b"X")  # a header that never ends, a byte every 0.2 s
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            _, closed = _read_until_closed(sock, 0.2)
        assert closed, "a request trickled in a byte at a time is never cut off"


def test_an_idle_kept_alive_connection_is_closed(served: ViewServer) -> None:
    cookie = login(served)
    served.request_timeout = 1.0
    with _connect(served) as sock:
        sock.sendall(_get(served, cookie, "/static/app.css"))
        got, closed = _read_until_closed(sock, 10)
    assert got.startswith(b"HTTP/1.1 200 ") and closed


def test_a_connection_over_the_cap_closes_the_longest_waiting_one(served: ViewServer) -> None:
    cookie = login(served)
    served.max_connections = 4
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(_connect(served))
        time.sleep(0.2)
        others = [stack.enter_context(_connect(served)) for _ in range(3)]
        time.sleep(0.2)
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", "/static/app.css", headers={"Host": f"127.0.0.1:{served.port}", "Cookie": cookie})
        assert conn.getresponse().status == 200
        conn.close()
        _, closed = _read_until_closed(first, 5)
        assert closed  # the oldest idle connection made room
        assert not any(_read_until_closed(s, 0.2)[1] for s in others)
