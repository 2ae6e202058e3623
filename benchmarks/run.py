"""Benchmark pysafetensors against upstream safetensors, in the same run.

    python benchmarks/run.py                  # issue-sized workloads (512 MiB files...)
    python benchmarks/run.py --quick          # tiny smoke run (seconds)
    python benchmarks/run.py -w 1 -w 8 -n 7  # some workloads, 7 samples each

Every sample is a fresh process (``worker.py``); the two implementations alternate sample by
sample so background load hits both alike, and each sample starts after a pause (``--settle``,
3 s) so that it meets the memory state of an idle machine rather than whatever the sample
before it freed.  Reports the median seconds of each (and the best
sample of each, for the code's own cost when the machine adds nothing), the ratio
ours/upstream, the peak RSS of the sample processes (``os.wait4`` rusage, from the OS) and
workload facts (RSS growth while saving, bytes read from disk for a slice).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SampleFailed, run_sample
from _common import ensure_many as _ensure_many
from _common import evict as _evict
from _common import keep_warm as _keep_warm
from _common import resident_pct as _resident_pct

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "worker.py")
IMPLS = ("upstream", "ours")
MiB = 1 << 20


@dataclass
class Workload:
    key: str
    title: str
    worker: str
    args: dict[str, Any]
    cold: bool = False  # evict the file from the page cache before each sample
    target: float = 0.8
    samples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _make_file(path: str, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """Write a benchmark file with upstream (so neither side reads its own output)."""
    import numpy as np
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    arrays = {}
    for name, (dtype, shape) in tensors.items():
        n = int(np.prod(shape)) if shape else 1
        arrays[name] = rng.integers(0, 255, size=n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype).reshape(shape)
    save_file(arrays, path, metadata={"format": "pt"})


def _ensure(path: str, tensors: dict[str, tuple[str, list[int]]]) -> str:
    if not os.path.exists(path):
        # In a child process: the parent stays small, so forked samples start small too.
        code = f"import sys; sys.path.insert(0, {HERE!r}); import run; run._make_file({path!r}, {tensors!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def workloads(data: str, quick: bool) -> list[Workload]:
    scale = 1 if not quick else 64  # quick: 8 MiB instead of 512 MiB
    big = _ensure(
        os.path.join(data, f"big-{512 // scale}m.safetensors"),
        {f"layer{i:02d}.weight": ("float32", [2048 // scale, 2048]) for i in range(32)},
    )
    rng = random.Random(0)
    small_sizes = [rng.choice([4, 16, 64, 256]) * 1024 for _ in range(2000 // (1 if not quick else 10))]
    small = _ensure(
        os.path.join(data, f"small-{len(small_sizes)}.safetensors"),
        {f"lora.{i:04d}.weight": ("float32", [n // 4]) for i, n in enumerate(small_sizes)},
    )
    many = _ensure_many(os.path.join(data, f"many-{100_000 // scale}.safetensors"), 100_000 // scale)
    rows = 262_144 // scale  # 1 GiB of F32 rows of 1024
    huge = _ensure(os.path.join(data, f"slice-{1024 // scale}m.safetensors"), {"w": ("float32", [rows, 1024])})
    big_sizes = [16 * MiB // scale] * 32
    out = os.path.join(data, "out.safetensors")
    return [
        Workload("1", "torch load_file + touch every page, 512 MiB, 32 F32", "load_torch", {"path": big}),
        Workload("2", "numpy load_file + touch every page, same file", "load_numpy", {"path": big}),
        Workload("3", "torch save_file, same tensors (peak RSS growth)", "save_torch", {"sizes": big_sizes, "out": out}),
        Workload("4a", "2,000 small tensors (4-256 KiB): load + touch", "load_small", {"path": small}),
        Workload("4b", "2,000 small tensors (4-256 KiB): save", "save_small", {"sizes": small_sizes, "out": out}),
        Workload("5", "open + keys() + metadata(), 100,000 tensors", "open_many", {"path": many}, target=1.5),
        Workload("6", "get_slice 64 rows of a 1 GiB tensor, cold cache", "slice", {"path": huge, "rows": 64, "start": rows // 2}, cold=True),
        Workload("7", "torch load_file backend=pread + touch, 512 MiB", "load_pread", {"path": big, "backend": "pread"}),
        Workload("8", "workload 1 with the file evicted (cold cache)", "load_torch_cold", {"path": big}, cold=True),
    ]


def sample(w: Workload, impl: str, settle: float = 0.0) -> dict[str, Any]:
    if w.cold:
        _evict(w.args["path"])
    if w.worker.startswith("save"):
        os.sync()  # no dirty pages left from the previous sample to throttle this one
    # Let the machine's memory reach its idle state before the sample: on a VM with free
    # page reporting, memory the previous sample freed is handed back to the host after
    # ~2 s and costs a host fault per page when reused; without a pause a sample's cost
    # depends on what the sample before it freed (RESULTS.md, "Why the numbers swing").
    # A hot workload's file is read through during the pause (see _keep_warm).
    if not w.cold and "path" in w.args:
        _keep_warm(w.args["path"], settle)
    elif settle:
        time.sleep(settle)
    resident = _resident_pct(w.args["path"]) if "path" in w.args else None
    try:
        result = run_sample([sys.executable, WORKER, w.worker, impl, json.dumps(w.args)])
    except SampleFailed as e:
        raise SystemExit(f"workload {w.key} ({impl}) failed:\n{e.stderr}") from None
    if resident is not None:
        result["resident_pct"] = resident
    return result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(ws: list[Workload]) -> str:
    lines = [
        "| # | workload | upstream s | ours s | ours/upstream | target | best of n: up / ours (ratio) | CPU s up / ours (ratio) | extra |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for w in ws:
        up = median([s["seconds"] for s in w.samples["upstream"]])
        ours = median([s["seconds"] for s in w.samples["ours"]])
        ratio = ours / up if up else float("nan")
        # The fastest sample of each: what the code costs when the machine's memory state
        # (see RESULTS.md: proactive reclaim, free page reporting) does not add to it.
        best_up = min(s["seconds"] for s in w.samples["upstream"])
        best_ours = min(s["seconds"] for s in w.samples["ours"])
        best = f"{best_up:.4f} / {best_ours:.4f} ({best_ours / best_up if best_up else float('nan'):.2f}x)"
        extra = []
        for key in ("extra_peak_mib", "disk_read_kib", "rchar_kib", "peak_rss_mib", "resident_pct"):
            if key in w.samples["ours"][0]:
                u = median([s[key] for s in w.samples["upstream"]])
                o = median([s[key] for s in w.samples["ours"]])
                digits = 1 if key == "resident_pct" else 0
                extra.append(f"{key}: upstream {u:.{digits}f}, ours {o:.{digits}f}")
        ok = "ok" if ratio <= w.target else "MISSED"
        cpu_up = median([s["cpu_s"] for s in w.samples["upstream"]])
        cpu_ours = median([s["cpu_s"] for s in w.samples["ours"]])
        cpu = f"{cpu_up:.3f} / {cpu_ours:.3f} ({cpu_ours / cpu_up if cpu_up else float('nan'):.2f}x)"
        if "ours_durable" in w.samples:
            durable = median([s["seconds"] for s in w.samples["ours_durable"]])
            extra.append(f"ours durable=True (fsync): {durable:.4f} s ({durable / up:.2f}x)")
        lines.append(
            f"| {w.key} | {w.title} | {up:.4f} | {ours:.4f} | **{ratio:.2f}x** | <= {w.target}x {ok} | {best} | {cpu} | {'; '.join(extra)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny files, 1 sample each: a smoke run")
    p.add_argument("-n", "--samples", type=int, default=None, help="samples per implementation (default 5; quick 1)")
    p.add_argument("-w", "--workload", action="append", help="run only these workload keys (1, 2, 4a, ...)")
    p.add_argument("--data", default=os.environ.get("BENCH_DATA", os.path.join(os.path.dirname(HERE), "bench-data")))
    p.add_argument(
        "--settle",
        type=float,
        default=None,
        help="seconds to sleep before each sample, so every sample starts from an idle machine's "
        "memory state (default 3; quick 0)",
    )
    p.add_argument("--json", dest="json_out", help="also write every sample to this JSON file")
    opts = p.parse_args(argv)
    samples = opts.samples or (1 if opts.quick else 5)
    if opts.settle is None:
        opts.settle = 0.0 if opts.quick else 3.0
    os.makedirs(opts.data, exist_ok=True)
    started = time.time()
    ws = workloads(opts.data, opts.quick)
    if opts.workload:
        ws = [w for w in ws if w.key in opts.workload]
    for w in ws:
        impls = IMPLS + (("ours_durable",) if w.worker.startswith("save") else ())
        w.samples = {impl: [] for impl in impls}
        for i in range(samples):
            # Alternate which implementation goes first, so neither always runs warmer.
            order = impls if i % 2 == 0 else impls[::-1]
            for impl in order:
                w.samples[impl].append(sample(w, impl, opts.settle))
        print(f"workload {w.key} done", file=sys.stderr)
    load = os.getloadavg()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
        f"load average before/after run: {load[2]:.2f}/{load[0]:.2f}; "
        f"{samples} samples each; settle {opts.settle:g} s; {time.time() - started:.0f} s total"
    )
    print(report(ws))
    if opts.json_out:
        with open(opts.json_out, "w") as f:
            json.dump({w.key: w.samples for w in ws}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
