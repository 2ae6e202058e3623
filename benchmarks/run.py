"""Benchmark pysafetensors against upstream safetensors, in the same run.

    python benchmarks/run.py                  # issue-sized workloads (512 MiB files...)
    python benchmarks/run.py --quick          # tiny smoke run (seconds)
    python benchmarks/run.py -w 1 -w 8 -n 7  # some workloads, 7 samples each
    python benchmarks/run.py --suite per-call # the per-call workloads (p*, o*, s*, m*, c*, v*)
    python benchmarks/run.py --baseline-src /tmp/bcc -w 1 -w 3   # also another checkout of ours
    python benchmarks/run.py -n 7 --record benchmarks/runs/2026-11-30-bulk.md   # and keep the log

Every sample is a fresh process (``worker.py``); the two implementations alternate sample by
sample so background load hits both alike, and each sample starts after a pause (``--settle``,
3 s) so that it meets the memory state of an idle machine rather than whatever the sample
before it freed.  Reports the median seconds of each (and the best
sample of each, for the code's own cost when the machine adds nothing), the ratio
ours/upstream, the peak RSS of the sample processes (``os.wait4`` rusage, from the OS) and
workload facts (RSS growth while saving, bytes read from disk for a slice).

``--suite bulk`` (the default) runs the workloads that move bytes (1-8); ``--suite per-call``
the fixed costs real users pay per call, per tensor and per process: transformers' loop
(``safe_open`` then ``get_slice(k)`` or ``get_tensor(k)`` for every key), the first open in a
process at several tensor counts, opening a sharded checkpoint through its index, memory while
reading a sharded checkpoint one tensor at a time, and the CLI's start and answers on a
100,000-tensor file (against ``python -c "import numpy"`` and upstream's header-only open in a
fresh process).  ``--suite all`` runs both.  ``--baseline-src DIR`` adds a third side, ours
imported from another checkout (``base``: a checkout's root, e.g. ``git worktree add /tmp/bcc
bcc5b26``, or its ``src``), alternating with the other two, so a regression between two commits
is told from the machine's swing in one run.  ``--record FILE`` also writes the run as a log for
``benchmarks/runs/`` (machine, command, date, code, the table and every sample).
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
from _common import compile_sources as _compile_sources
from _common import ensure_many as _ensure_many
from _common import evict as _evict
from _common import keep_warm as _keep_warm
from _common import resident_pct as _resident_pct
from _common import write_checkpoint as _write_checkpoint
from _common import write_sharded as _write_sharded

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
    suite: str = "bulk"
    hot: list[str] = field(default_factory=list)  # files kept in the page cache (default: args["path"])
    #: the target is on ours' median seconds, not on the ratio (no upstream equivalent)
    absolute: bool = False


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


def _llama_like(layers: int = 32, hidden: int = 256, intermediate: int = 704, vocab: int = 14_000
                ) -> list[tuple[str, str, list[int]]]:
    """A llama-shaped BF16 checkpoint: 9 tensors per layer + embeddings, final norm, lm_head
    (32 layers: 291 tensors, about 65 MB), named and ordered as transformers saves them."""
    per_layer = [
        ("input_layernorm.weight", [hidden]),
        ("mlp.down_proj.weight", [hidden, intermediate]),
        ("mlp.gate_proj.weight", [intermediate, hidden]),
        ("mlp.up_proj.weight", [intermediate, hidden]),
        ("post_attention_layernorm.weight", [hidden]),
        ("self_attn.k_proj.weight", [hidden, hidden]),
        ("self_attn.o_proj.weight", [hidden, hidden]),
        ("self_attn.q_proj.weight", [hidden, hidden]),
        ("self_attn.v_proj.weight", [hidden, hidden]),
    ]
    tensors = [("lm_head.weight", "BF16", [vocab, hidden]), ("model.embed_tokens.weight", "BF16", [vocab, hidden])]
    tensors += [(f"model.layers.{i}.{n}", "BF16", shape) for i in range(layers) for n, shape in per_layer]
    tensors.append(("model.norm.weight", "BF16", [hidden]))
    return sorted(tensors)


def _raw(path: str, tensors: list[tuple[str, str, list[int]]]) -> str:
    if not os.path.exists(path):
        _write_checkpoint(path, tensors)
    return path


def per_call_workloads(data: str, quick: bool) -> list[Workload]:
    scale = 1 if not quick else 10
    small = _raw(os.path.join(data, f"pc-small-{2000 // scale}.safetensors"),
                 [(f"model.layers.{i:04d}.weight", "F32", [16, 64]) for i in range(2000 // scale)])
    llama = _raw(os.path.join(data, f"pc-llama-{32 // scale}.safetensors"), _llama_like(layers=32 // scale))
    out = [
        Workload("p1", "safe_open + get_slice(k)[:] every key, 2,000 F32 16x64", "slice_loop", {"path": small},
                 target=1.0),
        Workload("p2", "safe_open + get_slice(k)[:] every key, llama-like 291 BF16 (65 MB)", "slice_loop",
                 {"path": llama}, target=0.8),
        Workload("p3", "safe_open + get_tensor(k) every key, 2,000 F32 16x64", "get_tensor_loop", {"path": small},
                 target=1.0),
        Workload("p4", "safe_open + get_slice(k) every key, not materialized, 2,000 tensors", "slice_loop",
                 {"path": small, "lazy": True}, target=1.0),
        Workload("p5", "safe_open + get_slice(k) every key, not materialized, llama-like", "slice_loop",
                 {"path": llama, "lazy": True}, target=1.0),
        Workload("p6", "safe_open + get_tensor(k) every key, llama-like", "get_tensor_loop", {"path": llama},
                 target=1.0),
        Workload("o291", "first safe_open + keys() in a process, 291 tensors", "first_open", {"path": llama},
                 target=1.0),
    ]
    for count in (1000, 2000, 10_000, 100_000):
        n = count // scale
        path = _ensure_many(os.path.join(data, f"many-{n}.safetensors"), n)
        label = f"{n // 1000}k" if n >= 1000 else str(n)
        out.append(Workload(f"o{label}", f"first safe_open + keys() in a process, {n:,} tensors", "first_open",
                            {"path": path}, target=0.9 if count == 100_000 else 1.0))
    for shards in (1, 2, 4, 8, 16, 32):
        index = _write_sharded(os.path.join(data, f"pc-shards-{shards}"), 64 * MiB // scale, 256, shards)
        out.append(Workload(f"s{shards}", f"sharded open through the index + every dtype/shape, {shards} shards "
                            "(upstream: every shard)", "shard_open", {"index": index}, target=1.5,
                            hot=_shard_files(index)))
    index = _write_sharded(os.path.join(data, "pc-rss-8"), 1024 * MiB // scale, 64, 8)
    out.append(Workload("m8", "get_tensor one at a time over a 1 GiB index of 8 shards, touched and dropped "
                        "(ratio of peak RSS growth in extra)", "shard_get_tensor", {"index": index}, target=2.0,
                        hot=_shard_files(index)))
    many = _ensure_many(os.path.join(data, f"many-{100_000 // scale}.safetensors"), 100_000 // scale)
    out += [
        Workload("c1", "CLI --version (reference: python -c 'import numpy')", "cli",
                 {"argv": ["--version"], "reference": "numpy"}, target=1.0),
        Workload("c2", "CLI --help (reference: python -c 'import numpy')", "cli",
                 {"argv": ["--help"], "reference": "numpy"}, target=1.0),
        Workload("c3", "CLI inspect, 100k tensors (reference: upstream header-only open, fresh process)", "cli",
                 {"argv": ["inspect", many], "reference": "header", "path": many}, target=3.0),
        Workload("c4", "CLI validate, 100k tensors (same reference)", "cli",
                 {"argv": ["validate", many], "reference": "header", "path": many}, target=3.0),
        Workload("c5", "CLI inspect --tree, 100k tensors (same reference)", "cli",
                 {"argv": ["inspect", "--tree", many], "reference": "header", "path": many}, target=4.0),
        Workload("v1", "view prints its URL, 100k tensors (target: ours <= 1.5 s; reference as c3)", "view_url",
                 {"path": many, "reference": "header"}, target=1.5, absolute=True),
    ]
    for w in out:
        w.suite = "per-call"
    return out


def _shard_files(index: str) -> list[str]:
    with open(index) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    return [os.path.join(os.path.dirname(index), s) for s in shards]


def sample(w: Workload, impl: str, settle: float = 0.0) -> dict[str, Any]:
    if w.cold:
        _evict(w.args["path"])
    if w.worker.startswith("save"):
        os.sync()  # no dirty pages left from the previous sample to throttle this one
    # Let the machine's memory reach its idle state before the sample: on a VM with free
    # page reporting, memory the previous sample freed is handed back to the host after
    # ~2 s and costs a host fault per page when reused; without a pause a sample's cost
    # depends on what the sample before it freed (runs/2026-11-22-bulk.md, "Why the numbers swing").
    # A hot workload's file is read through during the pause (see _keep_warm).
    hot = w.hot or ([w.args["path"]] if "path" in w.args else [])
    if not w.cold and hot:
        _keep_warm(hot, settle)
    elif settle:
        time.sleep(settle)
    resident = _resident_pct(hot) if hot else None
    try:
        result = run_sample([sys.executable, WORKER, w.worker, impl, json.dumps(w.args)])
    except SampleFailed as e:
        raise SystemExit(f"workload {w.key} ({impl}) failed:\n{e.stderr}") from None
    if resident is not None:
        result["resident_pct"] = resident
    return result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def report(ws: list[Workload]) -> str:
    """One markdown table row per workload: medians, ratio ours/upstream (and base/upstream and
    ours/base with a baseline side), the target, best samples, CPU seconds and workload facts."""
    with_base = any("base" in w.samples for w in ws)
    head = "| # | workload | upstream s | ours s | ours/upstream |"
    head += " base s | base/upstream | ours/base |" if with_base else ""
    head += " target | best of n: up / ours (ratio) | CPU s up / ours (ratio) | extra |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for w in ws:
        up = median([s["seconds"] for s in w.samples["upstream"]])
        ours = median([s["seconds"] for s in w.samples["ours"]])
        ratio = _ratio(ours, up)
        # The fastest sample of each: what the code costs when the machine's memory state
        # (see runs/2026-11-22-bulk.md: proactive reclaim, free page reporting) does not add to it.
        best_up = min(s["seconds"] for s in w.samples["upstream"])
        best_ours = min(s["seconds"] for s in w.samples["ours"])
        best = f"{best_up:.4f} / {best_ours:.4f} ({_ratio(best_ours, best_up):.2f}x)"
        extra = []
        for key in ("extra_peak_mib", "shards_mapped", "command_peak_rss_mib", "disk_read_kib", "rchar_kib", "peak_rss_mib", "resident_pct", "gc_ms", "gc_full"):
            if key in w.samples["ours"][0]:
                u = median([s[key] for s in w.samples["upstream"]])
                o = median([s[key] for s in w.samples["ours"]])
                digits = 1 if key == "resident_pct" else 0
                extra.append(f"{key}: upstream {u:.{digits}f}, ours {o:.{digits}f}")
        if w.suite == "per-call" and "gc_ms" in w.samples["ours"][0]:
            # The same medians with the garbage collector's time taken out of each sample: the
            # calls' own cost, apart from which side happened to meet a full collection.
            u = median([s["seconds"] - s["gc_ms"] / 1e3 for s in w.samples["upstream"]])
            o = median([s["seconds"] - s["gc_ms"] / 1e3 for s in w.samples["ours"]])
            extra.append(f"without GC time: {u:.4f} / {o:.4f} ({_ratio(o, u):.2f}x)")
        if w.absolute:
            ok = "ok" if ours <= w.target else "MISSED"
            target = f"ours <= {w.target} s {ok}"
        elif w.worker == "shard_get_tensor":
            u = median([s["extra_peak_mib"] for s in w.samples["upstream"]])
            o = median([s["extra_peak_mib"] for s in w.samples["ours"]])
            ok = "ok" if o <= w.target * max(u, 1.0) else "MISSED"
            target = f"peak RSS growth <= {w.target}x upstream's {ok}"
        else:
            ok = "ok" if ratio <= w.target else "MISSED"
            target = f"<= {w.target}x {ok}"
        cpu_up = median([s["cpu_s"] for s in w.samples["upstream"]])
        cpu_ours = median([s["cpu_s"] for s in w.samples["ours"]])
        cpu = f"{cpu_up:.3f} / {cpu_ours:.3f} ({_ratio(cpu_ours, cpu_up):.2f}x)"
        if "ours_durable" in w.samples:
            durable = median([s["seconds"] for s in w.samples["ours_durable"]])
            extra.append(f"ours durable=True (fsync): {durable:.4f} s ({durable / up:.2f}x)")
        row = f"| {w.key} | {w.title} | {up:.4f} | {ours:.4f} | **{ratio:.2f}x** |"
        if with_base:
            if "base" in w.samples:
                base = median([s["seconds"] for s in w.samples["base"]])
                row += f" {base:.4f} | {_ratio(base, up):.2f}x | {_ratio(ours, base):.2f}x |"
            else:
                row += " - | - | - |"
        lines.append(row + f" {target} | {best} | {cpu} | {'; '.join(extra)} |")
    return "\n".join(lines)


def baseline_src(path: str) -> str:
    """The folder ``pysafetensors`` is imported from for the ``base`` side: ``path`` itself when
    the package is in it (a ``src`` folder), else ``path/src`` (a checkout's root)."""
    path = os.path.abspath(path)
    for candidate in (path, os.path.join(path, "src")):
        if os.path.isfile(os.path.join(candidate, "pysafetensors", "__init__.py")):
            return candidate
    raise SystemExit(f"--baseline-src {path}: no pysafetensors package in it or in its src/ folder")


def _git(where: str, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", where, *args], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return ""
    return proc.stdout.strip() if proc.returncode == 0 else ""


def describe_code(src: str) -> str:
    """The commit a ``src`` folder's checkout is at, and whether it has uncommitted changes."""
    commit = _git(src, "rev-parse", "--short", "HEAD")
    if not commit:
        return f"{src} (not a git checkout)"
    dirty = _git(src, "status", "--porcelain", "--untracked-files=no", "--", ".")
    return f"{commit}{' + uncommitted changes' if dirty else ''} ({src})"


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    """The machine a run was on: CPU, memory, kernel, Python and the packages the workloads use."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(ln for ln in f if ln.startswith("MemTotal:")).split()[1])
        mem = f", {kib / (1 << 20):.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    packages = ", ".join(f"{d} {_version(d)}" for d in ("torch", "numpy", "safetensors"))
    return (f"{platform.machine()}, {os.cpu_count()} CPUs{f' ({model})' if model else ''}{mem}, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}; {packages}")


def record(path: str, ws: list[Workload], *, argv: list[str], started: float, finished: float,
           summary: str, table: str, base: str | None) -> None:
    """Write the run as a Markdown log (a file for ``benchmarks/runs/``): when, where, what code,
    the command, the table and every sample in run order.  Written to a temporary name and renamed."""
    stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(started))
    end = time.strftime("%H:%M", time.gmtime(finished))
    suites = sorted({w.suite for w in ws})
    lines = [
        f"# {' and '.join(suites) or 'no'} workloads (benchmarks/run.py), {stamp}-{end} UTC",
        "",
        f"- **Machine**: {machine_line()}.",
        f"- **Command**: `{' '.join(['python', 'benchmarks/run.py', *argv])}`.",
        f"- **Code**: ours {describe_code(os.path.join(os.path.dirname(HERE), 'src'))}"
        + (f"; base {describe_code(base)}" if base else "") + ".",
        f"- **Run**: {summary}.",
        "",
        table,
        "",
        "Every sample, in run order (seconds):",
        "",
        "| # | side | seconds |",
        "|---|---|---|",
    ]
    for w in ws:
        for impl, samples in w.samples.items():
            seconds = " ".join(f"{s['seconds']:.4f}" for s in samples)
            lines.append(f"| {w.key} | {impl} | {seconds} |")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


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
    p.add_argument("--suite", choices=("bulk", "per-call", "all"), default=None,
                   help="which workloads (default bulk; with -w, every suite's keys are accepted)")
    p.add_argument("--baseline-src", metavar="DIR",
                   help="also run ours from another checkout (its root or its src/; a third side, 'base', "
                   "alternating), e.g. a git worktree of an older commit")
    p.add_argument("--record", metavar="FILE",
                   help="also write the run (machine, command, date, code, table, every sample) as a "
                   "Markdown log, e.g. benchmarks/runs/DATE-bulk.md")
    opts = p.parse_args(argv)
    base: tuple[str, ...] = ()
    if opts.baseline_src:  # checked before any data file is made
        os.environ["BENCH_BASE_SRC"] = baseline_src(opts.baseline_src)
        base = ("base",)
    if opts.settle is None:
        opts.settle = 0.0 if opts.quick else 3.0
    os.makedirs(opts.data, exist_ok=True)
    started = time.time()
    suite = opts.suite or ("all" if opts.workload else "bulk")
    ws = (workloads(opts.data, opts.quick) if suite in ("bulk", "all") else [])
    ws += per_call_workloads(opts.data, opts.quick) if suite in ("per-call", "all") else []
    if opts.workload:
        ws = [w for w in ws if w.key in opts.workload]
    _compile_sources(os.path.join(os.path.dirname(HERE), "src"), *([os.environ["BENCH_BASE_SRC"]] if base else []))
    for w in ws:
        impls = IMPLS + base + (("ours_durable",) if w.worker.startswith("save") else ())
        # The per-call workloads take milliseconds and allocate little: more samples, a short pause.
        samples = opts.samples or (1 if opts.quick else 9 if w.suite == "per-call" else 5)
        settle = min(opts.settle, 0.5) if w.suite == "per-call" else opts.settle
        w.samples = {impl: [] for impl in impls}
        for i in range(samples):
            # Alternate which implementation goes first, so neither always runs warmer.
            order = impls if i % 2 == 0 else impls[::-1]
            for impl in order:
                w.samples[impl].append(sample(w, impl, settle))
        print(f"workload {w.key} done", file=sys.stderr)
    load = os.getloadavg()
    summary = (
        f"load average before/after run: {load[2]:.2f}/{load[0]:.2f}; "
        f"samples each: {', '.join(sorted({f'{len(w.samples[IMPLS[0]])}' for w in ws})) or '0'}; "
        f"settle {opts.settle:g} s (per-call workloads at most 0.5 s); {time.time() - started:.0f} s total"
    )
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}, {summary}")
    table = report(ws)
    print(table)
    if opts.record:
        record(opts.record, ws, argv=sys.argv[1:] if argv is None else argv, started=started, finished=time.time(),
               summary=summary, table=table, base=os.environ.get("BENCH_BASE_SRC") if base else None)
        print(f"recorded in {opts.record}", file=sys.stderr)
    if opts.json_out:
        with open(opts.json_out, "w") as f:
            json.dump({w.key: w.samples for w in ws}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
