"""Where the time goes in the scale targets that are hard to meet: ``perf`` profiles of ours,
upstream and the machine's floor doing the same operation, side by side.

    python benchmarks/profile_targets.py --out /tmp/prof                      # every case
    python benchmarks/profile_targets.py --case hot --size 512MiB --out /tmp/prof

Cases (``--case``, repeatable; default all):

- ``hot``: torch ``load_file`` (mmap) of a cached file + reading a byte per page, next to the
  floor (mapping the cached file read-only and reading a byte per page);
- ``save``: torch ``save_file`` of tensors in memory (no fsync on either side), next to a
  plain ``write()`` loop of the same bytes from one buffer as large as the file;
- ``header``: ``safe_open`` + ``keys()`` of a file of 100,000 tiny tensors.

Each implementation runs in its own process under ``perf record -g`` started disabled; the
process imports everything, then turns recording on only around each timed repetition
(perf's control FIFO), so imports and set-up are not in the profile.  Writes ``profile.md``
(median seconds per repetition, the share of samples by shared object, the top symbols) and
the raw ``perf.data`` files into ``--out``.  Needs ``perf`` (Debian: ``linux-perf``) and
permission to profile the kernel (root, or ``perf_event_paranoid`` <= 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import scale
import scale_worker
import worker as base  # the scale benchmark's touch: one byte per page of every tensor

MiB = 1 << 20
CASES = {
    "hot": ("ours", "upstream", "floor"),
    "save": ("ours", "upstream", "floor"),
    "header": ("ours", "upstream"),
}
FLOOR = {"hot": "mmap + touch", "save": "write() loop"}


# --- the child: one implementation, recording only around each repetition ----------------


class _Perf:
    """perf's control FIFO: ``enable`` / ``disable``, each acknowledged."""

    def __init__(self, ctl: str, ack: str) -> None:
        self.ctl = open(ctl, "w")  # noqa: SIM115  (held for the child's life)
        self.ack = open(ack)  # noqa: SIM115

    def _say(self, word: str) -> None:
        self.ctl.write(word + "\n")
        self.ctl.flush()
        self.ack.readline()

    def timed(self, fn: Callable[[], Any]) -> float:
        self._say("enable")
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
        self._say("disable")
        return seconds


def child(case: str, impl: str, a: dict[str, Any], perf: _Perf) -> list[float]:
    import numpy as np
    import torch

    if impl == "ours":
        import pysafetensors as mod
        import pysafetensors.torch as face
    else:
        import safetensors as mod  # type: ignore[no-redef]
        import safetensors.torch as face  # type: ignore[no-redef]
    times = []
    if case == "hot":
        with open(a["path"], "rb") as f:  # the file is cached before the first repetition
            while f.read(64 * MiB):
                pass

        if impl == "floor":
            op = lambda: scale_worker.map_touch(a["path"])
        else:
            op = lambda: base._touch_torch(face.load_file(a["path"]))
        times = [perf.timed(op) for _ in range(a["reps"])]
    elif case == "save":
        size = a["size"]
        tensors = {f"t{i:05d}": torch.full((16 * MiB // 4,), float(i)) for i in range(size // (16 * MiB))}
        flat = np.ones(size, dtype=np.uint8)  # the floor writes from one buffer as large as the file

        def write() -> None:
            with open(a["out"], "wb", buffering=0) as f:
                view = memoryview(flat)
                f.writelines(view[at : at + 16 * MiB] for at in range(0, size, 16 * MiB))

        op = write if impl == "floor" else lambda: face.save_file(tensors, a["out"])
        for _ in range(a["reps"]):
            times.append(perf.timed(op))
            os.unlink(a["out"])
            os.sync()  # each repetition starts with no dirty pages, as the benchmark's samples do
    elif case == "header":

        def keys() -> int:
            with mod.safe_open(a["path"], framework="np") as f:
                return len(f.keys())

        keys()  # first open: lazy imports (msgspec) happen outside the profile
        times = [perf.timed(keys) for _ in range(a["reps"])]
    return times


# --- the parent ------------------------------------------------------------------------------


def _report(data: str, sort: str, limit: int) -> list[tuple[float, str]]:
    """(percent, name) rows of ``perf report --sort sort`` (self time, no call graph)."""
    proc = subprocess.run(
        ["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", sort, "-g", "none",
         "--percent-limit", "0.5"],
        capture_output=True, text=True, check=False,
    )
    rows = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "%" not in line.split()[0]:
            continue
        pct, _, name = line.partition("%")
        try:
            rows.append((float(pct), " ".join(name.split())))
        except ValueError:
            continue
    return rows[:limit]


def run_case(case: str, impl: str, a: dict[str, Any], out: str) -> dict[str, Any]:
    ctl, ack = os.path.join(out, "ctl.fifo"), os.path.join(out, "ack.fifo")
    for p in (ctl, ack):
        if os.path.exists(p):
            os.unlink(p)
        os.mkfifo(p)
    data = os.path.join(out, f"{case}-{impl}.perf.data")
    cmd = ["perf", "record", "-q", "-g", "-F", "1999", "-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o", data,
           "--", sys.executable, os.path.abspath(__file__), "--child", case, impl, json.dumps({**a, "ctl": ctl, "ack": ack})]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{case} {impl}: perf record failed:\n{proc.stderr[-2000:]}")
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"case": case, "impl": impl, "times": times, "median_s": statistics.median(times),
            "dso": _report(data, "dso", 8), "sym": _report(data, "dso,sym", 14)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--case", action="append", choices=list(CASES), help="which cases (repeatable; default all)")
    ap.add_argument("--size", type=scale.parse_size, default=scale.parse_size("512MiB"),
                    help="file size for hot and save (default 512MiB)")
    ap.add_argument("--reps", type=int, default=10, help="repetitions per implementation (default 10)")
    ap.add_argument("--data", default=os.environ.get("BENCH_DATA", os.path.join(scale.ROOT, "bench-data", "profile")))
    ap.add_argument("--out", required=False, default="profile-out")
    o = ap.parse_args()
    if o.child:
        case, impl, args = o.child[0], o.child[1], json.loads(o.child[2])
        print(json.dumps(child(case, impl, args, _Perf(args["ctl"], args["ack"]))))
        return
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed (Debian: apt-get install linux-perf)")
    os.makedirs(o.out, exist_ok=True)
    os.makedirs(o.data, exist_ok=True)
    results = []
    for case in o.case or list(CASES):
        if case == "header":
            path = scale.ensure_many(os.path.join(o.data, "many-100000.safetensors"), 100_000)
            a = {"path": path, "reps": o.reps}
        else:
            path = os.path.join(o.data, f"size-{o.size}.safetensors")
            if case == "hot" and not os.path.exists(path):
                scale.write_checkpoint(path, scale.size_tensors(o.size))
            a = {"path": path, "size": o.size, "out": os.path.join(o.data, "out.safetensors"), "reps": o.reps}
        for impl in CASES[case]:
            r = run_case(case, impl, a, o.out)
            results.append(r)
            print(f"{case} {impl}: median {r['median_s']:.4g} s over {len(r['times'])}", flush=True)
    lines = ["# Profiles of the hard scale targets", "",
             f"- **Date**: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; size {scale.human_size(o.size)}, "
             f"{o.reps} repetitions each; command: `python benchmarks/profile_targets.py "
             + " ".join(sys.argv[1:]) + "`", ""]
    for case in o.case or list(CASES):
        rows = [r for r in results if r["case"] == case]
        up = next((r["median_s"] for r in rows if r["impl"] == "upstream"), float("nan"))
        lines += [f"## {case}", "", "| | median s per repetition | / upstream |", "|---|---|---|"]
        for r in rows:
            label = FLOOR.get(case, "floor") + " (floor)" if r["impl"] == "floor" else r["impl"]
            lines.append(f"| {label} | {r['median_s']:.4g} | {r['median_s'] / up:.2f}x |")
        lines.append("")
        for r in rows:
            lines += [f"### {case}: {r['impl']}", "", "By shared object: " + ", ".join(f"{n} {p:.1f}%" for p, n in r["dso"]), "",
                      "| self % | object, symbol |", "|---|---|"]
            lines += [f"| {p:.1f} | {n} |" for p, n in r["sym"]]
            lines.append("")
    with open(os.path.join(o.out, "profile.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(os.path.join(o.out, "profile.md"))


if __name__ == "__main__":
    main()
