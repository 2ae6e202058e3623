"""moto's S3 server on 127.0.0.1 for the tests that write to ``s3://``, and a proxy in front of
it that refuses chosen requests (a part of a multipart upload, the completion).

Both bind 127.0.0.1 on a free port and stop on ``close()`` (or leaving ``with``); their threads
are daemons either way.  :meth:`MotoS3.client` is a plain boto3 client, independent of s3fs and
its caches, for checking what the bucket really holds.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fsspec

#: S3's smallest part: tests shrink the writer's parts to it, so a few MiB make a multipart upload.
MIN_PART = 5 << 20

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoS3:
    """moto's S3 (``moto.server.ThreadedMotoServer``) on 127.0.0.1, in this process."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def options(self, endpoint: str | None = None) -> dict[str, Any]:
        """s3fs storage options for this server (or for ``endpoint``, a proxy in front of it)."""
        return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint or self.endpoint}}

    def environment(self) -> dict[str, str]:
        """Environment variables that point a subprocess's s3fs/botocore at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def new_bucket(self) -> str:
        """A new, empty bucket (moto's state is per process, shared by every server in it)."""
        name = f"pst-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object key in ``bucket`` under ``prefix`` (recursively)."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def get(self, bucket: str, key: str) -> bytes:
        return bytes(self.client().get_object(Bucket=bucket, Key=key)["Body"].read())

    def uploads(self, bucket: str) -> list[dict[str, Any]]:
        """Multipart uploads begun and neither completed nor aborted."""
        return list(self.client().list_multipart_uploads(Bucket=bucket).get("Uploads", []))

    def parts(self, bucket: str, upload: dict[str, Any]) -> list[dict[str, Any]]:
        reply = self.client().list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
        return list(reply.get("Parts", []))

    def close(self) -> None:
        self.server.stop()

    def __enter__(self) -> MotoS3:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_REFUSAL = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
    b"<Message>refused by the test proxy</Message><RequestId>pst</RequestId></Error>"
)


def query(path: str) -> dict[str, str]:
    """The query parameters of a request path (``?uploadId=...&partNumber=2``)."""
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(path).query, keep_blank_values=True).items()}


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # a client hanging up (a cancelled part) is no error


class RefusingProxy:
    """Forwards every request to ``upstream`` (host:port) unchanged, except those for which
    ``refuse(method, path_and_query)`` is true: those get a 403 AccessDenied S3 error (their
    body is read and dropped, never forwarded).  ``refused`` lists what was refused, ``seen``
    every request (``"METHOD /path?query"``) in the order they arrived."""

    def __init__(self, upstream: str, refuse: Callable[[str, str], bool], head_length: str | None = None) -> None:
        self.upstream = upstream
        self.head_length = head_length  # when set: every HEAD reply claims this size (a store gone wrong)
        self.refuse = refuse
        self.refused: list[str] = []
        self.seen: list[str] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                body = self._body()
                with proxy.lock:
                    proxy.seen.append(f"{self.command} {self.path}")
                if proxy.refuse(self.command, self.path):
                    with proxy.lock:
                        proxy.refused.append(f"{self.command} {self.path}")
                    self.send_response(403)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(_REFUSAL)))
                    self.end_headers()
                    self.wfile.write(_REFUSAL)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "expect")}
                headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    reply = conn.getresponse()
                    data = reply.read()
                    self.send_response(reply.status)
                    for k, v in reply.getheaders():
                        if k.lower() not in ("transfer-encoding", "content-length", "connection", "date", "server"):
                            self.send_header(k, v)
                    # A HEAD reply's Content-Length is the object's size, not this empty body's.
                    length = (proxy.head_length or reply.getheader("Content-Length")) if self.command == "HEAD" else None
                    self.send_header("Content-Length", length or str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> RefusingProxy:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Store:
    """One place to write to (a fresh bucket on ``s3`` or a memory:// directory) and to look into."""

    def __init__(self, kind: str, s3: MotoS3 | None) -> None:
        self.kind = kind
        self.s3 = s3
        if kind == "s3":
            assert s3 is not None
            self.bucket = s3.new_bucket()
            self.root = f"s3://{self.bucket}"
            self.options: dict[str, Any] | None = s3.options()
        else:
            self.bucket = f"pst-{uuid.uuid4().hex[:12]}"
            self.root = f"memory://{self.bucket}"
            self.options = None

    @classmethod
    def for_param(cls, request: Any) -> Iterator[Store]:
        """The body of a ``store`` fixture parametrized over ``["s3", "memory"]``: the S3 store takes the
        ``s3`` fixture of the test's module; the store is emptied after the test."""
        s3 = request.getfixturevalue("s3") if request.param == "s3" else None
        store = cls(request.param, s3)
        yield store
        store.cleanup()

    def url(self, key: str) -> str:
        return f"{self.root}/{key}"

    def listing(self, prefix: str = "") -> list[str]:
        """Every file under the store's root (recursively), as keys relative to it."""
        if self.s3 is not None:
            return self.s3.keys(self.bucket, prefix)
        fs = fsspec.filesystem("memory")
        found = fs.find(f"/{self.bucket}/{prefix}") if fs.exists(f"/{self.bucket}") else []
        return sorted(str(p).split(f"/{self.bucket}/", 1)[1] for p in found)

    def get(self, key: str) -> bytes:
        if self.s3 is not None:
            return self.s3.get(self.bucket, key)
        return bytes(fsspec.filesystem("memory").cat_file(f"/{self.bucket}/{key}"))

    def pending(self) -> list[dict[str, Any]]:
        return self.s3.uploads(self.bucket) if self.s3 is not None else []

    def cleanup(self) -> None:
        if self.kind == "memory":
            fs = fsspec.filesystem("memory")
            if fs.exists(f"/{self.bucket}"):
                fs.rm(f"/{self.bucket}", recursive=True)
