"""Threads sharing a handle, saving over a mapped file, closing a handle mid-read."""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import in_threads, run_python

from pysafetensors import safe_open
from pysafetensors.numpy import load_file, save_file

TENSORS = {f"t{i}": (np.arange(1000, dtype=np.float32) * (i + 1)).reshape(10, 100) for i in range(16)}


@pytest.fixture
def model(tmp_path: Any) -> str:
    path = os.fspath(tmp_path / "m.safetensors")
    save_file(TENSORS, path)
    return path


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_many_threads_read_one_handle(model: str, backend: str) -> None:
    with safe_open(model, framework="np", backend=backend) as f:
        def reader(seed: int) -> None:
            rng = np.random.default_rng(seed)
            for _ in range(60):
                name = f"t{rng.integers(16)}"
                if rng.random() < 0.5:
                    assert np.array_equal(f.get_tensor(name), TENSORS[name])
                else:
                    r = int(rng.integers(10))
                    assert np.array_equal(f.get_slice(name)[r, ::3], TENSORS[name][r, ::3])

        in_threads(reader, 8)


def test_saving_over_a_path_another_process_has_mapped(model: str) -> None:
    """A reader process maps the file; we save new content over the path.  The atomic
    rename leaves the reader's inode alone: its old tensors and new reads still see version 1."""
    code = r"""
import sys, numpy as np
from pysafetensors import safe_open
f = safe_open(sys.argv[1], framework="np", backend="mmap")
before = f.get_tensor("t3")
print("ready", flush=True)
sys.stdin.readline()  # the parent saves over the path now
after = f.get_tensor("t5")
ok = np.array_equal(before, np.arange(1000, dtype=np.float32).reshape(10, 100) * 4)
ok = ok and np.array_equal(after, np.arange(1000, dtype=np.float32).reshape(10, 100) * 6)
print("old data" if ok else "CHANGED", flush=True)
"""
    import subprocess
    import sys

    from _reliability_helpers import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, model], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        save_file({"t3": np.zeros((2, 2), np.int8)}, model)  # a completely different file
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "old data"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(load_file(model)) == ["t3"]  # new opens see the new file


CLOSE_WHILE_READING = r"""
import random, sys, threading, time, numpy as np
sys.setswitchinterval(1e-6)  # switch threads as often as possible: widen every race window
from pysafetensors import safe_open
from pysafetensors.errors import FileClosed

backend = sys.argv[2]
expected = {f"t{i}": (np.arange(1000, dtype=np.float32) * (i + 1)).reshape(10, 100) for i in range(16)}
bad = []
started = threading.Barrier(5)

def reader(f, seed):
    rng = np.random.default_rng(seed)
    started.wait()
    for _ in range(20000):
        name = f"t{rng.integers(16)}"
        try:
            if rng.random() < 0.5:
                arr = f.get_tensor(name)
                want = expected[name]
            else:
                arr = f.get_slice(name)[3]
                want = expected[name][3]
            total = float(arr.sum())  # touch every byte we were given
            del arr  # hold no view between reads, so close() can really unmap
            if total != float(want.sum()):
                bad.append(f"wrong data for {name}")
        except FileClosed:
            return
        except Exception as e:
            bad.append(f"{type(e).__name__}: {e}")
            return

for round in range(40):
    f = safe_open(sys.argv[1], framework="np", backend=backend)
    threads = [threading.Thread(target=reader, args=(f, round * 10 + i)) for i in range(4)]
    for t in threads:
        t.start()
    started.wait()
    time.sleep(random.random() * 0.004)  # let the readers get going, then pull the file away
    f.close()
    for t in threads:
        t.join()
    started.reset()
print("bad:", bad[:5])
sys.exit(3 if bad else 0)
"""


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_close_while_other_threads_read(model: str, backend: str) -> None:
    """Readers see valid data or FileClosed, never another error, never a crash (subprocess,
    so a segfault shows as a negative return code instead of killing pytest)."""
    proc = run_python(CLOSE_WHILE_READING, model, backend, timeout=120)
    assert proc.returncode != -signal.SIGSEGV and proc.returncode != -signal.SIGBUS, proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mmap_close_inside_the_read_window_gives_file_closed(model: str) -> None:
    """The exact interleaving a racing close() can hit: view() has checked that the map is
    open, then close() unmaps, then view() slices.  An offset whose arithmetic runs close()
    puts the close in that window deterministically."""
    from pysafetensors.errors import FileClosed
    from pysafetensors.io.sources import MmapSource

    src = MmapSource(model)

    class ClosingOffset(int):
        def __add__(self, other: Any) -> int:
            src.close()
            return int(self) + other

    with pytest.raises(FileClosed):
        src.view(ClosingOffset(8), 4)
