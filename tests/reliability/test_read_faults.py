"""I/O faults in the middle of a read, for every kind of source and every way of reading.

The sources fail as real ones do: a file truncated by another process (pread, a file object,
an mmap'd file), a file object whose reads fail with EIO or dribble out and stop short, an
HTTP server that drops the connection halfway through every body (after the client's retries),
an fsspec filesystem whose reads fail with EIO or come back short, and a ByteSource wrapper
that fills part of the buffer and raises a bare ``OSError(EIO)``.  Each fault starts after the
header was read, inside tensor ``b_mid``.  During ``get_tensor``, ``get_slice``, ``load_file``,
the staged loader (CPU destination) and the CLI's ``stats``, the caller must get a SourceError
naming the source, the tensor and the offset; nothing half-read is returned; the handle still
reads the other tensors; no thread or file descriptor is left behind.

The mmap case runs in a child process: should the check before touching the map ever miss,
the SIGBUS kills the child, not the test run.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import run_python

import pysafetensors.numpy as ps_numpy
from pysafetensors import reader, safe_open
from pysafetensors.errors import RemoteError, SourceError
from pysafetensors.io import registry
from pysafetensors.io.remote import PREFETCH
from pysafetensors.io.sources import PreadSource

torch = pytest.importorskip("torch")
fsspec = pytest.importorskip("fsspec")

from _fault_sources import WRAPPER_STATE, DroppingServer, FaultyFile, FaultyMemoryFS, FaultySource

from pysafetensors.staging import StagingConfig, load_to_device

ARRAYS = {
    "a_head": np.arange(1024, dtype=np.float32),  # data bytes [0, 4096)
    "b_mid": np.arange(131_072, dtype=np.float32),  # [4096, 528384): the fault lands in here
    "c_tail": np.arange(1024, dtype=np.float32) * 2,
}
BLOB = ps_numpy.save(ARRAYS)
DATA_START = len(BLOB) - sum(a.nbytes for a in ARRAYS.values())
CUT = DATA_START + 4096 + 200_000  # the first byte that cannot be read
assert CUT > PREFETCH  # remote sources fetched everything before it with the header
SMALL_RING = StagingConfig(buffers=2, buffer_bytes=64 << 10)  # one chunk of the ring holds the cut


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _leaked(baseline: tuple[int, int], timeout: float = 10.0) -> tuple[int, int]:
    """How many (descriptors, threads) are open above ``baseline`` once they settle, or at the
    deadline (a server thread finishing a dropped connection takes a moment).  Fewer than the
    baseline is no leak: a thread an earlier test left running may end meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        now = (max(0, _fds() - baseline[0]), max(0, threading.active_count() - baseline[1]))
        if now == (0, 0) or time.monotonic() > deadline:
            return now
        time.sleep(0.02)


def _truncate_from_another_process(path: Path, size: int) -> None:
    subprocess.run([sys.executable, "-c", "import os, sys; os.truncate(sys.argv[1], int(sys.argv[2]))", str(path), str(size)],
                   check=True, timeout=60)


# --- scenarios: one per kind of source ---------------------------------------------------------


@dataclass
class Scenario:
    """How to read the test file through one kind of source, and how to break and mend it."""

    name: str  # the source's name, as messages must show it
    target: Callable[[], Any]  # a fresh object for safe_open / load_file / load_to_device
    fault: Callable[[], None]
    heal: Callable[[], None]
    stats_target: str | None  # what the CLI's stats is given (None: no path or URL reaches it)
    exact: bool = True  # the source says where reading stopped (a bare OSError does not)
    options: dict[str, Any] = field(default_factory=dict)  # safe_open's storage_options
    closers: list[Callable[[], None]] = field(default_factory=list)  # close what the caller owns


def _on_nfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Put tmp_path on NFS for every loader (PYSAFETENSORS_MOUNTINFO): the CLI then reads with pread."""
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        f"30 22 0:40 / {os.path.realpath(tmp_path)} rw - nfs4 server:/export rw\n"
    )
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", str(table))


KINDS = ["pread", "fileobj_truncated", "fileobj_eio", "fileobj_short", "wrapper_eio", "http", "fsspec_eio",
         "fsspec_short"]


@pytest.fixture
def scenario(request: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scenario]:
    kind = request.param
    path = tmp_path / "m.safetensors"
    path.write_bytes(BLOB)
    heal_file = lambda: path.write_bytes(BLOB)
    truncate = lambda: _truncate_from_another_process(path, CUT)
    if kind == "pread":
        _on_nfs(tmp_path, monkeypatch)  # the default backend is then pread, for the CLI too
        yield Scenario(str(path), lambda: path, truncate, heal_file, str(path))
    elif kind == "fileobj_truncated":
        _on_nfs(tmp_path, monkeypatch)  # file objects on NFS are read through the object
        files: list[Any] = []

        def fresh() -> Any:
            f = open(path, "rb")  # noqa: SIM115 - closed with the scenario
            files.append(f)
            return f

        s = Scenario(str(path), fresh, truncate, heal_file, None)
        s.closers.append(lambda: [f.close() for f in files])
        yield s
    elif kind in ("fileobj_eio", "fileobj_short"):
        state: dict[str, Any] = {}
        yield Scenario("<file object>", lambda: FaultyFile(BLOB, state, kind.split("_")[1]),
                       lambda: state.update(at=CUT), lambda: state.pop("at", None), None)
    elif kind == "wrapper_eio":
        WRAPPER_STATE.clear()
        monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
        registry.register_scheme("faulty", "_fault_sources:FaultyURLSource")
        yield Scenario(str(path), lambda: FaultySource(PreadSource(path), WRAPPER_STATE),
                       lambda: WRAPPER_STATE.update(at=CUT), WRAPPER_STATE.clear, f"faulty://{path}", exact=False)
        WRAPPER_STATE.clear()
    elif kind == "http":
        server = DroppingServer({"m.safetensors": BLOB})
        url = server.url("m.safetensors")

        def drop() -> None:
            server.drop_from = PREFETCH  # everything not fetched with the header

        def mend() -> None:
            server.drop_from = None

        yield Scenario(url, lambda: url, drop, mend, url, exact=False, options={"retries": 1, "backoff": 0})
        server.close()
    else:  # fsspec
        fsspec.register_implementation("faultymem", FaultyMemoryFS, clobber=True)
        fs = fsspec.filesystem("faultymem")
        url = f"faultymem://pst-faults-{uuid.uuid4().hex}/m.safetensors"
        key = fs._strip_protocol(url)
        fs.pipe(key, BLOB)
        if kind == "fsspec_eio":
            fault = lambda: FaultyMemoryFS.fail.update({key: CUT})
        else:
            fault = lambda: fs.pipe(key, BLOB[:CUT])
        heal = lambda: (FaultyMemoryFS.fail.pop(key, None), fs.pipe(key, BLOB))
        # FsspecSource's errors give the failed request's first byte as the offset, not the byte
        # where the data stopped: checked as a range.
        yield Scenario(url, lambda: url, fault, heal, url, exact=False)
        heal()
        fs.rm(key)


@contextlib.contextmanager
def _fault_after_the_header(s: Scenario, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Break the source right after the next file's header has been read (mid-load)."""
    real = reader.read_header

    def then_fault(source: Any) -> Any:
        header = real(source)
        s.fault()
        return header

    with monkeypatch.context() as m:
        m.setattr(reader, "read_header", then_fault)
        yield
    s.heal()


SLICE_AT = DATA_START + 4096 + 240_000  # where get_slice("b_mid")[60_000:70_000] starts reading


def _check(e: SourceError, s: Scenario, tensor: str = "b_mid", at: int = CUT) -> None:
    """``e`` names the source, the tensor and the offset: where reading stopped (``at``) when the
    source says so, else within the request that failed."""
    text = str(e)
    assert isinstance(e, SourceError), type(e)
    assert s.name in text, text
    assert "offset" in text and isinstance(e.offset, int), text
    assert f"'{tensor}'" in text and e.tensor == tensor, text
    if s.exact:
        assert e.offset == at and f"offset {at}" in text, text
    else:
        assert DATA_START <= e.offset <= at, text


@pytest.mark.parametrize("scenario", KINDS, indirect=True)
@pytest.mark.slow
def test_a_fault_mid_read(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    s = scenario
    baseline = (_fds(), threading.active_count())
    # get_tensor and get_slice on an open handle; the handle keeps working for other tensors.
    with safe_open(s.target(), "np", storage_options=s.options or None) as f:
        s.fault()
        with pytest.raises(SourceError) as e:
            f.get_tensor("b_mid")
        _check(e.value, s)
        with pytest.raises(SourceError) as e:
            f.get_slice("b_mid")[60_000:70_000]  # bytes 240,000-280,000 of the tensor: past the cut
        _check(e.value, s, at=SLICE_AT)
        np.testing.assert_array_equal(f.get_tensor("a_head"), ARRAYS["a_head"])
        np.testing.assert_array_equal(f.get_slice("b_mid")[:1000], ARRAYS["b_mid"][:1000])
        s.heal()
        np.testing.assert_array_equal(f.get_tensor("b_mid"), ARRAYS["b_mid"])  # mended: read in full
    # load_file, and the staged loader, broken right after the header was read.
    with _fault_after_the_header(s, monkeypatch), pytest.raises(SourceError) as e:
        ps_numpy.load_file(s.target())
    _check(e.value, s)
    with _fault_after_the_header(s, monkeypatch), pytest.raises(SourceError) as e:
        load_to_device(s.target(), "cpu", config=SMALL_RING)
    _check(e.value, s)
    # The CLI's stats: one line naming the source, the tensor and the offset; exit 2.
    if s.stats_target is not None:
        from pysafetensors.cli.main import main

        err = io.StringIO()
        with _fault_after_the_header(s, monkeypatch), contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(io.StringIO()):
            code = main(["stats", s.stats_target])
        line = err.getvalue().strip()
        assert code == 2 and len(line.splitlines()) == 1, line
        assert s.stats_target in line and "'b_mid'" in line and "offset" in line, line
    for close in s.closers:
        close()
    assert _leaked(baseline) == (0, 0)


def test_http_failures_stay_remote_errors(tmp_path: Path) -> None:
    """The reader adds the tensor and offset to a remote failure without changing its class."""
    with DroppingServer({"m.safetensors": BLOB}) as server:
        url = server.url("m.safetensors")
        with safe_open(url, "np", storage_options={"retries": 2, "backoff": 0}) as f:
            server.drop_from = PREFETCH
            before = server.log.requests
            with pytest.raises(RemoteError) as e:
                f.get_tensor("b_mid")
            assert server.log.requests - before == 3  # the first try and two retries
            assert e.value.tensor == "b_mid" and url in str(e.value)


# --- mmap: truncated by another process, in a child process ----------------------------------

MMAP_CHILD = r"""
import contextlib, io, json, os, subprocess, sys, threading
import numpy as np
from pysafetensors import reader, safe_open
from pysafetensors.errors import SourceError
from pysafetensors.numpy import load_file
from pysafetensors.staging import StagingConfig, load_to_device
from pysafetensors.cli.main import main

path, cut, blob_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
blob = open(blob_path, "rb").read()
truncate = [sys.executable, "-c", "import os, sys; os.truncate(sys.argv[1], int(sys.argv[2]))", path, str(cut)]

def heal():
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(blob)

def fds():
    return len(os.listdir("/proc/self/fd"))

def outcome(fn):
    try:
        fn()
        return None
    except Exception as e:
        return [type(e).__name__, isinstance(e, SourceError), str(e), getattr(e, "tensor", None), getattr(e, "offset", None)]

@contextlib.contextmanager
def truncated_after_the_header():
    real = reader.read_header
    def then_truncate(source):
        header = real(source)
        subprocess.run(truncate, check=True)
        return header
    reader.read_header = then_truncate
    try:
        yield
    finally:
        reader.read_header = real
        heal()

load_file(path)  # imports and first-use allocations before the baseline
baseline = [fds(), threading.active_count()]
out = {}
f = safe_open(path, "np")
out["source"] = type(f._file.source).__name__
subprocess.run(truncate, check=True)
out["get_tensor"] = outcome(lambda: f.get_tensor("b_mid"))
out["get_slice"] = outcome(lambda: f.get_slice("b_mid")[60000:70000])
out["head_after"] = float(f.get_tensor("a_head").sum())
out["slice_before_cut"] = float(f.get_slice("b_mid")[:1000].sum())
f.close()
heal()
with truncated_after_the_header():
    out["load_file"] = outcome(lambda: load_file(path))
with truncated_after_the_header():
    out["staging"] = outcome(lambda: load_to_device(path, "cpu", config=StagingConfig(2, 65536)))
err = io.StringIO()
with truncated_after_the_header(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    out["stats"] = [main(["stats", path]), err.getvalue()]
out["counts"] = [baseline, [fds(), threading.active_count()]]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_mmap_truncated_by_another_process_mid_read(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(BLOB)
    blob_path = tmp_path / "blob.bin"
    blob_path.write_bytes(BLOB)
    proc = run_python(MMAP_CHILD, str(path), str(CUT), str(blob_path), timeout=180)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-4000:])  # -7 would be SIGBUS
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["source"] == "MmapSource"
    for op in ("get_tensor", "get_slice", "load_file", "staging"):
        _, is_source_error, text, tensor, offset = out[op]
        at = SLICE_AT if op == "get_slice" else CUT
        assert is_source_error and tensor == "b_mid" and offset == at, (op, out[op])
        assert str(path) in text and "'b_mid'" in text and f"offset {at}" in text, (op, text)
    assert out["head_after"] == float(ARRAYS["a_head"].sum())
    assert out["slice_before_cut"] == float(ARRAYS["b_mid"][:1000].sum())
    code, err = out["stats"]
    assert code == 2 and str(path) in err and "'b_mid'" in err and "offset" in err, err
    baseline, after = out["counts"]
    assert after == baseline


def test_bulk_reads_in_threads_name_the_tensor_that_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parallel read of the whole data region: the failing chunk's thread error names its tensor,
    and every worker thread is gone afterwards."""
    monkeypatch.setattr(reader, "_READ_CHUNK", 16 << 10)
    path = tmp_path / "m.safetensors"
    path.write_bytes(BLOB)
    baseline = (_fds(), threading.active_count())
    with safe_open(path, "np", backend="pread") as f:
        _truncate_from_another_process(path, CUT)
        with pytest.raises(SourceError) as e:
            f.get_tensors(threads=4)
        assert e.value.tensor == "b_mid" and e.value.offset == CUT
        np.testing.assert_array_equal(f.get_tensor("a_head"), ARRAYS["a_head"])
    assert _leaked(baseline) == (0, 0)


def test_the_fault_wrapper_really_fails_and_really_heals(tmp_path: Path) -> None:
    """The injected faults are faults: without them every path reads the file exactly."""
    path = tmp_path / "m.safetensors"
    path.write_bytes(BLOB)
    state: dict[str, Any] = {}
    src = FaultySource(PreadSource(path), state)
    buf = bytearray(10)
    state["at"] = 5
    with pytest.raises(OSError) as e:
        src.read_into(0, memoryview(buf))
    assert e.value.errno == errno.EIO and bytes(buf[:5]) == BLOB[:5] and bytes(buf[5:]) == bytes(5)
    state.clear()
    got = ps_numpy.load_file(FaultySource(PreadSource(path), state))
    for k, v in ARRAYS.items():
        np.testing.assert_array_equal(got[k], v)
    for mode in ("eio", "short"):
        assert ps_numpy.load_file(FaultyFile(BLOB, {}, mode))["c_tail"].tolist() == ARRAYS["c_tail"].tolist()
    src.close()
