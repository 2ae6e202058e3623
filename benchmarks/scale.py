"""How pysafetensors scales, against upstream safetensors and against the machine itself.

    python benchmarks/scale.py                          # every section but --big (hours: see RESULTS.md)
    python benchmarks/scale.py --quick --out /tmp/s     # tiny sizes, 1 sample: a smoke run
    python benchmarks/scale.py --max-size 256MiB --max-count 100000 -n 3
    python benchmarks/scale.py --section big            # only the over-memory checkpoint
    python benchmarks/scale.py --report-only benchmarks/scale/results.json   # redraw tables and plots
    python benchmarks/scale.py --report-only run1/results.json run2/results.json run3/results.json
                                                        # one report of several runs: targets per run

Sections (``--section``, repeatable; default size, count, shards, remote; ``--big`` adds big):

- ``size``: load (hot and cold, torch and numpy, mmap and pread) and torch save vs file size,
  16 MiB to 8 GiB doubling (``--max-size``), next to the machine's floor measured at the same
  size in the same run: an O_DIRECT sequential read of the file, a buffered read of the evicted
  file, a write (+ fsync, and without) of the same size, a memcpy of the size, and mapping the
  cached file and reading a byte per page (what no hot mmap load can beat).  A size stops
  the section when the disk cannot hold it; a workload is skipped at a size whose memory it
  would not fit in.  Both are said in the output and in RESULTS.md.
- ``count``: header-only open (``safe_open`` + ``keys()``) and torch ``load_file`` of tiny
  tensors vs tensor count, 1 k to 1 M (``--max-count``).
- ``shards``: the same total size in 1 to 32 shards (``--max-shards``, ``--shard-total``):
  open on the index and list every tensor's dtype and shape; torch load of everything, shard
  after shard and on threads over shards.
- ``remote``: the header and one tensor over loopback HTTP from a stdlib Range server that
  sleeps before answering each request (``--latency``, default 0, 20 and 100 ms): time,
  requests and bytes per operation.  Upstream safetensors cannot read URLs, so ours is
  compared with what people use for remote headers, huggingface_hub's
  ``HfApi.parse_safetensors_file_metadata`` (pointed at the local server as its endpoint), and
  for the tensor with fsspec's HTTPFileSystem doing huggingface_hub's round trips (the first
  100,001 bytes, the rest of a longer header, then the tensor's byte range).
- ``big``: a sharded checkpoint of ``--big-factor`` (1.5) x MemAvailable, written once and
  removed after, loaded one tensor at a time (``safe_open``/``get_tensor``) and whole
  (``load_file``, mmap and pread); peak RSS reported (total, anonymous, file-backed), a
  watchdog stops a sample before the machine runs out of memory.  Refused up front, with a
  message, when the disk cannot hold the checkpoint.  The checkpoint is whole 256 MiB tensors
  in ``--big-shard`` (2 GiB) shards, so its size is rounded up to that.

Method (``run.py``'s): every sample is a fresh process (``scale_worker.py``), ours and upstream
alternate sample by sample, each sample starts after a pause (``--settle``, 3 s) during which
a hot sample's files are read through every 0.5 s (this VM's DAMON reclaim would page them out
otherwise) and a cold sample's files are evicted from the page cache first.  Writes
``RESULTS.md`` (medians, min-max spreads, the issue's targets checked), ``results.json``
(every sample, machine facts, the command) and PNG plots into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _common import (
    SampleFailed,
    compile_sources,
    ensure_many,
    evict,
    keep_warm,
    resident_pct,
    run_sample,
    write_checkpoint,
    write_sharded,
)

ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "scale_worker.py")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
IMPLS = ("upstream", "ours")
SECTIONS = ("size", "count", "shards", "remote", "big")
FRAMEWORKS = {"pt": "torch", "np": "numpy"}
PHYS = {
    "odirect": "O_DIRECT read",
    "cold_read": "buffered cold read",
    "write_fsync": "write + fsync",
    "write": "buffered write",
    "memcpy": "memcpy",
    "map_touch": "mmap + touch (hot)",
}


def floors_of(workload: str) -> tuple[str, ...]:
    """The machine's floors a size workload is set against: what it cannot beat (first) and
    what it may be compared with.  A hot mmap load must map and touch the cached pages; a hot
    pread load copies them out of the cache (memcpy); a cold load reads the disk; a save (no
    fsync, as both implementations write) is a buffered write, and write + fsync is the disk's."""
    if workload.endswith("cold"):
        return ("odirect",)
    if workload.startswith("save"):
        return ("write", "write_fsync")
    return ("map_touch",) if " mmap " in workload else ("memcpy",)


# --- small helpers --------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``256MiB``, ``8GiB``, ``1G``, ``512M``, ``4096`` (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 256MiB, 8GiB)")
    unit = {"": 1, "k": KiB, "m": MiB, "g": GiB, "t": 1 << 40}[m.group(2).lower()]
    return int(float(m.group(1)) * unit)


def parse_count(text: str) -> int:
    """``100000``, ``100k``, ``1M``, ``1_000_000``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([km]?)\s*", text.replace("_", ""), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a count: {text!r} (e.g. 100000, 100k, 1M)")
    return int(float(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2).lower()])


def human_size(n: float) -> str:
    for unit, div in (("TiB", 1 << 40), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= div:
            v = n / div
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def human_count(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes (empty off Linux)."""
    out: dict[str, int] = {}
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                out[key] = int(parts[0]) * (KiB if parts[1:] == ["kB"] else 1)
    return out


def mem_available() -> int:
    return meminfo().get("MemAvailable", 0)


def disk_free(path: str) -> int:
    return shutil.disk_usage(path).free


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- benchmark files (written by neither implementation) -------------------------------------

def size_tensors(size: int) -> list[tuple[str, str, list[int]]]:
    """``size`` bytes of F32 tensors [rows, 1024]: 16 MiB each from 64 MiB to 1 GiB (the 512 MiB
    file is run.py's: 32 x 16 MiB), 4 below, at most 64 above."""
    count = min(64, max(4, size // (16 * MiB)))
    per = size // count
    return [(f"model.layers.{i:03d}.weight", "F32", [per // 4096, 1024]) for i in range(count)]


def shard_files(index: str) -> list[str]:
    with open(index) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    return [os.path.join(os.path.dirname(index), s) for s in shards]


# --- a Range server with injected latency ------------------------------------------------------


class LatencyServer:
    """Serve files from disk at ``http://127.0.0.1:<port>/.../<name>`` (the last path component
    names the file, so huggingface_hub's ``/<repo>/resolve/<rev>/<file>`` works), with single
    ``Range`` requests, sleeping ``latency`` seconds before answering each request.  Counts
    requests and body bytes: ``log`` holds (arrival time.monotonic(), method and range, body
    bytes) per request; ``reset()`` before each sample."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = dict(files)
        self.latency = 0.0
        self.log: list[tuple[float, str, int]] = []
        self.inflight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                server.serve(self, head=True)

            def do_GET(self) -> None:
                server.serve(self, head=False)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def reset(self, latency: float) -> None:
        with self.lock:
            self.latency = latency
            self.log = []

    def split(self, mark: float | None) -> dict[str, Any]:
        """Requests and bytes of the first operation (before ``mark``) and of the repeat."""
        deadline = time.monotonic() + 5
        while self.inflight and time.monotonic() < deadline:  # a handler still logging its reply
            time.sleep(0.01)
        with self.lock:
            log = list(self.log)
        first = [e for e in log if mark is None or e[0] < mark]
        repeat = [e for e in log if mark is not None and e[0] >= mark]
        return {
            "requests": len(first),
            "bytes_sent": sum(e[2] for e in first),
            "ranges": [e[1] for e in first],
            "repeat_requests": len(repeat),
            "repeat_bytes_sent": sum(e[2] for e in repeat),
        }

    def serve(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        arrived = time.monotonic()
        rng = h.headers.get("Range")
        sent = 0
        with self.lock:
            self.inflight += 1
        try:
            time.sleep(self.latency)
            sent = self._answer(h, head, rng)
        finally:
            with self.lock:
                self.log.append((arrived, f"{h.command} {rng or '-'}", sent))
                self.inflight -= 1

    def _answer(self, h: BaseHTTPRequestHandler, head: bool, rng: str | None) -> int:
        name = h.path.split("?", 1)[0].rsplit("/", 1)[-1]
        path = self.files.get(name)
        if path is None:
            h.send_response(404)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return 0
        size = os.path.getsize(path)
        start, end, status = 0, size - 1, 200
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng or "")
        if m and (m.group(1) or m.group(2)):
            if m.group(1):
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            else:
                start = max(0, size - int(m.group(2)))
            status = 206
            if start > end:
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{size}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return 0
        length = end - start + 1
        h.send_response(status)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(length))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", f'"{os.stat(path).st_mtime_ns:x}-{size:x}"')
        if status == 206:
            h.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        h.end_headers()
        if head:
            return 0
        with open(path, "rb") as f:
            f.seek(start)
            left = length
            while left:
                chunk = f.read(min(left, MiB))
                if not chunk:
                    break
                h.wfile.write(chunk)
                left -= len(chunk)
        return length - left

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class Case:
    """One workload at one point of a curve, measured for several implementations."""

    section: str
    workload: str
    x: float  # bytes, tensor count, shard count or latency (ms)
    op: str
    impls: tuple[str, ...]
    args: dict[str, Any]
    cold: list[str] = field(default_factory=list)  # evicted before each sample
    hot: list[str] = field(default_factory=list)  # read through during the pause
    writes: bool = False  # os.sync() before each sample
    note: str = ""


class Bench:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.records: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.failures: list[dict[str, Any]] = []
        self.server: LatencyServer | None = None
        self.latency = 0.0
        self.guard: Callable[[int], str | None] | None = None
        self.big_facts: dict[str, Any] | None = None
        self.on_record: Callable[[], None] | None = None  # called after each measured case

    def sample(self, case: Case, impl: str) -> dict[str, Any]:
        if case.cold:
            for p in case.cold:
                evict(p)
        if case.writes:
            os.sync()  # no dirty pages left from the previous sample to throttle this one
        if case.hot:
            keep_warm(case.hot, self.opts.settle)
        elif self.opts.settle:
            time.sleep(self.opts.settle)
        files = case.hot or case.cold
        resident = resident_pct(files) if files else None
        if self.server is not None:
            self.server.reset(self.latency)
        result = run_sample([sys.executable, WORKER, case.op, impl, json.dumps(case.args)], guard=self.guard)
        if resident is not None:
            result["resident_pct"] = resident
        if self.server is not None:
            result.update(self.server.split(result.get("mark")))
        return result

    def measure(self, case: Case, samples: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """``samples`` per implementation, alternating which goes first."""
        n = samples or self.opts.samples
        out: dict[str, list[dict[str, Any]]] = {impl: [] for impl in case.impls}
        for i in range(n):
            for impl in case.impls if i % 2 == 0 else case.impls[::-1]:
                try:
                    out[impl].append(self.sample(case, impl))
                except SampleFailed as e:
                    failure = {"section": case.section, "workload": case.workload, "x": case.x, "impl": impl,
                               "returncode": e.returncode, "killed_by": e.killed_by, "stderr": e.stderr[-3000:]}
                    out[impl].append({"failed": True, **failure})
                    if case.section != "big":
                        self.failures.append(failure)
                        log(f"FAILED {case.section} {case.workload} x={case.x} {impl}: exit {e.returncode}\n{e.stderr[-1500:]}")
        for impl, samples_ in out.items():
            self.records.append({"section": case.section, "workload": case.workload, "x": case.x, "impl": impl,
                                 "note": case.note, "samples": samples_})
        log(f"  {case.section} {case.workload} @ {_x_label(case.section, case.x)}: " + ", ".join(
            f"{impl} {fmt_s(_stats(s)[0])}" for impl, s in out.items()))
        if self.on_record is not None:
            self.on_record()
        return out

    def skip(self, section: str, workload: str, x: float, reason: str) -> None:
        self.skipped.append({"section": section, "workload": workload, "x": x, "reason": reason})
        log(f"  skipped {section} {workload} @ {_x_label(section, x)}: {reason}")


def fmt_s(v: float) -> str:
    if math.isnan(v):
        return "n/a"
    return f"{v:.3g} s" if v >= 0.001 else f"{v * 1000:.3g} ms"


# --- sections -------------------------------------------------------------------------------

# Memory a workload needs at size S, as a multiple of S (page cache it must keep + anonymous
# memory): mmap loads keep the file cached; upstream's numpy load copies it; pread fills a
# buffer as well as the cache; a save holds the tensors and fills the cache; memcpy has two
# buffers.  A workload is skipped where this exceeds 85% of MemAvailable.
LOAD_MEMORY = {("pt", "mmap"): 1.1, ("np", "mmap"): 2.1, ("pt", "pread"): 2.1, ("np", "pread"): 2.1}


def section_size(b: Bench) -> None:
    o = b.opts
    data = os.path.join(o.data, "size")
    os.makedirs(data, exist_ok=True)
    sizes = [s for s in o.sizes if o.min_size <= s <= o.max_size]
    for size in sizes:
        free, avail = disk_free(data), mem_available()
        if free < 2 * size + GiB:
            b.notes.append(f"size: stopped before {human_size(size)}: the disk has {human_size(free)} free, "
                           f"the file, a save's output and a margin need {human_size(2 * size + GiB)}")
            log(b.notes[-1])
            break
        path = os.path.join(data, f"size-{size}.safetensors")
        out = os.path.join(data, "out.safetensors")
        log(f"size {human_size(size)}: writing the file")
        tensors = size_tensors(size)
        fsize = write_checkpoint(path, tensors)
        try:

            def fits(workload: str, factor: float, size: int = size, fsize: int = fsize, avail: int = avail) -> bool:
                need = factor * fsize
                if need > 0.85 * avail:
                    b.skip("size", workload, size, f"needs ~{human_size(need)}, 85% of MemAvailable "
                           f"({human_size(avail)}) is less")
                    return False
                return True

            # The machine's floor, in the same run, at the same size.
            for op, workload, factor, extra in (
                ("odirect_read", "odirect", 0.0, {"cold": [path]}),
                ("cold_read", "cold_read", 1.0, {"cold": [path]}),
                ("write", "write_fsync", 1.1, {"writes": True}),
                ("write", "write", 1.1, {"writes": True}),
                ("memcpy", "memcpy", 2.1, {}),
                ("map_touch", "map_touch", 1.1, {"hot": [path]}),
            ):
                if fits(workload, factor):
                    args = {"path": path, "size": fsize, "out": out, "fsync": workload == "write_fsync"}
                    b.measure(Case("size", workload, size, op, ("phys",), args, **extra))
            for fw in ("pt", "np"):
                for backend in ("mmap", "pread"):
                    for temp in ("hot", "cold"):
                        workload = f"load {FRAMEWORKS[fw]} {backend} {temp}"
                        if fits(workload, LOAD_MEMORY[fw, backend]):
                            files = {"hot": [path]} if temp == "hot" else {"cold": [path]}
                            b.measure(Case("size", workload, size, "load", IMPLS,
                                           {"path": path, "framework": fw, "backend": backend}, **files))
            if fits("save torch", 2.1):
                sizes_ = [math.prod(shape) * 4 for _, _, shape in tensors]
                b.measure(Case("size", "save torch", size, "save", IMPLS, {"sizes": sizes_, "out": out}, writes=True))
        finally:
            for p in (path, out):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p)


def section_count(b: Bench) -> None:
    o = b.opts
    data = os.path.join(o.data, "count")
    os.makedirs(data, exist_ok=True)
    for count in [c for c in o.counts if c <= o.max_count]:
        path = ensure_many(os.path.join(data, f"many-{count}.safetensors"), count)
        b.measure(Case("count", "open + keys()", count, "open_keys", IMPLS, {"path": path}, hot=[path]))
        b.measure(Case("count", "load_file torch", count, "load_many", IMPLS, {"path": path}, hot=[path]))


def section_shards(b: Bench) -> None:
    o = b.opts
    total, tensors = o.shard_total, o.shard_tensors
    for shards in [s for s in o.shard_counts if s <= o.max_shards]:
        directory = os.path.join(o.data, "shards", f"{human_size(total).replace(' ', '')}-{tensors}-{shards}")
        index = write_sharded(directory, total, tensors, shards)
        files = shard_files(index)
        threads = min(shards, os.cpu_count() or 1)
        b.measure(Case("shards", "open index + every dtype/shape", shards, "shard_open", IMPLS, {"index": index},
                       hot=files, note="upstream: the index JSON, then safe_open on every shard"))
        b.measure(Case("shards", "load torch, shard after shard", shards, "shard_load", IMPLS,
                       {"index": index, "threads": 0}, hot=files,
                       note="ours: load_file(index); upstream: load_file per shard"))
        b.measure(Case("shards", "load torch, threads over shards", shards, "shard_load", IMPLS,
                       {"index": index, "threads": threads}, hot=files,
                       note="load_file per shard on min(shards, CPUs) threads (the `threads` argument in results.json)"))


def section_remote(b: Bench) -> None:
    o = b.opts
    data = os.path.join(o.data, "remote")
    os.makedirs(data, exist_ok=True)
    n, per = o.remote_tensors
    typical = os.path.join(data, f"typical-{n}x{per}.safetensors")
    if not os.path.exists(typical):
        write_checkpoint(typical, [(f"model.layers.{i:03d}.weight", "F32", [per // 4096, 1024]) for i in range(n)])
    longh = ensure_many(os.path.join(data, f"long-header-{o.remote_long}.safetensors"), o.remote_long)
    files = {"typical": typical, "long header": longh}
    server = LatencyServer({os.path.basename(p): p for p in files.values()})
    b.server = server
    try:
        for latency_ms in o.latencies:
            b.latency = latency_ms / 1000
            for label, path in files.items():
                name = os.path.basename(path)
                url = f"{server.base}/files/{name}"
                hdr = _header(path)
                tensor = sorted((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0])
                middle = tensor[len(tensor) // 2]
                args = {"url": url, "endpoint": server.base, "repo": "bench/model", "filename": name, "name": middle}
                b.measure(Case("remote", f"header, {label} file", latency_ms, "remote_header",
                               ("ours", "hf", "fsspec"), args, hot=[path]))
                b.measure(Case("remote", f"one tensor, {label} file", latency_ms, "remote_tensor",
                               ("ours", "fsspec"), args, hot=[path]))
    finally:
        b.server = None
        server.close()


def _header(path: str) -> dict[str, Any]:
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return dict(json.loads(f.read(n)))


def section_big(b: Bench) -> None:
    o = b.opts
    info = meminfo()
    avail, total_mem = info.get("MemAvailable", 0), info.get("MemTotal", 0)
    size = int(o.big_factor * avail)
    shard = o.big_shard
    shards = max(1, -(-size // shard))
    per_tensor = 256 * MiB
    tensors_per_shard = max(1, shard // per_tensor)
    tensors = shards * tensors_per_shard
    size = tensors * per_tensor
    directory = os.path.join(o.data, "big")
    free = disk_free(o.data)
    facts = {"mem_total": total_mem, "mem_available": avail, "factor": o.big_factor, "checkpoint_bytes": size,
             "shards": shards, "tensors": tensors, "disk_free": free}
    b.big_facts = facts
    if free < size + 2 * GiB:
        msg = (f"big: not run: a {human_size(size)} checkpoint ({o.big_factor:g} x MemAvailable "
               f"{human_size(avail)}) needs {human_size(size + 2 * GiB)} of disk with the margin, "
               f"{human_size(free)} is free")
        b.notes.append(msg)
        b.skip("big", "all", size, msg)
        return
    floor = max(GiB, int(0.04 * total_mem))

    def guard(pid: int) -> str | None:
        left = mem_available()
        if left < floor:
            return f"stopped by the benchmark's watchdog: MemAvailable fell to {human_size(left)}"
        return None

    log(f"big: writing {human_size(size)} in {shards} shards ({o.big_factor:g} x MemAvailable {human_size(avail)})")
    shutil.rmtree(directory, ignore_errors=True)
    try:
        index = write_sharded(directory, size, tensors, shards, tensor_size=per_tensor)
        files = shard_files(index)
        b.guard = guard
        for workload, mode, backend, impls in (
            ("get_tensor one at a time", "get_tensor", "mmap", IMPLS),
            ("load_file mmap", "load_file", "mmap", IMPLS),
            ("load_file pread", "load_file", "pread", IMPLS),
        ):
            b.measure(Case("big", workload, size, "big", impls, {"index": index, "mode": mode, "backend": backend},
                           cold=files), samples=o.big_samples)
    finally:
        b.guard = None
        shutil.rmtree(directory, ignore_errors=True)


# --- machine facts ---------------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _mount_of(path: str) -> dict[str, str]:
    path = os.path.realpath(path)
    best: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/mounts") as f:
        for line in f:
            dev, mnt, fstype, opts, *_ = line.split()
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best.get("mount", "")):
                best = {"device": dev, "mount": mnt, "fstype": fstype, "options": opts}
    return best


def machine_facts(data: str) -> dict[str, Any]:
    from importlib import metadata

    cpuinfo = _read("/proc/cpuinfo") or ""
    models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    mem = meminfo()
    mount = _mount_of(data)
    disk: dict[str, Any] = {**mount, "total_bytes": shutil.disk_usage(data).total, "free_bytes": disk_free(data)}
    dev = os.path.basename(mount.get("device", ""))
    if dev and os.path.isdir(f"/sys/block/{dev}"):
        for key in ("rotational", "read_ahead_kb", "max_sectors_kb", "scheduler"):
            disk[key] = _read(f"/sys/block/{dev}/queue/{key}")
        disk["model"] = _read(f"/sys/block/{dev}/device/model") or _read(f"/sys/block/{dev}/device/vendor")
    versions = {}
    for dist in ("torch", "numpy", "safetensors", "huggingface_hub", "fsspec", "matplotlib"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True, check=False)
    return {
        "cpu": models[0] if models else platform.processor(),
        "cpus": os.cpu_count(),
        "mem_total_bytes": mem.get("MemTotal"),
        "mem_available_bytes": mem.get("MemAvailable"),
        "kernel": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "versions": versions,
        "code": commit.stdout.strip() or None,
        "disk": disk,
        "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "damon": _read("/sys/kernel/mm/damon/admin/kdamonds/0/state"),
        "page_reporting_order": _read("/sys/module/page_reporting/parameters/page_reporting_order"),
        "loadavg_before": os.getloadavg(),
    }


# --- report ---------------------------------------------------------------------------------


def _stats(samples: list[dict[str, Any]], key: str = "seconds") -> tuple[float, float, float, int]:
    values = [s[key] for s in samples if not s.get("failed") and isinstance(s.get(key), (int, float))]
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return (float("nan"),) * 3 + (0,)  # type: ignore[return-value]
    return statistics.median(values), min(values), max(values), len(values)


def _cell(samples: list[dict[str, Any]] | None) -> str:
    if not samples:
        return "–"
    med, lo, hi, n = _stats(samples)
    failed = sum(1 for s in samples if s.get("failed"))
    if not n:
        return f"failed ({failed})" if failed else "n/a"
    cell = f"{fmt_s(med)} ({fmt_s(lo)}–{fmt_s(hi)})" if n > 1 else fmt_s(med)
    return cell + (f", {failed} failed" if failed else "")


class Results:
    """The records of a run, indexed by (section, workload, x, impl)."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.by: dict[tuple[str, str, float, str], list[dict[str, Any]]] = {}
        for r in doc["records"]:
            self.by[(r["section"], r["workload"], float(r["x"]), r["impl"])] = r["samples"]

    def get(self, section: str, workload: str, x: float, impl: str) -> list[dict[str, Any]] | None:
        return self.by.get((section, workload, float(x), impl))

    def med(self, section: str, workload: str, x: float, impl: str, key: str = "seconds") -> float:
        s = self.get(section, workload, x, impl)
        return _stats(s, key)[0] if s else float("nan")

    def xs(self, section: str, workload: str | None = None) -> list[float]:
        return sorted({k[2] for k in self.by if k[0] == section and (workload is None or k[1] == workload)})

    def workloads(self, section: str) -> list[str]:
        seen: dict[str, None] = {}
        for k in self.by:
            if k[0] == section:
                seen[k[1]] = None
        return list(seen)

    def notes_of(self, section: str, workload: str) -> str:
        for r in self.doc["records"]:
            if r["section"] == section and r["workload"] == workload and r.get("note"):
                return str(r["note"])
        return ""


def _ratio(a: float, b: float) -> str:
    return f"**{a / b:.2f}x**" if b and not (math.isnan(a) or math.isnan(b)) else "–"


def _rate(nbytes: float, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:.2f}" if seconds and not math.isnan(seconds) else "–"


_FLOOR_SHORT = {"map_touch": "mmap+touch", "memcpy": "memcpy", "write": "write", "odirect": "O_DIRECT"}


def _floor_bound(res: Results, workload: str, size: float, upstream: float) -> str:
    """`` (mmap+touch 0.93x)``: the machine's floor for ``workload`` at ``size`` as a multiple of
    upstream's time, the best ratio any implementation could reach where that floor is tight
    (empty where the run did not measure it).  Named, because not every reference is a tight
    floor at every size: see RESULTS.md."""
    key = floors_of(workload)[0]
    floor = res.med("size", key, size, "phys")
    return "" if math.isnan(floor) or math.isnan(upstream) else f" ({_FLOOR_SHORT[key]} {floor / upstream:.2f}x)"


def targets(res: Results) -> list[tuple[str, str, str]]:
    """The issue's targets checked on this run: (target, measured, verdict)."""
    rows: list[tuple[str, str, str]] = []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("met" if ok else "**MISSED**")

    # Header-only open of a 100,000-tensor file <= 1.0x upstream; no worse than linear.
    w = "open + keys()"
    up, ours = res.med("count", w, 100_000, "upstream"), res.med("count", w, 100_000, "ours")
    ok = None if math.isnan(up) or math.isnan(ours) else ours <= up
    rows.append(("header-only open, 100,000 tensors <= 1.0x upstream",
                 f"{ours / up:.2f}x ({fmt_s(ours)} vs {fmt_s(up)})" if ok is not None else "–", verdict(ok)))
    counts = [c for c in res.xs("count", w) if c >= 10_000] or res.xs("count", w)
    linear = "header-only open: time no worse than linear in tensor count (log-log slope <= 1.1)"
    if len(counts) < 2:
        rows.append((linear, "–", verdict(None)))
    else:
        slopes = {}
        for impl in IMPLS:
            pts = [(math.log(c), math.log(res.med("count", w, c, impl))) for c in counts]
            pts = [p for p in pts if not math.isnan(p[1])]
            if len(pts) >= 2:
                mx = sum(p[0] for p in pts) / len(pts)
                my = sum(p[1] for p in pts) / len(pts)
                den = sum((p[0] - mx) ** 2 for p in pts)
                slopes[impl] = sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else float("nan")
        s = slopes.get("ours", float("nan"))
        rows.append((linear,
                     (f"slope {s:.2f} over {human_count(int(counts[0]))}–{human_count(int(counts[-1]))} "
                      f"(upstream {slopes.get('upstream', float('nan')):.2f})"),
                     verdict(None if math.isnan(s) else s <= 1.1)))
    # Cold loads >= 85% of the O_DIRECT read rate at every size >= 256 MiB.
    for fw in FRAMEWORKS.values():
        for backend in ("mmap", "pread"):
            w = f"load {fw} {backend} cold"
            parts, oks = [], []
            for size in [x for x in res.xs("size", w) if x >= 256 * MiB]:
                od = res.med("size", "odirect", size, "phys")
                t = res.med("size", w, size, "ours")
                if math.isnan(od) or math.isnan(t):
                    continue
                frac = od / t  # (size / t) / (size / od)
                oks.append(frac >= 0.85)
                parts.append(f"{human_size(size)} {frac:.0%}")
            rows.append((f"cold {fw} load ({backend}) >= 85% of the O_DIRECT rate, sizes >= 256 MiB",
                         ", ".join(parts) or "–", verdict(all(oks) if oks else None)))
    # Hot loads and saves <= 0.8x upstream at every size >= 64 MiB; 512 MiB hot torch <= 0.7x.
    hot = [f"load {fw} {backend} hot" for fw in FRAMEWORKS.values() for backend in ("mmap", "pread")]
    for w in [*hot, "save torch"]:
        parts, oks = [], []
        for size in [x for x in res.xs("size", w) if x >= 64 * MiB]:
            up, ours = res.med("size", w, size, "upstream"), res.med("size", w, size, "ours")
            if math.isnan(up) or math.isnan(ours):
                continue
            oks.append(ours / up <= 0.8)
            parts.append(f"{human_size(size)} {ours / up:.2f}x{_floor_bound(res, w, size, up)}")
        rows.append((f"{w} <= 0.8x upstream, sizes >= 64 MiB", ", ".join(parts) or "–",
                     verdict(all(oks) if oks else None)))
    up, ours = res.med("size", "load torch mmap hot", 512 * MiB, "upstream"), res.med(
        "size", "load torch mmap hot", 512 * MiB, "ours")
    ok = None if math.isnan(up) or math.isnan(ours) else ours / up <= 0.7
    rows.append(("hot torch load (mmap) at 512 MiB <= 0.7x upstream",
                 f"{ours / up:.2f}x{_floor_bound(res, 'load torch mmap hot', 512 * MiB, up)}" if ok is not None else "–",
                 verdict(ok)))
    # The over-memory checkpoint.
    facts = res.doc.get("big") or {}
    for w, want in (("get_tensor one at a time", "loaded"), ("load_file mmap", "loaded"), ("load_file pread", "refused")):
        xs = res.xs("big", w)
        samples = res.get("big", w, xs[0], "ours") if xs else None
        if samples and facts.get("checkpoint_bytes", 0) <= facts.get("mem_available", 0):
            rows.append((f"over-memory checkpoint: {w} {'refuses up front' if want == 'refused' else 'loads'}",
                         (f"the checkpoint ({human_size(facts['checkpoint_bytes'])}) fit in MemAvailable "
                         f"({human_size(facts['mem_available'])}): not the over-memory case"), verdict(None)))
            continue
        if not samples:
            rows.append((f"over-memory checkpoint: {w} {'refuses up front' if want == 'refused' else 'loads'}",
                         "–", verdict(None)))
            continue
        s = samples[0]
        status = s.get("status") or (s.get("killed_by") or f"exit {s.get('returncode')}")
        measured = f"{status}; peak RSS {s.get('peak_rss_mib', float('nan')):.0f} MiB" if not s.get("failed") else status
        if s.get("error"):
            measured += f"; {s['error'][:160]}"
        rows.append((f"over-memory checkpoint: {w} {'refuses up front' if want == 'refused' else 'loads'}",
                     measured, verdict(s.get("status") == want)))
    # Threads over shards.
    parts = []
    for k in res.xs("shards", "load torch, threads over shards"):
        seq = res.med("shards", "load torch, shard after shard", k, "ours")
        par = res.med("shards", "load torch, threads over shards", k, "ours")
        if not (math.isnan(seq) or math.isnan(par)) and k > 1:
            parts.append(f"{int(k)} shards {par / seq:.2f}x")
    rows.append(("sharded load on threads over shards vs shard after shard (ours; < 1 is a gain)",
                 ", ".join(parts) or "–", "measured" if parts else "not measured"))
    return rows


def merge_runs(docs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One document with every run's samples pooled (each sample tagged with its ``run``)."""
    if len(docs) == 1:
        return dict(docs[0])
    pooled: dict[tuple[str, str, float, str], dict[str, Any]] = {}
    for i, doc in enumerate(docs, 1):
        for r in doc["records"]:
            key = (r["section"], r["workload"], float(r["x"]), r["impl"])
            rec = pooled.setdefault(key, {**r, "samples": []})
            rec["samples"] = rec["samples"] + [{**smp, "run": i} for smp in r["samples"]]
    merged = dict(docs[0])
    merged["records"] = list(pooled.values())
    for key in ("notes", "skipped", "failures"):
        merged[key] = [item if key != "notes" else f"run {i}: {item}" for i, doc in enumerate(docs, 1)
                       for item in doc[key]]
    merged["big"] = next((d["big"] for d in docs if d.get("big")), None)
    return merged


def _run_lines(doc: dict[str, Any], label: str = "") -> list[str]:
    m = doc["machine"]
    disk = m.get("disk", {})
    return [
        f"- **{label}Date**: {doc['started']} to {doc['finished']} UTC ({doc['elapsed_s'] / 60:.1f} min; per section: "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in doc["section_s"].items()) + ")",
        f"- **{label}Command**: `{doc['command']}`",
        (f"- **{label}Code**: {m.get('code')}; samples per implementation {doc['config']['samples']}, "
         f"settle {doc['config']['settle']:g} s; load average (1 min) before / after "
         f"{m['loadavg_before'][0]:.2f} / {doc['loadavg_after'][0]:.2f}"),
        (f"- **{label}CPU**: {m.get('cpu')}, {m.get('cpus')} CPUs ({m.get('machine')}); **memory** "
         f"{human_size(m.get('mem_total_bytes') or 0)} (MemAvailable at start "
         f"{human_size(m.get('mem_available_bytes') or 0)})"),
        (f"- **{label}Kernel**: {m.get('kernel')}; THP {m.get('thp')}; DAMON {m.get('damon')}; "
         f"page_reporting_order {m.get('page_reporting_order')}"),
        (f"- **{label}Disk** (the data directory's): {disk.get('device')} {disk.get('fstype')} ({disk.get('options')}), "
         f"{human_size(disk.get('total_bytes') or 0)}, rotational {disk.get('rotational')}, "
         f"read_ahead_kb {disk.get('read_ahead_kb')}, max_sectors_kb {disk.get('max_sectors_kb')}, "
         f"model {disk.get('model')}"),
        f"- **{label}Software**: Python {m.get('python')}, "
        + ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items()),
    ]


def write_report(docs: dict[str, Any] | Sequence[dict[str, Any]], out: str) -> list[str]:
    """RESULTS.md and the plots into ``out`` from one run's document or several runs'; returns
    the plot file names.  Several runs: the targets table has a column per run, the detailed
    tables and the plots pool every run's samples."""
    docs = [docs] if isinstance(docs, dict) else list(docs)
    doc = merge_runs(docs)
    res = Results(doc)
    plots = draw_plots(res, out)
    lines = [
        "# Scale benchmark: pysafetensors vs upstream safetensors, and vs the machine",
        "",
        "Generated by `benchmarks/scale.py`; every sample's numbers are in `results.json` beside this file.",
        "Times are medians with (min–max) over the samples; ratios are ours / upstream medians.",
        "",
    ]
    if len(docs) == 1:
        lines += ["## Run", "", *_run_lines(doc), ""]
    else:
        lines += [f"## {len(docs)} runs", "",
                  "The targets are checked per run; the tables and plots below pool the samples of every run.", ""]
        for i, d in enumerate(docs, 1):
            lines += [f"Run {i}:", "", *_run_lines(d), ""]
    if doc["notes"] or doc["skipped"] or doc["failures"]:
        lines += ["## Stopped, skipped, failed", ""]
        lines += [f"- {n}" for n in doc["notes"]]
        lines += [f"- skipped: {s['section']} `{s['workload']}` at {_x_label(s['section'], s['x'])}: {s['reason']}"
                  for s in doc["skipped"]]
        lines += [f"- **failed**: {f['section']} `{f['workload']}` at {_x_label(f['section'], f['x'])}, {f['impl']}: "
                  f"exit {f['returncode']}" for f in doc["failures"]]
        lines.append("")
    per_run = [targets(Results(d)) for d in docs]
    if len(docs) == 1:
        lines += ["## The issue's targets in this run", "", "| target | measured | verdict |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in per_run[0]]
    else:
        lines += ["## The issue's targets, run by run", "",
                  "| target | " + " | ".join(f"run {i}" for i in range(1, len(docs) + 1)) + " |",
                  "|---|" + "---|" * len(docs)]
        for i, (name, _, _) in enumerate(per_run[0]):
            lines.append(f"| {name} | " + " | ".join(f"{rows[i][1]}: {rows[i][2]}" for rows in per_run) + " |")
    lines.append("")
    lines += _size_tables(res) + _count_tables(res) + _shard_tables(res) + _remote_tables(res) + _big_tables(res)
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{p[:-4]}]({p})" for p in plots]
        lines.append("")
    with open(os.path.join(out, "RESULTS.md"), "w") as f:
        f.write("\n".join(lines))
    return plots


def _x_label(section: str, x: float) -> str:
    if section in ("size", "big"):
        return human_size(x)
    if section == "count":
        return f"{human_count(int(x))} tensors"
    if section == "shards":
        return f"{int(x)} shards"
    return f"{x:g} ms"


def _size_tables(res: Results) -> list[str]:
    sizes = res.xs("size")
    if not sizes:
        return []
    out = ["## Load and save vs file size", ""]
    out += ["The machine's floor at each size (median seconds, GB/s = 10^9 bytes/s):", "",
            "| size | " + " | ".join(PHYS.values()) + " |", "|---|" + "---|" * len(PHYS)]
    for size in sizes:
        cells = []
        for key in PHYS:
            t = res.med("size", key, size, "phys")
            cells.append(f"{fmt_s(t)}, {_rate(size, t)} GB/s" if not math.isnan(t) else "–")
        out.append(f"| {human_size(size)} | " + " | ".join(cells) + " |")
    out.append("")
    for w in [x for x in res.workloads("size") if x not in PHYS]:
        # A floor a run did not measure (runs before map_touch existed) is left out.
        refs = [k for k in floors_of(w) if res.xs("size", k)] or ["memcpy"]
        out += [f"### {w}", "",
                "| size | upstream s | ours s | ours/upstream | ours GB/s | "
                + " | ".join(f"{PHYS[k]} GB/s | ours / {PHYS[k]} rate" for k in refs) + " |",
                "|---|---|---|---|---|" + "---|---|" * len(refs)]
        for size in res.xs("size", w):
            up, ours = res.get("size", w, size, "upstream"), res.get("size", w, size, "ours")
            mo, mu = _stats(ours or [])[0], _stats(up or [])[0]
            cells = []
            for k in refs:
                ref = res.med("size", k, size, "phys")
                frac = f"{ref / mo:.0%}" if not (math.isnan(ref) or math.isnan(mo)) else "–"
                cells.append(f"{_rate(size, ref)} | {frac}")
            out.append(f"| {human_size(size)} | {_cell(up)} | {_cell(ours)} | {_ratio(mo, mu)} | {_rate(size, mo)} | "
                       + " | ".join(cells) + " |")
        out.append("")
    return out


def _generic_tables(res: Results, section: str, title: str, xlabel: str) -> list[str]:
    if not res.xs(section):
        return []
    out = [f"## {title}", ""]
    for w in res.workloads(section):
        note = res.notes_of(section, w)
        out += [f"### {w}", ""] + ([note, ""] if note else [])
        repeat = any("repeat_s" in smp for x in res.xs(section, w) for smp in res.get(section, w, x, "ours") or [])
        out += [f"| {xlabel} | upstream s | ours s | ours/upstream | ours per item | peak RSS MiB up / ours |"
                + (" repeated in the process: upstream / ours s (ratio) |" if repeat else ""),
                "|---|---|---|---|---|---|" + ("---|" if repeat else "")]
        for x in res.xs(section, w):
            up, ours = res.get(section, w, x, "upstream"), res.get(section, w, x, "ours")
            mo, mu = _stats(ours or [])[0], _stats(up or [])[0]
            per = f"{mo / x * 1e6:.2f} µs" if section == "count" and not math.isnan(mo) else "–"
            rss = f"{_stats(up or [], 'peak_rss_mib')[0]:.0f} / {_stats(ours or [], 'peak_rss_mib')[0]:.0f}"
            label = human_count(int(x)) if section == "count" else f"{int(x)}"
            row = f"| {label} | {_cell(up)} | {_cell(ours)} | {_ratio(mo, mu)} | {per} | {rss} |"
            if repeat:
                ro, ru = _stats(ours or [], "repeat_s")[0], _stats(up or [], "repeat_s")[0]
                row += f" {fmt_s(ru)} / {fmt_s(ro)} ({_ratio(ro, ru).strip('*')}) |"
            out.append(row)
        out.append("")
    return out


def _count_tables(res: Results) -> list[str]:
    return _generic_tables(res, "count", "Header and tiny tensors vs tensor count", "tensors")


def _shard_tables(res: Results) -> list[str]:
    return _generic_tables(res, "shards", "Sharded checkpoints: the same total size in 1 to 32 shards", "shards")


def _remote_tables(res: Results) -> list[str]:
    if not res.xs("remote"):
        return []
    out = ["## Remote reads over loopback HTTP with injected latency per request", "",
           ("Upstream safetensors reads no URLs.  The header read is compared with what people use for remote "
            "headers, huggingface_hub's `HfApi(endpoint=<this server>).parse_safetensors_file_metadata` (the first "
            "100,001 bytes, a second request for a longer header); one tensor with fsspec's HTTPFileSystem making "
            "those round trips and then one for the tensor's bytes, the fewest a reader without an index can make.  "
            "The server (127.0.0.1, stdlib) sleeps the latency before answering each request."), "",
           ("Each cell: the operation in a fresh process (its one-time costs included: lazy imports, SSL context), "
           "then the same operation repeated in that process; requests and body KiB of the first, counted by the "
           "server."), ""]
    names = {"ours": "ours", "hf": "huggingface_hub", "fsspec": "fsspec HTTP"}
    for w in res.workloads("remote"):
        impls = [i for i in names if any(k[0] == "remote" and k[1] == w and k[3] == i for k in res.by)]
        out += [f"### {w}", "", "| latency | " + " | ".join(f"{names[i]}: first s / repeat s, requests, KiB" for i in impls)
                + " |", "|---|" + "---|" * len(impls)]
        for x in res.xs("remote", w):
            cells = []
            for impl in impls:
                s = res.get("remote", w, x, impl) or []
                req = _stats(s, "requests")[0]
                kib = _stats(s, "bytes_sent")[0] / KiB
                cells.append(f"{_cell(s)} / {fmt_s(_stats(s, 'repeat_s')[0])}, {req:.0f}, {kib:,.0f}")
            out.append(f"| {x:g} ms | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _big_tables(res: Results) -> list[str]:
    facts = res.doc.get("big")
    if not res.xs("big") and not facts:
        return []
    out = ["## A checkpoint larger than the machine's free memory", ""]
    if facts:
        out += [(f"{human_size(facts['checkpoint_bytes'])} in {facts['shards']} shards ({facts['tensors']} tensors of "
                 f"256 MiB): {facts['factor']:g} x MemAvailable ({human_size(facts['mem_available'])} of "
                 f"{human_size(facts['mem_total'])}); written for this run and removed after; evicted before each "
                 "sample.  A watchdog stops a sample when MemAvailable falls under max(1 GiB, 4% of memory)."), ""]
    out += ["| workload | impl | result | s | peak RSS MiB (VmHWM) | peak anon MiB | peak file MiB |",
            "|---|---|---|---|---|---|---|"]
    for w in res.workloads("big"):
        for x in res.xs("big", w):
            for impl in IMPLS:
                for s in res.get("big", w, x, impl) or []:
                    if s.get("failed"):
                        result = s.get("killed_by") or f"killed/exit {s.get('returncode')}"
                        out.append(f"| {w} | {impl} | {result} | – | – | – | – |")
                        continue
                    result = s.get("status", "?") + (f": {s['error'][:200]}" if s.get("error") else "")
                    out.append(f"| {w} | {impl} | {result} | {fmt_s(s.get('seconds', float('nan')))} | "
                               f"{s.get('peak_rss_mib', 0):.0f} | {s.get('peak_rss_anon_mib', 0):.0f} | "
                               f"{s.get('peak_rss_file_mib', 0):.0f} |")
    out.append("")
    return out


# --- plots ------------------------------------------------------------------------------------

STYLE = {
    "ours": {"color": "tab:blue", "marker": "o", "linestyle": "-", "label": "pysafetensors"},
    "upstream": {"color": "tab:orange", "marker": "s", "linestyle": "--", "label": "upstream safetensors"},
    "hf": {"color": "tab:green", "marker": "^", "linestyle": "--", "label": "huggingface_hub"},
    "fsspec": {"color": "tab:purple", "marker": "v", "linestyle": ":", "label": "fsspec HTTP"},
}
PHYS_STYLE = {
    "odirect": {"color": "black", "linestyle": "-", "label": "O_DIRECT read"},
    "cold_read": {"color": "gray", "linestyle": "-.", "label": "buffered cold read"},
    "write_fsync": {"color": "black", "linestyle": "-", "label": "write + fsync"},
    "write": {"color": "gray", "linestyle": "-.", "label": "buffered write"},
    "memcpy": {"color": "black", "linestyle": ":", "label": "memcpy"},
    "map_touch": {"color": "black", "linestyle": "-", "label": "mmap + touch"},
}


def _line(
    ax: Any, res: Results, section: str, workload: str, impl: str, style: dict[str, Any], scale: float = 1,
    key: str = "seconds",
) -> None:
    """Medians with min-max error bars of one implementation's samples along a curve."""
    xs, meds, lo, hi = [], [], [], []
    for x in res.xs(section, workload):
        s = res.get(section, workload, x, impl)
        med, mn, mx, n = _stats(s or [], key)
        if n:
            xs.append(x / scale)
            meds.append(med)
            lo.append(med - mn)
            hi.append(mx - med)
    if xs:
        ax.errorbar(xs, meds, yerr=[lo, hi], capsize=2, markersize=4, **style)


def _xticks(ax: Any, xs: Sequence[float], label: Callable[[float], str]) -> None:
    """Ticks at the measured points, labelled in words (1 GiB, 100k) rather than powers of ten."""
    from matplotlib.ticker import NullLocator

    if xs:
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(list(xs), [label(x) for x in xs], rotation=45 if len(xs) > 6 else 0, fontsize=8)


def _legend(ax: Any, fontsize: int) -> None:
    if ax.get_legend_handles_labels()[0]:  # an empty curve (a section cut short) has nothing to label
        ax.legend(fontsize=fontsize)


def draw_plots(res: Results, out: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)
        made.append(name)

    if res.xs("size"):
        for temp, refs in (("hot", ()), ("cold", ("odirect", "cold_read"))):
            fig, axes = plt.subplots(2, 2, figsize=(11, 8), squeeze=False)
            for ax, (fw, backend) in zip(axes.flat, [(f, b) for f in FRAMEWORKS.values() for b in ("mmap", "pread")]):
                w = f"load {fw} {backend} {temp}"
                for impl in IMPLS:
                    _line(ax, res, "size", w, impl, STYLE[impl], MiB)
                # A hot panel shows its own floor (mmap + touch, or memcpy for pread) and memcpy.
                for ref in refs if temp == "cold" else dict.fromkeys((*floors_of(w), "memcpy")):
                    _line(ax, res, "size", ref, "phys", PHYS_STYLE[ref], MiB)
                ax.set(xscale="log", yscale="log", xlabel="file size", ylabel="seconds", title=w)
                _xticks(ax, [x / MiB for x in res.xs("size", w)], lambda v: human_size(v * MiB))
                ax.grid(True, which="both", alpha=0.3)
                _legend(ax, 7)
            save(fig, f"load_{temp}.png")
        fig, ax = plt.subplots(figsize=(7, 5))
        for impl in IMPLS:
            _line(ax, res, "size", "save torch", impl, STYLE[impl], MiB)
        for ref in ("write_fsync", "write", "memcpy"):
            _line(ax, res, "size", ref, "phys", PHYS_STYLE[ref], MiB)
        ax.set(xscale="log", yscale="log", xlabel="file size", ylabel="seconds", title="torch save_file")
        _xticks(ax, [x / MiB for x in res.xs("size", "save torch")], lambda v: human_size(v * MiB))
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax, 8)
        save(fig, "save.png")
    for section, xlabel, name in (("count", "tensors", "count.png"), ("shards", "shards (same total size)", "shards.png")):
        ws = res.workloads(section)
        if not ws:
            continue
        fig, axes = plt.subplots(1, len(ws), figsize=(5.5 * len(ws), 4.5), squeeze=False)
        for ax, w in zip(axes.flat, ws):
            for impl in IMPLS:
                _line(ax, res, section, w, impl, STYLE[impl])
            xs = res.xs(section, w)
            first = res.med(section, w, xs[0], "ours") if xs else float("nan")
            if section == "count" and len(xs) > 1 and not math.isnan(first):
                ax.plot(xs, [first * x / xs[0] for x in xs], color="gray", linestyle=":", label="linear from the first point")
            ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="seconds", title=w)
            if section == "shards":
                ax.set_xscale("log", base=2)
            _xticks(ax, xs, (lambda v: human_count(int(v))) if section == "count" else (lambda v: f"{v:g}"))
            ax.grid(True, which="both", alpha=0.3)
            _legend(ax, 7)
        save(fig, name)
    ws = res.workloads("remote")
    if ws:
        fig, axes = plt.subplots(2, len(ws), figsize=(4.5 * len(ws), 8), squeeze=False)
        for row, (key, when) in enumerate((("seconds", "first in a process"), ("repeat_s", "repeated"))):
            for ax, w in zip(axes[row], ws):
                for impl in ("ours", "hf", "fsspec"):
                    _line(ax, res, "remote", w, impl, STYLE[impl], key=key)
                ax.set(yscale="log", xlabel="latency per request (ms)", ylabel="seconds", title=f"{w}\n({when})")
                ax.grid(True, which="both", alpha=0.3)
                _legend(ax, 7)
        save(fig, "remote.png")
    return made


# --- main -----------------------------------------------------------------------------------


def options(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes and counts, 1 sample, no pause: a smoke run")
    p.add_argument("--section", action="append", choices=SECTIONS, help="run only these sections (repeatable)")
    p.add_argument("--big", action="store_true", help="also run the over-memory checkpoint (off by default)")
    p.add_argument("-n", "--samples", type=int, help="samples per implementation (default 5; quick 1)")
    p.add_argument("--settle", type=float, help="seconds of pause before each sample (default 3; quick 0)")
    p.add_argument("--min-size", type=parse_size, default=0, help="smallest file size (default: all)")
    p.add_argument("--max-size", type=parse_size, help="largest file size (default 8GiB; quick 2MiB)")
    p.add_argument("--max-count", type=parse_count, help="largest tensor count (default 1M; quick 1k)")
    p.add_argument("--max-shards", type=int, default=32, help="largest shard count (default 32)")
    p.add_argument("--shard-total", type=parse_size, help="total size of the sharded checkpoint (default 1GiB)")
    p.add_argument("--latency", type=float, action="append", help="ms per request (repeatable; default 0 20 100)")
    p.add_argument("--big-factor", type=float, default=1.5, help="over-memory checkpoint size / MemAvailable (1.5)")
    p.add_argument("--big-shard", type=parse_size, default=2 * GiB, help="over-memory checkpoint shard size (2GiB)")
    p.add_argument("--big-samples", type=int, default=1, help="samples per over-memory workload (default 1)")
    p.add_argument("--data", default=os.environ.get("BENCH_DATA", os.path.join(ROOT, "bench-data", "scale")),
                   help="where benchmark files are written (default bench-data/scale; $BENCH_DATA)")
    p.add_argument("--out", default=os.path.join(HERE, "scale"), help="RESULTS.md, results.json and plots go here")
    p.add_argument("--report-only", metavar="JSON", nargs="+",
                   help="redraw RESULTS.md and the plots from results.json files (several: one run each, "
                   "targets per run, samples pooled; their results.json is written to --out too)")
    o = p.parse_args(argv)
    q = o.quick
    o.samples = o.samples or (1 if q else 5)
    o.settle = (0.0 if q else 3.0) if o.settle is None else o.settle
    o.max_size = o.max_size or (2 * MiB if q else 8 * GiB)
    o.sizes = [2 * MiB] if q else [16 * MiB << k for k in range(10)]
    o.max_count = o.max_count or (1000 if q else 1_000_000)
    o.counts = [100, 1000] if q else [1000, 3000, 10_000, 30_000, 100_000, 300_000, 1_000_000]
    o.shard_total = o.shard_total or (4 * MiB if q else GiB)
    o.shard_tensors = 32 if q else 256
    o.shard_counts = [1, 4] if q else [1, 2, 4, 8, 16, 32]
    o.latencies = o.latency or ([0.0, 20.0] if q else [0.0, 20.0, 100.0])
    o.remote_tensors = (16, 64 * KiB) if q else (128, MiB)  # tensors x bytes of the "typical" file
    o.remote_long = 2000 if q else 20_000  # tiny tensors of the long-header file (> 100,000-byte header)
    sections = o.section or ["size", "count", "shards", "remote"]
    if o.big and "big" not in sections:
        sections.append("big")
    o.sections = [s for s in SECTIONS if s in sections]
    return o


def main(argv: Sequence[str] | None = None) -> int:
    o = options(argv)
    os.makedirs(o.out, exist_ok=True)
    if o.report_only:
        docs = []
        for path in o.report_only:
            with open(path) as f:
                docs.append(json.load(f))
        if len(docs) > 1:  # the pooled samples beside the combined report, each tagged with its run
            with open(os.path.join(o.out, "results.json"), "w") as f:
                json.dump({**merge_runs(docs), "runs": docs}, f, indent=1)
        write_report(docs, o.out)
        print(os.path.join(o.out, "RESULTS.md"))
        return 0
    os.makedirs(o.data, exist_ok=True)
    compile_sources(os.path.join(os.path.dirname(HERE), "src"))
    b = Bench(o)
    started = time.time()
    machine = machine_facts(o.data)
    section_s: dict[str, float] = {}
    command = " ".join(["python", os.path.relpath(sys.argv[0], ROOT) if argv is None else "benchmarks/scale.py",
                        *(sys.argv[1:] if argv is None else argv)])

    def document() -> dict[str, Any]:
        return {
            "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
            "finished": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "elapsed_s": time.time() - started,
            "section_s": section_s,
            "command": command,
            "config": {k: v for k, v in vars(o).items() if isinstance(v, (int, float, str, list, bool, type(None)))},
            "machine": machine,
            "loadavg_after": os.getloadavg(),
            "notes": b.notes,
            "skipped": b.skipped,
            "failures": b.failures,
            "big": b.big_facts,
            "records": b.records,
        }

    def save_json() -> dict[str, Any]:
        doc = document()
        tmp = os.path.join(o.out, "results.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, os.path.join(o.out, "results.json"))
        return doc

    # results.json is rewritten after every case: an interrupted run keeps what it measured
    # (redraw it with --report-only).
    b.on_record = save_json
    runners = {"size": section_size, "count": section_count, "shards": section_shards, "remote": section_remote,
               "big": section_big}
    interrupted = False
    try:
        for section in o.sections:
            t0 = time.time()
            log(f"section {section}")
            try:
                runners[section](b)
            finally:
                section_s[section] = time.time() - t0
    except KeyboardInterrupt:
        interrupted = True
        b.notes.append("the run was interrupted: the sections after the last table are missing or partial")
    doc = save_json()
    plots = write_report(doc, o.out)
    print(f"wrote {os.path.join(o.out, 'RESULTS.md')}, results.json and {len(plots)} plots "
          f"({', '.join(plots)}) in {doc['elapsed_s'] / 60:.1f} min")
    if b.failures:
        print(f"{len(b.failures)} sample(s) failed: see RESULTS.md", file=sys.stderr)
        return 1
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
