"""One sample of the scale benchmark in a fresh process: ``scale_worker.py OP IMPL JSON-ARGS``.

IMPL is ``ours`` or ``upstream`` (the two implementations), ``phys`` (the machine's own
floor: O_DIRECT read, buffered read, write, memcpy), or for remote reads ``hf``
(huggingface_hub's header reader) and ``fsspec`` (fsspec's HTTPFileSystem).  Everything a
sample imports is imported before the clock starts; the number is the operation itself.
Prints one JSON object: ``seconds``, ``cpu_s``, ``peak_rss_mib`` (VmHWM) and facts of the
operation (bytes read from disk, ...).  The timing and touching helpers are ``worker.py``'s.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import worker as base  # run.py's worker: implementation import, touching, timing

MiB = 1 << 20


def _face(impl: str, framework: str) -> Any:
    """``safetensors.torch``/``.numpy`` of the implementation under test."""
    mod = base._impl(impl)
    if framework == "pt":
        import torch  # noqa: F401  (imported before the clock)

        return __import__(f"{mod.__name__}.torch", fromlist=["load_file"])
    import numpy  # noqa: F401

    return __import__(f"{mod.__name__}.numpy", fromlist=["load_file"])


def _touch(framework: str) -> Callable[[dict[str, Any]], float]:
    return base._touch_torch if framework == "pt" else base._touch_numpy


def _disk_read_mib(before: int) -> float:
    return (base._io("read_bytes") - before) / MiB


class _RssSampler:
    """Peak anonymous and file-backed RSS, sampled every 20 ms (VmHWM cannot tell them apart)."""

    def __init__(self) -> None:
        self.peak = {"RssAnon": 0, "RssFile": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            for field in self.peak:
                self.peak[field] = max(self.peak[field], base._status_kib(field))
            if self._stop.wait(0.02):
                return

    def __enter__(self) -> _RssSampler:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict[str, float]:
        return {"peak_rss_anon_mib": self.peak["RssAnon"] / 1024, "peak_rss_file_mib": self.peak["RssFile"] / 1024}


def _repeat(op: Callable[[], Any]) -> float:
    """The same operation again in the same process (its one-time costs paid: lazy imports,
    SSL contexts...); kept out of ``cpu_s``."""
    t0 = time.perf_counter()
    op()
    return time.perf_counter() - t0


# --- local files ---------------------------------------------------------------------------


def op_load(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """``load_file`` (torch or numpy, mmap or pread) + touch every page."""
    face = _face(impl, a["framework"])
    touch = _touch(a["framework"])
    before = base._io("read_bytes")
    seconds, _ = base._timed(lambda: touch(face.load_file(a["path"], backend=a["backend"])))
    return {"seconds": seconds, "disk_read_mib": _disk_read_mib(before)}


def op_save(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """torch ``save_file`` of tensors already in memory; peak RSS growth during the call."""
    face = _face(impl, "pt")
    import torch

    tensors = {f"t{i:05d}": torch.full((n // 4,), float(i), dtype=torch.float32) for i, n in enumerate(a["sizes"])}
    base._reset_peak_rss()
    rss_before = base._status_kib("VmRSS")
    try:
        seconds, _ = base._timed(lambda: face.save_file(tensors, a["out"]))
        hwm = base._status_kib("VmHWM")
    finally:
        if os.path.exists(a["out"]):
            os.unlink(a["out"])
    return {"seconds": seconds, "extra_peak_mib": max(0, hwm - rss_before) / 1024}


def op_open_keys(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Header only: ``safe_open`` + ``keys()``."""
    mod = base._impl(impl)
    import numpy  # noqa: F401

    def op() -> int:
        with mod.safe_open(a["path"], framework="np") as f:
            return len(f.keys())

    seconds, n = base._timed(op)
    return {"seconds": seconds, "tensors": n, "repeat_s": _repeat(op)}


def op_load_many(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """torch ``load_file`` of a file of tiny tensors (the per-tensor cost; nothing to touch)."""
    face = _face(impl, "pt")
    seconds, out = base._timed(lambda: face.load_file(a["path"]))
    return {"seconds": seconds, "tensors": len(out)}


# --- sharded checkpoints ------------------------------------------------------------------


def _shard_paths(index: str) -> list[str]:
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    directory = os.path.dirname(index)
    return [os.path.join(directory, s) for s in sorted(set(weight_map.values()))]


def _describe(f: Any) -> int:
    """Every tensor's dtype and shape from an open handle; returns how many."""
    return len([(f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()])  # noqa: SIM118


def op_shard_open(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Open a sharded checkpoint and list every tensor with its dtype and shape.

    Ours opens the index itself; upstream cannot, so it reads the index JSON and opens every
    shard (what transformers does with it).
    """
    mod = base._impl(impl)
    import numpy  # noqa: F401

    def ours() -> int:
        with mod.safe_open(a["index"], framework="np") as f:
            return _describe(f)

    def upstream() -> int:
        n = 0
        for shard in _shard_paths(a["index"]):
            with mod.safe_open(shard, framework="np") as f:
                n += _describe(f)
        return n

    op = ours if impl == "ours" else upstream
    seconds, n = base._timed(op)
    return {"seconds": seconds, "tensors": n, "repeat_s": _repeat(op)}


def op_shard_load(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """torch load of every tensor of a sharded checkpoint + touch every page.

    ``threads``: 0 loads shard after shard (ours: ``load_file`` on the index; upstream:
    ``load_file`` per shard, as transformers does); N > 0 loads the shards on N threads, one
    ``load_file`` per shard, for both.
    """
    face = _face(impl, "pt")
    threads = int(a.get("threads", 0))
    shards = _shard_paths(a["index"])

    def sequential() -> dict[str, Any]:
        if impl == "ours":
            return dict(face.load_file(a["index"]))
        out: dict[str, Any] = {}
        for shard in shards:
            out.update(face.load_file(shard))
        return out

    def parallel() -> dict[str, Any]:
        from concurrent.futures import ThreadPoolExecutor

        out: dict[str, Any] = {}
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for part in pool.map(face.load_file, shards):
                out.update(part)
        return out

    load = parallel if threads else sequential
    seconds, _ = base._timed(lambda: base._touch_torch(load()))
    return {"seconds": seconds}


# --- remote ---------------------------------------------------------------------------------


def _fsspec_header(fs: Any, url: str) -> tuple[dict[str, Any], int]:
    """The header as huggingface_hub reads it: the first 100,001 bytes, a second request only
    when the header is longer."""
    head = fs.cat_file(url, start=0, end=100_001)
    n = int.from_bytes(head[:8], "little")
    raw = head[8 : 8 + n] if 8 + n <= len(head) else fs.cat_file(url, start=8, end=8 + n)
    return json.loads(raw), 8 + n


def _remote_op(impl: str, a: dict[str, Any], tensor: bool) -> Callable[[], int]:
    """The remote operation of ``impl``, everything it imports imported."""
    if impl == "hf":
        from huggingface_hub import HfApi

        api = HfApi(endpoint=a["endpoint"], token=False)
        return lambda: len(api.parse_safetensors_file_metadata(repo_id=a["repo"], filename=a["filename"]).tensors)
    import numpy as np

    if impl == "fsspec":
        import fsspec

        dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "U8": np.uint8}

        def fsspec_op() -> int:
            fs = fsspec.filesystem("http", skip_instance_cache=True)
            header, data_start = _fsspec_header(fs, a["url"])
            if not tensor:
                return len(header) - ("__metadata__" in header)
            info = header[a["name"]]
            begin, end = info["data_offsets"]
            raw = fs.cat_file(a["url"], start=data_start + begin, end=data_start + end)
            return int(np.frombuffer(raw, dtype=dtypes[info["dtype"]]).reshape(info["shape"]).nbytes)

        return fsspec_op
    mod = base._impl(impl)

    def ours() -> int:
        with mod.safe_open(a["url"], framework="np") as f:
            return int(f.get_tensor(a["name"]).nbytes) if tensor else len(f.keys())

    return ours


def _remote(impl: str, a: dict[str, Any], tensor: bool) -> dict[str, Any]:
    op = _remote_op(impl, a, tensor)
    seconds, n = base._timed(op)
    # CLOCK_MONOTONIC is system-wide: the runner's server splits its request log at this mark
    # into the first operation's requests and the repeat's.
    mark = time.monotonic()
    return {"seconds": seconds, "result": n, "mark": mark, "repeat_s": _repeat(op)}


def op_remote_header(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Every tensor's name from a file served over HTTP; done twice (``repeat_s``: the second
    time in the same process, with a new handle / filesystem / session state as each tool keeps)."""
    return _remote(impl, a, tensor=False)


def op_remote_tensor(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """One tensor (numpy) from a file served over HTTP: header, then the tensor's bytes; twice."""
    return _remote(impl, a, tensor=True)


# --- the machine's floor --------------------------------------------------------------------


def op_odirect_read(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Sequential O_DIRECT read of the whole file in 4 MiB blocks into one aligned buffer
    (what ``dd iflag=direct bs=4M`` does): the disk's rate, no page cache."""
    block = int(a.get("block", 4 * MiB))
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    buf.write(b"\0" * block)  # faulted in before the clock
    fd = os.open(a["path"], os.O_RDONLY | os.O_DIRECT)
    try:

        def op() -> int:
            offset = 0
            while True:
                n = os.preadv(fd, [buf], offset)
                offset += n
                if n < block:
                    return offset

        seconds, nbytes = base._timed(op)
    finally:
        os.close(fd)
    return {"seconds": seconds, "bytes": nbytes}


def op_cold_read(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Buffered sequential read of the file (evicted by the runner) in 16 MiB reads."""
    buf = bytearray(16 * MiB)
    before = base._io("read_bytes")

    def op() -> int:
        total = 0
        with open(a["path"], "rb", buffering=0) as f:
            while n := f.readinto(buf):
                total += n
        return total

    seconds, nbytes = base._timed(op)
    return {"seconds": seconds, "bytes": nbytes, "disk_read_mib": _disk_read_mib(before)}


def op_write(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Write ``size`` bytes to a new file in 16 MiB writes; ``fsync`` before close when asked."""
    size = int(a["size"])
    block = os.urandom(min(size, 16 * MiB))

    def op() -> int:
        written = 0
        with open(a["out"], "wb", buffering=0) as f:
            while written < size:
                written += f.write(block[: size - written] if size - written < len(block) else block)
            if a["fsync"]:
                os.fsync(f.fileno())
        return written

    try:
        seconds, nbytes = base._timed(op)
    finally:
        if os.path.exists(a["out"]):
            os.unlink(a["out"])
    return {"seconds": seconds, "bytes": nbytes}


def op_memcpy(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """numpy copy of ``size`` bytes into a preallocated, faulted-in buffer."""
    import numpy as np

    size = int(a["size"])
    src = np.ones(size, dtype=np.uint8)
    dst = np.zeros(size, dtype=np.uint8)
    dst[::4096] = 1  # every page of the destination is mapped before the clock
    seconds, _ = base._timed(lambda: np.copyto(dst, src))
    return {"seconds": seconds, "bytes": size}


def map_touch(path: str) -> int:
    """Map the whole (cached) file read-only and read one byte per 4 KiB page: the page-table
    work a hot mmap load must do however it is written (``_touch`` reads the same pages), and
    nothing else, so no hot mmap load can beat it."""
    import numpy as np

    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    pages = np.frombuffer(m, dtype=np.uint8)[::4096]
    return int(pages.sum()) + len(pages)


def op_map_touch(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """``map_touch`` of the file: the floor of a hot mmap load."""
    import numpy  # noqa: F401  (imported before the clock, as the loads import their framework)

    seconds, _ = base._timed(lambda: map_touch(a["path"]))
    return {"seconds": seconds, "bytes": int(a["size"])}


# --- the over-memory checkpoint -----------------------------------------------------------


def op_big(impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Load a sharded checkpoint larger than free memory; report peak RSS (total, anon, file).

    ``mode``: ``get_tensor`` (one tensor at a time, each touched and dropped), ``load_file``
    (every tensor kept, every page touched; ``backend`` mmap or pread).  Upstream cannot open an
    index, so it goes shard by shard with the same calls.  An exception is a result here (the
    pread backend should refuse up front): it is reported, not raised.
    """
    mode, backend = a["mode"], a.get("backend", "mmap")
    mod = base._impl(impl)
    import torch  # noqa: F401

    face = __import__(f"{mod.__name__}.torch", fromlist=["load_file"])
    shards = _shard_paths(a["index"])

    def one_at_a_time() -> int:
        n = 0
        for path in [a["index"]] if impl == "ours" else shards:
            with mod.safe_open(path, framework="pt", backend=backend) as f:
                for k in f.keys():  # noqa: SIM118  (safe_open is not a mapping)
                    t = f.get_tensor(k)
                    base._touch_torch({k: t})
                    del t
                    n += 1
        return n

    def everything() -> int:
        if impl == "ours":
            out = dict(face.load_file(a["index"], backend=backend))
        else:
            out = {}
            for shard in shards:
                out.update(face.load_file(shard, backend=backend))
        base._touch_torch(out)
        return len(out)

    result: dict[str, Any] = {}
    with _RssSampler() as rss:
        try:
            seconds, n = base._timed(one_at_a_time if mode == "get_tensor" else everything)
            result.update(seconds=seconds, tensors=n, status="loaded")
        except Exception as e:  # noqa: BLE001  (the refusal is the measurement)
            result.update(seconds=float("nan"), status="refused", error=f"{type(e).__name__}: {e}"[:500])
    result.update(rss.report())
    return result


OPS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    name[3:]: fn for name, fn in globals().items() if name.startswith("op_") and callable(fn)
}


if __name__ == "__main__":
    t0 = time.perf_counter()
    result = OPS[sys.argv[1]](sys.argv[2], json.loads(sys.argv[3]))
    result["peak_rss_mib"] = base._status_kib("VmHWM") / 1024  # the OS's high-water mark
    result["cpu_s"] = sum(base._CPU)
    result["process_s"] = time.perf_counter() - t0
    print(json.dumps(result))
