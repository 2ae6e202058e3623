"""Loading a whole sharded checkpoint: shards one after another vs. read concurrently.

    python benchmarks/sharded_parallel.py              # 384 MiB in 6 shards, 64 MiB in 8, HTTP
    python benchmarks/sharded_parallel.py --quick      # a smoke run (seconds)
    python benchmarks/sharded_parallel.py -n 7 --only pread

Both sides are this checkout's code.  ``seq`` is the shard-by-shard load: each shard opened
when reached and read with ``SafeFile.raw_all`` (its own parallel reads within the shard),
as ``ShardedFile.raw_all`` did before it read shards concurrently.  ``par`` is
``safe_open(index).get_tensors()`` as it is now: copying shards (pread, HTTP) read by one
pool that runs ahead of the consumer (``ShardedFile._read_ahead``); mapped shards are handed
out as before (no reading to overlap), so mmap rows measure that nothing got worse.

Every sample is a fresh process; ``seq`` and ``par`` alternate sample by sample; each sample
starts after a pause (``--settle``) during which a hot checkpoint is read through (DAMON on
this VM pages out idle page cache, see run.py ``_keep_warm``), while a cold one is evicted
(``POSIX_FADV_DONTNEED``) first.  A sample is the load plus touching one byte per page of
every array (a map's pages are read then), numpy face.  HTTP rows serve the files from this
process (tests/servers.py, 127.0.0.1) with a delay before every reply.  Every sample is
printed, with medians and the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SRC = os.path.join(ROOT, "src")
sys.path.insert(0, HERE)
MiB = 1 << 20


def _make(directory: str, shards: int, shard_mib: int) -> str:
    """A checkpoint of ``shards`` shards of ``shard_mib`` MiB (4 F32 tensors each), made once."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        return index
    code = f"""
import numpy as np, sys
sys.path.insert(0, {SRC!r})
from pysafetensors.numpy import save_sharded
rng = np.random.default_rng(0)
n = {shard_mib} * {MiB} // 16
arrays = {{f"layer.{{i:03d}}.weight": rng.integers(0, 1 << 30, n, dtype=np.int32).view(np.float32)
          for i in range({shards} * 4)}}
save_sharded(arrays, {directory!r}, max_shard_size={shard_mib} * {MiB} + 4096)
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    return index


def _files(index: str) -> list[str]:
    directory = os.path.dirname(index)
    return [os.path.join(directory, n) for n in sorted(os.listdir(directory)) if n.endswith(".safetensors")]


# --- the worker: one sample in a fresh process ---------------------------------------------------


def worker(mode: str, location: str, backend: str | None) -> dict[str, Any]:
    sys.path.insert(0, SRC)
    import numpy as np

    import pysafetensors
    from pysafetensors import safe_open
    from pysafetensors._adapters.numpy import to_numpy
    from pysafetensors.handle import open_file

    assert pysafetensors.__file__ and pysafetensors.__file__.startswith(SRC)

    def sequential() -> dict[str, Any]:
        f = open_file(location, backend)
        try:
            out = {}
            for shard in f.shard_names:  # opened when reached, read with its own threads
                ignored = set(f.check(shard, complete=True).ignored)
                for raw in f.shard(shard).raw_all():
                    if raw.name not in ignored:
                        out[raw.name] = to_numpy(raw)
            return out
        finally:
            f.close()

    def parallel() -> dict[str, Any]:
        with safe_open(location, "np", backend=backend) as f:
            return f.get_tensors()

    load = sequential if mode == "seq" else parallel
    t0 = time.perf_counter()
    arrays = load()
    loaded = time.perf_counter() - t0
    total = 0
    for a in arrays.values():
        total += int(a.reshape(-1).view(np.uint8)[::4096].sum())
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "load_seconds": loaded, "tensors": len(arrays), "checksum": total}


# --- the parent ------------------------------------------------------------------------------------


def _sample(mode: str, location: str, backend: str | None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", mode, location, backend or ""],
        check=True, capture_output=True, text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_case(name: str, index: str, location: str, backend: str | None, cold: bool, n: int, settle: float) -> dict[str, Any]:
    from run import _evict, _keep_warm

    files = _files(index)
    samples: dict[str, list[dict[str, Any]]] = {"seq": [], "par": []}
    load_before = _loadavg()
    for i in range(n):
        for mode in ("seq", "par") if i % 2 == 0 else ("par", "seq"):
            if cold:
                for p in files:
                    _evict(p)
                time.sleep(settle)
            else:
                for p in files:
                    _keep_warm(p, 0)
                time.sleep(settle)
                for p in files:
                    _keep_warm(p, 0)
            samples[mode].append(_sample(mode, location, backend))
    sums = {s["checksum"] for v in samples.values() for s in v}
    assert len(sums) == 1, f"{name}: the two ways loaded different data"
    seq = statistics.median(s["seconds"] for s in samples["seq"])
    par = statistics.median(s["seconds"] for s in samples["par"])
    return {
        "case": name,
        "seq": [round(s["seconds"], 4) for s in samples["seq"]],
        "par": [round(s["seconds"], 4) for s in samples["par"]],
        "seq_median": round(seq, 4),
        "par_median": round(par, 4),
        "ratio": round(par / seq, 3),
        "loadavg_before": load_before,
        "loadavg_after": _loadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    p.add_argument("-n", type=int, help="samples per side and case (default 5; 2 with --quick)")
    p.add_argument("--settle", type=float, default=2.0, help="pause before each sample, seconds (default 2)")
    p.add_argument("--data", default=os.path.join(ROOT, "bench-data", "sharded"), help="where the checkpoints are made")
    p.add_argument("--quick", action="store_true", help="tiny checkpoints, 2 samples: a smoke run")
    p.add_argument("--only", action="append", default=[], help="run only cases whose name contains this")
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    if args.worker:
        mode, location, backend = args.worker
        print(json.dumps(worker(mode, location, backend or None)))
        return 0
    n, scale = (args.n or 2, 16) if args.quick else (args.n or 5, 1)
    big = _make(os.path.join(args.data, f"big-{6 * 64 // scale}m-6"), 6, 64 // scale)
    small = _make(os.path.join(args.data, f"small-{8 * 8 // scale}m-8"), 8, max(1, 8 // scale))
    cases: list[tuple[str, str, str | None, bool]] = []
    for index, what in ((big, f"{6 * 64 // scale} MiB in 6 shards"), (small, f"{8 * 8 // scale} MiB in 8 shards")):
        for backend in ("mmap", "pread"):
            for cold in (False, True):
                cases.append((f"{what}, {backend}, {'cold' if cold else 'hot'}", index, backend, cold))
    results = []
    for name, index, backend, cold in cases:
        if args.only and not any(o in name for o in args.only):
            continue
        results.append(run_case(name, index, index, backend, cold, n, args.settle))
        print(json.dumps(results[-1]), flush=True)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from servers import RangeServer

    files = {f"repo/{os.path.basename(p)}": Path(p).read_bytes() for p in [*_files(small), small]}
    for latency in (0.0, 0.02, 0.1):
        name = f"{8 * 8 // scale} MiB in 8 shards, HTTP, {int(latency * 1000)} ms per request"
        if args.only and not any(o in name for o in args.only):
            continue
        with RangeServer(files, latency=latency) as server:
            url = server.url("repo/model.safetensors.index.json")
            results.append(run_case(name, small, url, None, False, n, 0.2))
        print(json.dumps(results[-1]), flush=True)
    print()
    print("| case | seq median s | par median s | par/seq | seq samples | par samples | load avg before / after |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['case']} | {r['seq_median']} | {r['par_median']} | {r['ratio']}x | "
            f"{' '.join(map(str, r['seq']))} | {' '.join(map(str, r['par']))} | {r['loadavg_before']} / {r['loadavg_after']} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
