"""Whether a per-call workload meets a full garbage collection inside its timed loop, and by
how many allocations it misses or meets it: deterministic, in a minute, on a busy machine.

    python benchmarks/gc_headroom.py                          # p1 and p3, upstream and ours
    python benchmarks/gc_headroom.py -w p1 -w p4 --baseline-src /tmp/base

One full (generation 2) collection in a process holding torch costs ~85 ms, several times the
p1/p3 loops themselves.  The collector starts one once enough tracked objects have been
allocated since the last, so whether a timed loop meets it is set by what the process
allocated before (its imports, in their order) and by the loop's own allocations.  Every
sample here is ``worker.py``, the process ``run.py`` times (same imports, same order), with
settings applied where its clock would start (``worker._gc_probe``):

- ``headroom``: the allocations left there before the next full collection;
- ``loop``: the loop's own, found by bisection on extra objects made after a forced collection
  (the fewest that make the loop meet the next full one), so they are counted as the
  collector counts them;
- ``margin`` = headroom - loop: below 0 the timed loop meets a full collection.

Bytecode is written first, as ``run.py`` does: a process that compiles what it imports
allocates more.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any

from _common import compile_sources
from run import HERE, WORKER, baseline_src, per_call_workloads


def sample(workload: str, impl: str, args: dict[str, Any], base: str | None, **settings: str) -> dict[str, Any]:
    env = {**os.environ, **{f"BENCH_GC_{k.upper()}": v for k, v in settings.items()}}
    if base:
        env["BENCH_BASE_SRC"] = base
    out = subprocess.run([sys.executable, WORKER, workload, impl, json.dumps(args)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def loop_allocations(workload: str, impl: str, args: dict[str, Any], base: str | None) -> int:
    """The loop's allocations as the collector counts them (to within 10)."""
    after_collect = sample(workload, impl, args, base, collect="1", headroom="1")["gc_headroom"]
    lo, hi = 0, after_collect  # no full collection in the loop with lo extra objects; one (or one before it) with hi
    while hi - lo > 10:
        mid = (lo + hi) // 2
        if sample(workload, impl, args, base, collect="1", junk=str(mid))["gc_full"]:
            hi = mid
        else:
            lo = mid
    return int(after_collect - hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("-w", "--workload", action="append", help="per-call workload keys (default p1, p3)")
    parser.add_argument("--data", default=os.environ.get("BENCH_DATA", os.path.join(os.path.dirname(HERE), "bench-data")))
    parser.add_argument("--baseline-src", help="also ours from another checkout (its root or its src), as run.py")
    opts = parser.parse_args()
    keys = opts.workload or ["p1", "p3"]
    base = baseline_src(opts.baseline_src) if opts.baseline_src else None
    impls = ["upstream", "ours"] + (["base"] if base else [])
    compile_sources(os.path.join(os.path.dirname(HERE), "src"), *([base] if base else []))
    print("| workload | impl | full collections in the loop | headroom | loop | margin |\n|---|---|---|---|---|---|")
    for w in per_call_workloads(opts.data, quick=False):
        if w.key not in keys:
            continue
        for impl in impls:
            full = sample(w.worker, impl, w.args, base)["gc_full"]
            headroom = sample(w.worker, impl, w.args, base, headroom="1")["gc_headroom"]
            loop = loop_allocations(w.worker, impl, w.args, base)
            print(f"| {w.key} | {impl} | {full} | {headroom:,} | {loop:,} | {headroom - loop:,} |", flush=True)


if __name__ == "__main__":
    main()
