"""The local server's defences, over real HTTP on 127.0.0.1: the token, the Host check, the headers,
read-only endpoints, and no path from a request ever reaching the disk or the network."""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import RangeServer

from pysafetensors.view import ViewServer, ViewSession
from pysafetensors.view.server import CSP

from .conftest import serving

QUERY = "encoder.layer.0.attention.self.query.weight"


class Reply:
    def __init__(self, r: http.client.HTTPResponse) -> None:
        self.status = r.status
        self.headers = r.headers
        self.body = r.read()

    def json(self) -> Any:
        return json.loads(self.body)


def request(server: ViewServer, path: str, *, cookie: str | None = None, host: str | None = None,
            method: str = "GET") -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{server.port}")
        if cookie is not None:
            conn.putheader("Cookie", cookie)
        conn.endheaders()
        return Reply(conn.getresponse())
    finally:
        conn.close()


def login(server: ViewServer) -> str:
    """Visit the printed URL; returns the Cookie header the browser would send from then on."""
    r = request(server, server.url.split(f":{server.port}", 1)[1])
    # A page that goes on to "/" by itself (not a redirect: see ENTER_PAGE), the token left behind.
    assert r.status == 200 and b'<meta http-equiv="refresh" content="0;url=/">' in r.body
    assert server.token.encode() not in r.body
    set_cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie and "Path=/" in set_cookie
    return set_cookie.split(";", 1)[0]


@pytest.fixture
def served(minilm: Path) -> Iterator[ViewServer]:
    with serving(ViewSession.open([str(minilm)])) as server:
        yield server


PAGES = ["/", "/static/app.js", "/static/app.css", "/static/index.html", "/api/checkpoint",
         f"/api/values?i=0&name={QUERY}"]


def test_every_reply_needs_the_token(served: ViewServer) -> None:
    for path in PAGES:
        assert request(served, path).status == 403, path
        assert request(served, path, cookie=f"{served.cookie}=wrong").status == 403, path
        assert request(served, path + ("&" if "?" in path else "?") + "token=wrong").status == 403, path
        assert request(served, path, cookie=f"pysafetensors_view_1={served.token}").status == 403, path  # another port's
    cookie = login(served)
    for path in PAGES:
        r = request(served, path, cookie=cookie)
        assert r.status == 200, (path, r.body[:200])
    assert request(served, "/api/checkpoint", cookie=cookie).json()["inputs"][0]["summary"]["parameter_count"] == 22_713_728


def test_the_endpoints_serve_the_sessions_json(minilm: Path, edited_pair: tuple[Path, Path, dict[str, str]]) -> None:
    a, b, changed = edited_pair
    with ViewSession.open([str(a), str(b)]) as reference, serving(ViewSession.open([str(a), str(b)])) as server:
        cookie = login(server)
        r = request(server, "/api/checkpoint", cookie=cookie)
        assert r.body == reference.document_json()
        name = changed["nudged"]
        for i in (0, 1):
            assert request(server, f"/api/values?i={i}&name={name}", cookie=cookie).json() == reference.values(i, name)
        assert request(server, f"/api/valuediff?name={name}", cookie=cookie).json() == reference.value_diff(name)
        odd = "a name/with ?&=#%+ and spaces"  # query-escaped like URLSearchParams does
        from urllib.parse import quote

        r = request(server, "/api/values?i=0&name=" + quote(odd, safe=""), cookie=cookie)
        assert r.status == 404 and odd in r.json()["error"]


def test_the_host_header_must_name_this_server(served: ViewServer) -> None:
    cookie = login(served)
    port = served.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert request(served, "/api/checkpoint", cookie=cookie, host=host).status == 200, host
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", f"127.0.0.2:{port}",
                 f"localhost.evil.example:{port}", ""):
        r = request(served, "/api/checkpoint", cookie=cookie, host=host)
        assert r.status == 403, host
        assert b"parameter_count" not in r.body
    # The token does not help a rebinding page either.
    assert request(served, served.url.split(f":{port}", 1)[1], host=f"evil.example:{port}").status == 403


def test_security_headers_on_every_reply(served: ViewServer) -> None:
    cookie = login(served)
    replies = [request(served, p, cookie=cookie) for p in PAGES]
    replies += [request(served, "/api/checkpoint"), request(served, "/nope", cookie=cookie),
                request(served, "/api/checkpoint", cookie=cookie, host="evil.example")]
    for r in replies:
        assert r.headers["Content-Security-Policy"] == CSP
        assert CSP.startswith("default-src 'self'; img-src 'self' data:")
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Referrer-Policy"] == "no-referrer"
    types = {p: r.headers["Content-Type"] for p, r in zip(PAGES, replies)}
    assert types["/"].startswith("text/html") and types["/static/app.js"].startswith("text/javascript")
    assert types["/api/checkpoint"].startswith("application/json")


def test_read_only(served: ViewServer) -> None:
    cookie = login(served)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert request(served, "/api/checkpoint", cookie=cookie, method=method).status == 405
        assert request(served, "/api/checkpoint", method=method).status in (403, 405)


@contextlib.contextmanager
def opens() -> Iterator[list[str]]:
    """Every file the process opens while the block runs (an audit hook: it sees open(), os.open,
    mmap-backing opens, importlib.resources reads), from every thread."""
    seen: list[str] = []
    active = threading.Event()
    active.set()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if active.is_set() and event in ("open", "os.open") and args and isinstance(args[0], (str, bytes)):
            seen.append(str(args[0]))

    _install_audit_hook()
    _HOOKS.append(hook)
    try:
        yield seen
    finally:
        active.clear()
        _HOOKS.remove(hook)


_HOOKS: list[Any] = []
_INSTALLED: list[bool] = []


def _install_audit_hook() -> None:
    # Audit hooks cannot be removed: one dispatcher, installed once, calls the active recorders.
    if not _INSTALLED:
        def dispatch(event: str, args: tuple[Any, ...]) -> None:
            for h in tuple(_HOOKS):  # a copy: a recorder may be removed meanwhile
                h(event, args)

        sys.addaudithook(dispatch)
        _INSTALLED.append(True)

TRAVERSALS = [
    "/static/../server.py", "/static/..%2fserver.py", "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/../../../../etc/passwd", "/static//etc/passwd", "/static/app.js/../../data.py", "/../../etc/passwd",
    "/%2e%2e/%2e%2e/etc/passwd", "/static/", "/static/.", "/static/app.js%00.png", "/etc/passwd",
    "//etc/passwd", "/file:///etc/passwd", "/api/../static/app.js", "/api/values/../../etc/passwd",
    "/api/values?i=0&name=../../../../etc/passwd", "/api/values?i=0&name=/etc/passwd",
    "/api/values?i=0&name=file:///etc/passwd", "/api/values?i=0&name=http://127.0.0.1:9/x.safetensors",
    "/api/values?i=../0&name=" + QUERY, "/api/values?i=/etc/passwd&name=" + QUERY, "/api/values?i=-1&name=" + QUERY,
    "/api/values?i=1&name=" + QUERY, "/api/values?i=%EF%BC%90&name=" + QUERY, "/api/values?i=0",
    "/api/values?i=99999999999999999999999999&name=" + QUERY, "/api/valuediff?name=" + QUERY,
    "/api/checkpoint/../../etc/passwd", "/api/open?path=/etc/passwd", "/api/values?i=0&name=%00",
]


def test_path_traversal_is_4xx_and_opens_nothing(served: ViewServer, tmp_path: Path) -> None:
    cookie = login(served)
    with opens() as control:  # the recorder sees the server's own reads
        assert request(served, "/static/app.js", cookie=cookie).status == 200
    assert any(p.endswith("app.js") for p in control), control
    with opens() as seen:
        for path in TRAVERSALS:
            r = request(served, path, cookie=cookie)
            assert 400 <= r.status < 500, (path, r.status, r.body[:200])
            assert b"root:" not in r.body and b"import " not in r.body
    assert seen == [], seen


def test_over_http_traversal_reads_no_byte(minilm: Path) -> None:
    with RangeServer({"model.safetensors": minilm.read_bytes(), "other.safetensors": b"x" * 100}) as origin:
        session = ViewSession.open([origin.url("model.safetensors")])
        with serving(session) as server:
            cookie = login(server)
            origin.reset_log()
            assert request(server, "/", cookie=cookie).status == 200
            assert request(server, "/api/checkpoint", cookie=cookie).status == 200
            assert origin.log.requests == 0  # opening the page reads no tensor byte
            for path in TRAVERSALS + ["/api/values?i=0&name=" + origin.url("other.safetensors"),
                                      "/api/values?i=0&name=../other.safetensors"]:
                assert 400 <= request(server, path, cookie=cookie).status < 500, path
            assert origin.log.requests == 0
            r = request(server, f"/api/values?i=0&name={QUERY}", cookie=cookie)
            assert r.status == 200
            assert origin.log.bytes_sent == session.inputs[0].info(QUERY).nbytes
            assert all(p.endswith("/model.safetensors") for _, p, _ in origin.requests_seen)


def test_a_tensor_whose_read_fails_is_an_error_reply_and_the_server_goes_on(minilm: Path) -> None:
    with RangeServer({"model.safetensors": minilm.read_bytes()}) as origin, \
            serving(ViewSession.open([origin.url("model.safetensors")])) as server:
        cookie = login(server)
        origin.fail_status = 404  # the file vanished: not retried
        origin.fail_first = 1_000
        r = request(server, f"/api/values?i=0&name={QUERY}", cookie=cookie)
        assert r.status == 422, r.body
        message = r.json()["error"]
        assert QUERY in message and "No such file" in message
        origin.fail_first = 0
        r = request(server, f"/api/values?i=0&name={QUERY}", cookie=cookie)
        assert r.status == 200 and r.json()["stats"]["elements"] == 384 * 384


def test_unknown_tensor_and_endpoint_are_404(served: ViewServer) -> None:
    cookie = login(served)
    r = request(served, "/api/values?i=0&name=no.such", cookie=cookie)
    assert r.status == 404 and "no.such" in r.json()["error"]
    assert request(served, "/api/nothing", cookie=cookie).status == 404
    assert request(served, "/favicon.ico", cookie=cookie).status == 404


def test_two_viewers_keep_their_own_cookies(minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as one, serving(ViewSession.open([str(minilm)])) as two:
        assert one.cookie != two.cookie and one.token != two.token
        both = "; ".join([login(one), login(two)])  # a browser sends every 127.0.0.1 cookie to each port
        assert request(one, "/api/checkpoint", cookie=both).status == 200
        assert request(two, "/api/checkpoint", cookie=both).status == 200


def test_value_diff_endpoint(edited_pair: tuple[Path, Path, dict[str, str]]) -> None:
    a, b, changed = edited_pair
    with serving(ViewSession.open([str(a), str(b)])) as server:
        cookie = login(server)
        r = request(server, "/api/valuediff?name=" + changed["nudged"], cookie=cookie)
        assert r.status == 200 and r.json()["diff"]["differing"] == 8
        assert request(server, "/api/values?i=1&name=" + changed["added"], cookie=cookie).status == 200
        assert request(server, "/api/valuediff?name=" + changed["added"], cookie=cookie).status == 404
