"""What the benchmark harnesses share (``run.py``, ``scale.py``): page-cache control, benchmark
files written without either implementation, and running one sample in a fresh process.

Stdlib only, so that importing it costs a parent process nothing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any


def evict(path: str | os.PathLike[str]) -> None:
    """Drop ``path`` from the page cache (written back first, so every page can go)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path: str) -> None:
    """Read the whole file so a "hot" sample really finds it cached."""
    buf = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def keep_warm(paths: str | Sequence[str], seconds: float) -> None:
    """Read the file(s) through now and every 0.5 s for ``seconds``, ending with a read.

    This machine runs DAMON proactive reclaim (a paddr ``pageout`` scheme: memory in physical
    regions aged 30 s or more and seen accessed in at most 1 of the 10 samples of a 5 s
    window is paged out).  Page cache refilled into such regions is paged out again within
    seconds, leaving holes in a file read once, so a "hot" sample after one read and a pause
    would time disk reads into those holes (and the fresh memory they take) rather than the
    load (runs/2026-11-22-bulk.md gives the figures).  Reading the file repeatedly while the machine settles
    keeps every page of it cached, which is what "hot" means; the cold workloads measure the
    other case.  The fraction resident when each sample starts is recorded (``resident_pct``).
    """
    paths = [paths] if isinstance(paths, str) else list(paths)
    end = time.monotonic() + seconds
    while True:
        for p in paths:
            warm(p)
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.5, left))


def resident_pct(paths: str | Sequence[str]) -> float | None:
    """Percent of the file(s)' pages in the page cache (``mincore``; None off Linux)."""
    import ctypes
    import mmap

    if not sys.platform.startswith("linux"):
        return None
    paths = [paths] if isinstance(paths, str) else list(paths)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    cached = total = 0
    for path in paths:
        size = os.path.getsize(path)
        if not size:
            continue
        pages = -(-size // mmap.PAGESIZE)
        vec = (ctypes.c_ubyte * pages)()
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as m:
            anchor = ctypes.c_char.from_buffer(m)  # the map's address; nothing is written
            ok = libc.mincore(ctypes.addressof(anchor), size, vec) == 0
            del anchor
        if not ok:
            return None
        cached += sum(b & 1 for b in vec)
        total += pages
    return 100.0 * cached / total if total else None


def compile_sources(*dirs: str) -> None:
    """Write bytecode for every module under ``dirs``, as a pip install leaves it: with
    PYTHONDONTWRITEBYTECODE set (or a read-only tree) each fresh sample process would compile
    what it imports, and a first call would time the compiler instead of the code."""
    import compileall

    for d in dirs:
        compileall.compile_dir(d, quiet=1)


MiB = 1 << 20
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "U8": 1}


def write_checkpoint(path: str, tensors: Sequence[tuple[str, str, list[int]]]) -> int:
    """Write a safetensors file straight as bytes: ``tensors`` are (name, dtype, shape) in data
    order, filled with random bytes in 16 MiB writes (constant memory at any size).  Written
    to a temporary name and renamed, so an interrupted run leaves no half file.  Returns the
    file size."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        n = math.prod(shape) * ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    body = json.dumps(header, separators=(",", ":")).encode()
    body += b" " * ((8 - (8 + len(body)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(body).to_bytes(8, "little") + body)
        left = offset
        while left:
            chunk = os.urandom(min(left, 16 * MiB))
            f.write(chunk)
            left -= len(chunk)
    os.replace(tmp, path)
    return 8 + len(body) + offset


def write_sharded(directory: str, total: int, tensors: int, shards: int, tensor_size: int | None = None) -> str:
    """A Hugging Face sharded checkpoint (``model-0000i-of-0000k.safetensors`` + index) of
    ``tensors`` F32 tensors of ``total / tensors`` bytes, split evenly; returns the index path."""
    os.makedirs(directory, exist_ok=True)
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        return index_path
    per = tensor_size or total // tensors
    names = [f"model.layers.{i:04d}.weight" for i in range(tensors)]
    weight_map: dict[str, str] = {}
    for s in range(shards):
        part = names[s * tensors // shards : (s + 1) * tensors // shards]
        shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_checkpoint(os.path.join(directory, shard), [(n, "F32", [per // 4096, 1024]) for n in part])
        weight_map.update(dict.fromkeys(part, shard))
    index = {"metadata": {"total_size": per * tensors}, "weight_map": dict(sorted(weight_map.items()))}
    with open(index_path + ".tmp", "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    os.replace(index_path + ".tmp", index_path)
    return index_path


def ensure_many(path: str, count: int) -> str:
    """A file with ``count`` tiny F32 tensors, written straight as bytes (fast to build)."""
    if os.path.exists(path):
        return path
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    names = sorted(f"model.layers.{i}.weight" for i in range(count))
    for i, name in enumerate(names):
        header[name] = {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]}
    body = json.dumps(header, separators=(",", ":")).encode()
    body += b" " * ((8 - (8 + len(body)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(len(body).to_bytes(8, "little") + body + bytes(8 * count))
    os.replace(tmp, path)
    return path


class SampleFailed(Exception):
    """A sample process exited with an error, or was stopped (``returncode``, ``stderr``, ``killed_by``)."""

    def __init__(self, returncode: int, stderr: str, killed_by: str | None = None) -> None:
        super().__init__(f"exit status {returncode}{f' ({killed_by})' if killed_by else ''}:\n{stderr}")
        self.returncode = returncode
        self.stderr = stderr
        self.killed_by = killed_by


def run_sample(
    argv: Sequence[str],
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    guard: Callable[[int], str | None] | None = None,
) -> dict[str, Any]:
    """Run one sample process; return the JSON object on its last stdout line.

    The child's own peak RSS comes from ``os.wait4``'s rusage (``wait4_maxrss_mib``).  A child
    that exits non-zero (or is killed) raises SampleFailed with its stderr.  ``timeout``
    seconds: the child is killed (SIGKILL) past it.  ``guard(pid)`` is called every 0.1 s
    while the child runs; a string it returns is the reason to kill the child at once (the
    over-memory benchmark stops a sample before the machine runs out of memory).
    """
    import threading

    env = dict(os.environ if env is None else env, PYTHONHASHSEED="0")
    killed_by: list[str] = []
    with tempfile.TemporaryFile() as errf:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=errf, env=env)
        assert proc.stdout is not None
        done = threading.Event()

        def watch() -> None:
            deadline = None if timeout is None else time.monotonic() + timeout
            while not done.wait(0.1):
                reason = guard(proc.pid) if guard is not None else None
                if reason is None and deadline is not None and time.monotonic() > deadline:
                    reason = f"timeout after {timeout:g} s"
                if reason is not None:
                    killed_by.append(reason)
                    proc.kill()
                    return

        watcher = threading.Thread(target=watch, daemon=True) if guard or timeout is not None else None
        if watcher is not None:
            watcher.start()
        try:
            out = proc.stdout.read()
            proc.stdout.close()
            # wait4 (not Popen.wait) so the kernel hands us this child's own rusage: its peak RSS.
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            errf.seek(0)
            raise SampleFailed(proc.returncode, errf.read().decode(errors="replace"), killed_by[0] if killed_by else None)
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    # ru_maxrss from wait4 as well: on Linux it can include the parent's RSS at fork time,
    # so the tables show the child's own VmHWM (peak_rss_mib).
    result["wait4_maxrss_mib"] = usage.ru_maxrss / 1024
    return result
