"""A tiny threaded HTTP server on 127.0.0.1 that serves in-memory files with Range support.

It counts requests and body bytes per path, can ignore Range, fail transiently, require a
token or other headers, trickle bodies, compress them, and speak TLS (with a self-signed
certificate made by :func:`self_signed_cert`), optionally plain HTTP on the same port too.
Used as a context manager it stops itself; threads are daemons either way.
"""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import posixpath
import re
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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
    ``token`` (require ``Authorization: Bearer <token>``), ``redirects`` (path -> URL, 302),
    ``required_headers`` (answer 401 unless each is sent with exactly that value),
    ``trickle`` (send bodies one byte per that many seconds; ``trickle_headers``: the
    status line and headers), ``content_encoding="gzip"``
    (compress every body and say so), ``tls`` ((certfile, keyfile): serve https) and
    ``plain_too`` (with ``tls``: also answer plain http on the same port).
    Setting ``overlong`` makes every range reply run to the end of the file.
    ``requests_seen`` records (scheme, path, headers) of every request.  ``latency`` (seconds)
    delays every reply, as a distant server would; ``max_in_flight`` is the most requests
    that were being answered at once (``paths_in_flight``: the most distinct paths).
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
        required_headers: dict[str, str] | None = None,
        trickle: float = 0.0,
        trickle_headers: float = 0.0,
        content_encoding: str | None = None,
        tls: tuple[str, str] | None = None,
        plain_too: bool = False,
        latency: float = 0.0,
    ) -> None:
        self.files = dict(files)
        self.latency = latency
        self.in_flight: list[str] = []  # paths of the requests being answered now
        self.max_in_flight = 0
        self.paths_in_flight = 0
        self.required_headers = dict(required_headers or {})
        self.trickle = trickle
        self.trickle_headers = trickle_headers
        self.overlong = False  # answer every range up to the end of the file
        self.content_encoding = content_encoding
        self.tls = tls is not None
        self.requests_seen: list[tuple[str, str, dict[str, str]]] = []
        self.proxied: list[str] = []  # absolute-form request targets (the server used as a proxy)
        self.closing = threading.Event()
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
                path = self.path
                with server.lock:
                    server.in_flight.append(path)
                    server.max_in_flight = max(server.max_in_flight, len(server.in_flight))
                    server.paths_in_flight = max(server.paths_in_flight, len(set(server.in_flight)))
                try:
                    if server.latency:
                        server.closing.wait(server.latency)
                    server.serve(self, head)
                finally:
                    with server.lock:
                        server.in_flight.remove(path)

        context = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
        self.httpd = _Server(("127.0.0.1", 0), Handler, context, plain_too)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str, scheme: str | None = None) -> str:
        scheme = scheme or ("https" if self.tls else "http")
        return f"{scheme}://127.0.0.1:{self.port}/{path.lstrip('/')}"

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
        target = h.path
        if target.startswith(("http://", "https://")):  # absolute form: sent to us as a proxy
            with self.lock:
                self.proxied.append(target)
            target = urllib.parse.urlsplit(target).path
        # Decoded and normalised as a file server resolves it: "a/%2e%2e%2fb" is "b".
        path = posixpath.normpath(urllib.parse.unquote(target.split("?", 1)[0])).lstrip("/")
        with self.lock:
            self.auth_seen.append(h.headers.get("Authorization"))
            self.connections.add(h.client_address[:2])
            scheme = "https" if isinstance(h.connection, ssl.SSLSocket) else "http"
            self.requests_seen.append((scheme, h.path, dict(h.headers.items())))
        if self.require_query is not None and h.path.partition("?")[2] != self.require_query:
            return self.reply(h, 403, b"signature expired")
        if path in self.redirects:
            return self.reply(h, 302, b"", extra={"Location": self.redirects[path]})
        if self.token is not None and h.headers.get("Authorization") != f"Bearer {self.token}":
            return self.reply(h, 401, b"unauthorized")
        if any(h.headers.get(k) != v for k, v in self.required_headers.items()):
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
            end = min(int(m.group(2)), size - 1) if m.group(2) and not self.overlong else size - 1
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
        if self.content_encoding == "gzip" and status < 300:
            body = gzip.compress(body)
            extra = {**(extra or {}), "Content-Encoding": "gzip"}
        h.send_response(status)
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "none" if self.ignore_range else "bytes")
        if self.trickle_headers:  # the status line and headers, one byte at a time
            head = b"".join(h._headers_buffer) + b"\r\n"  # type: ignore[attr-defined]
            h._headers_buffer = []  # type: ignore[attr-defined]
            try:
                for i in range(len(head)):
                    if self.closing.is_set():
                        return
                    h.wfile.write(head[i : i + 1])
                    time.sleep(self.trickle_headers)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                return
        else:
            h.end_headers()
        if not head:
            with self.lock:  # counted before sending: the client may look at the log the moment it has the body
                self.log.bytes_sent += len(body)
            try:
                if self.trickle and status < 300:
                    for i in range(len(body)):
                        if self.closing.is_set():
                            break
                        h.wfile.write(body[i : i + 1])
                        time.sleep(self.trickle)
                    h.close_connection = True
                else:
                    h.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                pass  # the client hung up (it saw a 200 it did not want, or gave up on a slow body)

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> RangeServer:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that speaks TLS when given a context (and plain HTTP too if asked).

    The handshake happens in the request's thread, so a client that never completes it holds
    nobody else up.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, context: ssl.SSLContext | None, plain_too: bool) -> None:
        self.context = context
        self.plain_too = plain_too
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)  # a client hanging up is no server error

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.context is None:
            super().finish_request(request, client_address)
            return
        try:
            request.settimeout(5)
            if self.plain_too and request.recv(1, socket.MSG_PEEK) != b"\x16":  # not a TLS ClientHello
                request.settimeout(None)
                super().finish_request(request, client_address)
                return
            wrapped = self.context.wrap_socket(request, server_side=True)
            wrapped.settimeout(None)
        except OSError:  # the client gave up on the handshake (e.g. it does not trust the certificate)
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            self.shutdown_request(wrapped)


def self_signed_cert(directory: str | Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and localhost, and its key: (certfile, keyfile) in ``directory``.

    The certificate is its own CA, so a client trusts it with ``verify=<certfile>``.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pysafetensors test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=False, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    directory = Path(directory)
    certfile, keyfile = directory / "cert.pem", directory / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(certfile), str(keyfile)
