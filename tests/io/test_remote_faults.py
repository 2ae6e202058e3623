"""Remote sources under failure: slow and dropping servers, compressed replies, odd URLs.

Each failure must come out as a SourceError subclass (RemoteError, RemoteTimeout) or
FileNotFoundError naming the redacted URL and, for reads, the offset; nothing may hang, and a
failed read leaves no thread or file descriptor behind.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from servers import RangeServer, self_signed_cert

from pysafetensors import safe_open
from pysafetensors.errors import HeaderError, RemoteError, RemoteTimeout, SourceError
from pysafetensors.io._http_client import RETRY_AFTER_CAP, HttpClient
from pysafetensors.io.remote import PREFETCH, HTTPSource
from pysafetensors.numpy import save


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settles(expected: tuple[int, int], measure: Callable[[], tuple[int, int]]) -> bool:
    """Whether the threads and open fds come back to at most ``expected`` (a leak keeps them
    above it; a server thread counted in ``expected`` may end meanwhile, so fewer is fine)."""
    # Server-side handler threads end when they see the client's close: give them a moment.
    deadline = time.monotonic() + 10
    while True:
        now = measure()
        if all(n <= e for n, e in zip(now, expected, strict=True)):
            return True
        if time.monotonic() >= deadline:
            print("threads and fds:", now, "expected at most", expected)
            return False
        time.sleep(0.05)


def _threads_and_fds() -> tuple[int, int]:
    return threading.active_count(), _fds()


# --- slow servers ----------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_trickling_header_reply_trips_the_rate_rule(blob: bytes) -> None:
    with RangeServer({"m.safetensors": blob}, trickle=0.2) as s:
        url = s.url("m.safetensors?sig=secret")
        with pytest.raises(RemoteTimeout) as e:
            safe_open(url, "np", storage_options={"timeout": 0.5, "min_rate": 100})
        err = e.value
        assert isinstance(err, RemoteError) and isinstance(err, TimeoutError)
        assert s.url("m.safetensors") in str(err) and "secret" not in str(err)
        assert f"bytes=0-{PREFETCH - 1}" in str(err) and "min_rate=100" in str(err)
        assert err.range == f"bytes=0-{PREFETCH - 1}" and err.offset == 0 and err.elapsed >= 0.5
        assert s.log.requests == 1  # a server too slow is not asked again


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("tls", "pace"),
    [(False, 0.05), (True, 0.05), (False, 0.005)],
    # ~200 header bytes: ~10 s, cut in the status line; ~1 s, the status line in time and the rest cut short
    ids=["http", "https", "status-line-in-time"],
)
def test_trickling_reply_headers_meet_one_deadline(
    blob: bytes, tls: bool, pace: float, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cert = self_signed_cert(tmp_path_factory.mktemp("tls")) if tls else None
    with RangeServer({"m.safetensors": blob}, trickle_headers=pace, tls=cert) as s:
        start = time.monotonic()
        with pytest.raises(RemoteTimeout, match=r"no complete reply \(status line and headers\) within timeout=0.5 s, retried 1 times") as e:
            HTTPSource(s.url("m.safetensors"), timeout=0.5, retries=1, backoff=0.01, verify=cert[0] if cert else True)
        assert time.monotonic() - start < 5  # two deadlines of 0.5 s, not the time the headers take
        assert s.url("m.safetensors") in str(e.value) and e.value.range == f"bytes=0-{PREFETCH - 1}"
        assert s.log.requests == 2  # a stalled reply is asked again, `retries` times


@pytest.mark.timeout(60)
def test_timeout_alone_is_a_hard_deadline_when_min_rate_is_zero(blob: bytes) -> None:
    with RangeServer({"m.safetensors": blob}, trickle=0.01) as s:  # 100 B/s: far from 100 kB in 0.5 s
        with pytest.raises(RemoteTimeout, match="past the timeout=0.5 s deadline") as e:
            HTTPSource(s.url("m.safetensors"), timeout=0.5, min_rate=0)
        assert e.value.elapsed >= 0.5


@pytest.mark.timeout(60)
def test_server_slowing_down_mid_tensor(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    opts = {"timeout": 0.5, "min_rate": 1000}
    with RangeServer({"m.safetensors": blob}) as s, safe_open(s.url("m.safetensors"), "np", storage_options=opts) as f:
        s.trickle = 0.1
        with pytest.raises(RemoteTimeout) as e:
            f.get_tensor("big")
        assert isinstance(e.value, SourceError)
        assert e.value.offset >= PREFETCH and f"bytes={e.value.offset}-" in str(e.value)
        s.trickle = 0
        np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])  # the handle still works


@pytest.mark.timeout(60)
def test_slow_but_steady_body_is_not_cut() -> None:
    small = save({"a": np.arange(40, dtype=np.int32)})  # a few hundred bytes at ~1 kB/s
    opts = {"timeout": 0.3, "min_rate": 50}
    with RangeServer({"s.safetensors": small}, trickle=0.001) as s, \
            safe_open(s.url("s.safetensors"), "np", storage_options=opts) as f:
        np.testing.assert_array_equal(f.get_tensor("a"), np.arange(40, dtype=np.int32))


# --- dropped connections, leaks ----------------------------------------------------------------


@pytest.mark.timeout(120)
def test_connection_dropped_mid_tensor_after_retries(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}) as s:
        baseline = _threads_and_fds()
        f = safe_open(s.url("m.safetensors?token=t"), "np", storage_options={"retries": 2, "backoff": 0.01})
        s.reset_log()
        s.fail_first, s.fail_status = 100, "reset"  # every reply breaks off half-way
        with pytest.raises(RemoteError) as e:
            f.get_tensor("big")
        err = e.value
        assert isinstance(err, SourceError) and not isinstance(err, RemoteTimeout)
        assert s.url("m.safetensors") in str(err) and "token=t" not in str(err)
        assert err.offset >= PREFETCH and f"offset {err.offset}" in str(err) and "after 3 attempts" in str(err)
        assert s.log.requests == 3  # the first try and 2 retries, each resuming where the last broke off
        s.fail_first = 0
        np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
        f.close()
        assert _settles(baseline, _threads_and_fds)


@pytest.mark.timeout(120)
def test_parallel_chunks_failing_leave_nothing_behind(blob: bytes) -> None:
    with RangeServer({"m.safetensors": blob}) as s:
        baseline = _threads_and_fds()
        src = HTTPSource(s.url("m.safetensors"), retries=0, chunk_size=16 * 1024, max_workers=2)
        s.reset_log()
        s.fail_first, s.fail_status = 1000, 500
        buf = bytearray(len(blob) - PREFETCH)
        with pytest.raises(RemoteError, match="HTTP 500") as e:
            src.read_into(PREFETCH, memoryview(buf))
        assert e.value.status == 500 and e.value.offset >= PREFETCH
        assert s.log.requests < len(buf) // (16 * 1024)  # the pieces not started yet were dropped
        src.close()
        assert _settles(baseline, _threads_and_fds)


def test_replies_longer_than_asked_are_cut_off(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}) as s, safe_open(s.url("m.safetensors"), "np") as f:
        s.overlong = True
        s.reset_log()
        for i in range(100, 500, 80):  # past the prefix; each reply runs on to the end of the file
            np.testing.assert_array_equal(f.get_slice("big")[i : i + 2], tensors["big"][i : i + 2])
        assert s.log.requests == 5
        assert len(s.connections) == 5  # each cut-off reply took its connection with it


def test_too_many_redirects(blob: bytes) -> None:
    with RangeServer({}) as s:
        s.redirects["loop.safetensors"] = s.url("loop.safetensors")
        with pytest.raises(RemoteError, match="too many redirects"):
            HTTPSource(s.url("loop.safetensors"))
        assert s.log.requests == 11


def test_retry_after_is_capped() -> None:
    client = HttpClient("http://127.0.0.1:9/x", {})
    assert client.policy.parse_retry_after("86400") == RETRY_AFTER_CAP
    assert client.policy.parse_retry_after("2") == 2
    client.close()


# --- compressed replies ---------------------------------------------------------------------


def test_gzip_whole_file_reply_is_refused_clearly(blob: bytes) -> None:
    with RangeServer({"m.safetensors": blob}, ignore_range=True, content_encoding="gzip") as s:
        for opts in ({"allow_full_download": True}, {}):
            with pytest.raises(RemoteError, match="Content-Encoding: gzip") as e:
                safe_open(s.url("m.safetensors"), "np", storage_options=opts)
            assert not isinstance(e.value, HeaderError)


def test_gzip_ranged_reply_is_refused(blob: bytes) -> None:
    with RangeServer({"m.safetensors": blob}, content_encoding="gzip") as s, \
            pytest.raises(RemoteError, match="compressed a ranged reply"):
        safe_open(s.url("m.safetensors"), "np")


# --- URLs nothing can serve ---------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_ftp_failure_is_a_remote_error_naming_the_url() -> None:
    pytest.importorskip("fsspec")
    port = _closed_port()
    with pytest.raises(RemoteError) as e:
        safe_open(f"ftp://user:hunter2@127.0.0.1:{port}/m.safetensors", "np")
    assert f"ftp://127.0.0.1:{port}/m.safetensors" in str(e.value) and "hunter2" not in str(e.value)
    assert "ConnectionRefusedError" in str(e.value)


def test_unknown_scheme_is_a_remote_error() -> None:
    pytest.importorskip("fsspec")
    with pytest.raises(RemoteError, match="unsupported URL scheme 'nosuchproto'"):
        safe_open("nosuchproto://host/m.safetensors", "np")


def test_zip_chains_give_clear_errors(blob: bytes) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-zipchain/not-a-zip.zip", b"hello" * 20)
    try:
        with pytest.raises(RemoteError, match=r"zip://m\.safetensors::memory://pst-zipchain/not-a-zip\.zip: .*zip"):
            safe_open("zip://m.safetensors::memory://pst-zipchain/not-a-zip.zip", "np")
        with pytest.raises(FileNotFoundError, match="No such file or directory: zip://m.safetensors::memory://"):
            safe_open("zip://m.safetensors::memory://pst-zipchain/missing.zip", "np")
        with pytest.raises((RemoteError, FileNotFoundError), match="zip://"):
            safe_open("zip://x::memory://", "np")
    finally:
        fs.rm("/pst-zipchain", recursive=True)


# --- fsspec failing mid-read ---------------------------------------------------------------


@pytest.fixture
def faulty_fs():
    fsspec = pytest.importorskip("fsspec")
    from fsspec.implementations.memory import MemoryFileSystem

    class FaultyMemoryFileSystem(MemoryFileSystem):
        """memory:// whose reads past ``limit`` fail with EIO (a dropped connection)."""

        protocol = "pstfaulty"
        limit = 1 << 62

        @classmethod
        def _strip_protocol(cls, path):
            return super()._strip_protocol(path.replace("pstfaulty://", "memory://", 1))

        def cat_file(self, path, start=None, end=None, **kwargs):
            if end is not None and end > self.limit:
                raise OSError(errno.EIO, "Input/output error", "pstfaulty://secret-path?sig=abc")
            return super().cat_file(path, start=start, end=end, **kwargs)

    fsspec.register_implementation("pstfaulty", FaultyMemoryFileSystem, clobber=True)
    fs = FaultyMemoryFileSystem()
    yield fs, FaultyMemoryFileSystem
    fs.rm("/pst-faulty", recursive=True)


def test_fsspec_failure_mid_read_names_url_and_offset(faulty_fs, blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    fs, cls = faulty_fs
    fs.pipe("/pst-faulty/m.safetensors", blob)
    with safe_open("pstfaulty://pst-faulty/m.safetensors", "np") as f:
        cls.limit = PREFETCH + 10
        with pytest.raises(RemoteError) as e:
            f.get_tensor("big")
        assert isinstance(e.value, SourceError) and e.value.offset >= PREFETCH
        assert "pstfaulty://pst-faulty/m.safetensors" in str(e.value) and f"offset {e.value.offset}" in str(e.value)
        assert "sig=abc" not in str(e.value)
        with pytest.raises(RemoteError) as e:  # many ranges at once: cat_ranges
            f.get_slice("big")[400:510, 0:2]
        assert e.value.offset >= PREFETCH
        cls.limit = 1 << 62
        np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
