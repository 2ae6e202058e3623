"""A save or metadata edit killed at any point leaves the old or the new file, never a torn
one; the next successful save removes the dead writer's temp files; a full disk is a clean
WriteError with the old file intact."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import ROOT, run_python

from pysafetensors import safe_open
from pysafetensors.io.sinks import AtomicFileSink, remove_stale_temps
from pysafetensors.numpy import save_file


def version(k: int) -> dict[str, np.ndarray]:
    """Two distinguishable versions of a ~1.5 MB file (big enough to be killed mid-write)."""
    return {f"w{i}": np.full((64, 1024), k * 100 + i, dtype=np.float32) for i in range(6)}


SAVER = r"""
import sys, numpy as np
from pysafetensors.numpy import load_file, save_file
path = sys.argv[1]
def version(k):
    return {f"w{i}": np.full((64, 1024), k * 100 + i, dtype=np.float32) for i in range(6)}
print("go", flush=True)
k = 0
while True:
    k ^= 1
    if k:
        save_file(version(1), path, metadata={"v": "1"})
    else:  # a metadata edit: read everything, write it back with new metadata
        tensors = load_file(path, backend="pread")
        save_file({n: np.full_like(t, int(n[1:])) for n, t in tensors.items()}, path, metadata={"v": "0"})
"""


def which_version(path: str) -> int:
    """0 or 1 when the file is exactly one of the two versions; fails otherwise."""
    with safe_open(path, framework="np", backend="pread") as f:
        v = int(f.metadata()["v"])
        for name in f.keys():  # noqa: SIM118 - safe_open is not a dict
            assert np.array_equal(f.get_tensor(name), version(v)[name]), f"torn tensor {name} in version {v}"
        assert sorted(f.keys()) == sorted(version(v))
    return v


def temps(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".tmp"))


def test_sigkill_during_saves_and_edits_never_tears_the_file(tmp_path: Any) -> None:
    path = os.fspath(tmp_path / "m.safetensors")
    save_file(version(0), path, metadata={"v": "0"})
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    rng = random.Random(1234)
    seen = set()
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, "-c", SAVER, path], stdout=subprocess.PIPE, env=env)
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"go"
        time.sleep(rng.uniform(0.0, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        seen.add(which_version(path))
    assert seen, "no kill landed"
    # The dead writers' temp files (if a kill landed mid-write) go away at the next save.
    save_file(version(1), path, metadata={"v": "1"})
    assert temps(os.fspath(tmp_path)) == []
    assert which_version(path) == 1


def test_stale_temp_cleanup_spares_live_writers(tmp_path: Any) -> None:
    path = os.fspath(tmp_path / "m.safetensors")
    save_file(version(0), path, metadata={"v": "0"})
    # A live writer in another process: it holds its sink open (mid-save) until told to go on.
    code = (
        "import sys; from pysafetensors.io.sinks import AtomicFileSink\n"
        "s = AtomicFileSink(sys.argv[1]); s.write([b'partial']); print(s.tmp_path, flush=True)\n"
        "sys.stdin.readline(); s.abort()\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    live = subprocess.Popen([sys.executable, "-c", code, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert live.stdout is not None and live.stdin is not None
        live_tmp = live.stdout.readline().strip()
        # A dead writer's temp file: same naming scheme, a PID that no longer exists.
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        mine = AtomicFileSink(path)  # our own live sink (same PID as the cleaner)
        base = os.path.basename(mine.tmp_path)
        tag = base[len(".m.safetensors.") :].split(".")[0]
        dead_tmp = os.path.join(os.fspath(tmp_path), f".m.safetensors.{tag}.{dead.pid}.0123456789ab.tmp")
        foreign_tmp = os.path.join(os.fspath(tmp_path), f".m.safetensors.ffffffff.{dead.pid}.0123456789ab.tmp")
        unrelated = os.path.join(os.fspath(tmp_path), f".other.safetensors.{tag}.{dead.pid}.0123456789ab.tmp")
        for p in (dead_tmp, foreign_tmp, unrelated):
            open(p, "wb").close()
        assert remove_stale_temps(path) == [dead_tmp]
        for p in (live_tmp, mine.tmp_path, foreign_tmp, unrelated):
            assert os.path.exists(p), f"{p} was removed"
        mine.abort()
        live.stdin.write("\n")
        live.stdin.flush()
        assert live.wait(timeout=30) == 0
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    assert not os.path.exists(live_tmp)


FULL_DISK = r"""
import resource, signal, sys, numpy as np
from pysafetensors.errors import WriteError
from pysafetensors.numpy import save_file
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG from write() instead of dying
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
try:
    save_file({"big": np.ones((1024, 1024), np.float32)}, sys.argv[1])
except WriteError as e:
    print("WriteError", e.errno, e)
    sys.exit(0)
print("no error")
sys.exit(1)
"""


def test_full_disk_gives_write_error_and_keeps_the_old_file(tmp_path: Any) -> None:
    path = os.fspath(tmp_path / "m.safetensors")
    save_file(version(0), path, metadata={"v": "0"})
    with open(path, "rb") as f:
        before = f.read()
    proc = run_python(FULL_DISK, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("WriteError 27"), proc.stdout  # EFBIG
    assert "File too large" in proc.stdout
    with open(path, "rb") as f:
        assert f.read() == before
    assert temps(os.fspath(tmp_path)) == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_new_file_mode_follows_umask_and_survives_cleanup(tmp_path: Any) -> None:
    """The temp-name change keeps the existing mode rules: a new file gets 0o666 & ~umask."""
    old = os.umask(0o027)
    try:
        path = os.fspath(tmp_path / "m.safetensors")
        save_file(version(0), path, metadata={"v": "0"})
    finally:
        os.umask(old)
    assert os.stat(path).st_mode & 0o777 == 0o640


def test_write_error_keeps_its_errno_through_pickle() -> None:
    """Found by the full-disk test: WriteError(errno=...) had errno None (OSError's slot)."""
    import errno
    import pickle

    from pysafetensors.errors import WriteError

    e = WriteError("writing x failed: [Errno 28] No space left on device", errno=errno.ENOSPC)
    assert e.errno == errno.ENOSPC and isinstance(e, OSError)
    again = pickle.loads(pickle.dumps(e))
    assert again.errno == errno.ENOSPC and str(again) == str(e)
