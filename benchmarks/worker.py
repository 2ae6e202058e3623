"""One benchmark sample in a fresh process: ``worker.py WORKLOAD IMPL JSON-ARGS``.

Imports (torch, numpy, the implementation) happen before the clock starts: the number is
the operation itself.  Prints one JSON object: ``seconds`` plus workload-specific facts
(peak RSS growth from /proc/self/status, bytes read from /proc/self/io).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")


def src_of(impl: str) -> str:
    """The ``src`` folder an implementation of ours is imported from: this checkout's for
    ``ours``, another checkout's for ``base`` (``run.py --baseline-src``, in BENCH_BASE_SRC)."""
    return os.environ["BENCH_BASE_SRC"] if impl == "base" else SRC


def _impl(name: str, framework: str | None = None) -> Any:
    """The package under test: upstream ``safetensors``, or ours (from this checkout, or from
    the baseline checkout for ``base``), imported the way the processes the workloads stand for
    import it: ``framework`` (``torch``, ``numpy``) first, then the package and ``safe_open``,
    then the package's face for that framework.  That is transformers' order: modeling_utils
    imports torch, then ``from safetensors import safe_open`` and ``from safetensors.torch
    import load_file, save_file``.

    The order counts beyond the imports' own cost: torch's import runs full (generation 2)
    garbage collections, and whether a timed loop later meets one depends on how many objects
    were allocated since the last, so each side is imported as users import it, and nothing it
    does not use (the incremental writer, ``install_as_safetensors``) is resolved.
    """
    if framework is not None:
        importlib.import_module(framework)
    if name.startswith("ours") or name == "base":
        src = src_of(name)
        sys.path.insert(0, src)
        import pysafetensors as mod

        assert mod.__file__ and mod.__file__.startswith(src), mod.__file__
        # The package root loads its API on first use; a library writes ``from safetensors
        # import safe_open`` at import time, as upstream's import loads its core: resolve it
        # here, before any clock, so a workload times the call, not the import.
        mod.safe_open  # noqa: B018
        if name == "ours_durable":
            # Diagnostic: ours with durable=True (fsync before the rename), which upstream
            # never does, to show what power-loss safety costs.
            os.environ["PYSAFETENSORS_DURABLE"] = "1"
    else:
        import safetensors as mod
    if framework is not None:
        importlib.import_module(f"{mod.__name__}.{framework}")
    return mod


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _io(field: str) -> int:
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _touch_torch(tensors: dict[str, Any]) -> float:
    """Read one element per 4 KiB page of every tensor (forces every page in)."""
    total = 0.0
    for t in tensors.values():
        flat = t.reshape(-1).view(__import__("torch").uint8)
        total += float(flat[::4096].sum())
    return total


def _touch_numpy(arrays: dict[str, Any]) -> float:
    import numpy as np

    total = 0.0
    for a in arrays.values():
        flat = a.reshape(-1).view(np.uint8)
        total += float(flat[::4096].sum())
    return total


_CPU: list[float] = []


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# Time inside the cyclic garbage collector during the timed call, and its full (generation 2)
# collections: one full pass over a process holding torch costs ~85 ms on this VM, and whether a
# short loop meets one depends on where the collector's counters stood when it began, so the
# report shows it beside the time rather than hiding or forcing it.
_GC: dict[str, Any] = {"seconds": 0.0, "full": 0}


def _gc_watch(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _GC["t"] = time.perf_counter()
        _GC["full"] += info["generation"] == 2
    else:
        _GC["seconds"] += time.perf_counter() - _GC.pop("t", time.perf_counter())


def _gc_headroom() -> int:
    """Tracked allocations left before the collector's next full collection: objects are made
    (and kept, until the sample ends) until one starts."""
    full = [False]

    def watch(phase: str, info: dict[str, Any]) -> None:
        full[0] = full[0] or (phase == "start" and info["generation"] == 2)

    gc.callbacks.append(watch)
    made: list[list[Any]] = []
    while not full[0]:
        made.append([])
    gc.callbacks.remove(watch)
    _GC["kept"] = made
    return len(made)


def _gc_probe() -> None:
    """``gc_headroom.py``'s settings (none in a timed sample), applied where the clock is about to start:
    ``BENCH_GC_COLLECT=1`` runs a full collection, ``BENCH_GC_JUNK=N`` makes N tracked objects
    (kept until the sample ends), ``BENCH_GC_HEADROOM=1`` then counts the allocations left
    before the next full collection (``gc_headroom``; the sample then meets none)."""
    if os.environ.get("BENCH_GC_COLLECT"):
        gc.collect()
    junk = int(os.environ.get("BENCH_GC_JUNK", "0"))
    if junk:
        _GC["junk"] = [[] for _ in range(junk)]
    if os.environ.get("BENCH_GC_HEADROOM"):
        _GC["headroom"] = _gc_headroom()


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of ``fn``; its CPU seconds (all threads) and its time in the garbage
    collector are kept for the report."""
    _gc_probe()
    c0 = _cpu()
    gc.callbacks.append(_gc_watch)
    t0 = time.perf_counter()
    try:
        out = fn()
    finally:
        elapsed = time.perf_counter() - t0
        gc.callbacks.remove(_gc_watch)
    _CPU.append(_cpu() - c0)
    return elapsed, out


#: The framework each workload runs on, imported before the implementation (``_impl``); the
#: command-line workloads run the package alone.
FRAMEWORK = {
    **dict.fromkeys(("load_torch", "load_torch_cold", "load_small", "load_pread", "save_torch", "save_small",
                     "slice", "slice_loop", "get_tensor_loop", "first_open", "shard_open", "shard_get_tensor"),
                    "torch"),
    **dict.fromkeys(("load_numpy", "open_many"), "numpy"),
}


def run(workload: str, impl: str, args: dict[str, Any]) -> dict[str, Any]:
    mod = _impl(impl, FRAMEWORK.get(workload))
    path = args.get("path", "")
    backend = args.get("backend", "mmap")
    if workload in ("load_torch", "load_torch_cold", "load_small", "load_pread"):
        import torch

        load_file = __import__(f"{mod.__name__}.torch", fromlist=["load_file"]).load_file
        seconds, _ = _timed(lambda: _touch_torch(load_file(path, backend=backend)))
        return {"seconds": seconds}
    if workload == "load_numpy":
        import numpy

        load_file = __import__(f"{mod.__name__}.numpy", fromlist=["load_file"]).load_file
        seconds, _ = _timed(lambda: _touch_numpy(load_file(path, backend=backend)))
        return {"seconds": seconds}
    if workload in ("save_torch", "save_small"):
        import torch

        save_file = __import__(f"{mod.__name__}.torch", fromlist=["save_file"]).save_file
        sizes = args["sizes"]
        tensors = {f"t{i:05d}": torch.full((n // 4,), float(i), dtype=torch.float32) for i, n in enumerate(sizes)}
        out = args["out"]
        _reset_peak_rss()
        rss_before = _status_kib("VmRSS")
        seconds, _ = _timed(lambda: save_file(tensors, out))
        hwm_after = _status_kib("VmHWM")
        os.unlink(out)
        # Peak growth during the save, over the process (tensors included) just before it.
        return {"seconds": seconds, "extra_peak_mib": max(0, hwm_after - rss_before) / 1024}
    if workload == "open_many":
        import numpy  # noqa: F401

        def op() -> int:
            with mod.safe_open(path, framework="np") as f:
                return len(f.keys()) + len(f.metadata() or {})

        seconds, _ = _timed(op)
        return {"seconds": seconds}
    if workload == "slice":
        import torch

        rows = args["rows"]
        start = args["start"]
        # Run the reduction once first: its code pages in libtorch may have been reclaimed, and
        # faulting them back in would count as disk reads of the slice.
        float(torch.ones(64, 1024).sum())
        before = _io("read_bytes"), _io("rchar")

        def op() -> float:
            with mod.safe_open(path, framework="pt", backend=backend) as f:
                part = f.get_slice("w")[start : start + rows]
                return float(part.sum())

        seconds, _ = _timed(op)
        return {
            "seconds": seconds,
            "disk_read_kib": (_io("read_bytes") - before[0]) / 1024,
            "rchar_kib": (_io("rchar") - before[1]) / 1024,
        }
    if workload in PER_CALL:
        return PER_CALL[workload](mod, impl, args)
    raise SystemExit(f"unknown workload {workload}")


# --- per-call workloads: the pattern transformers and vLLM run ----------------------------------


def _slice_loop(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """``safe_open`` then ``get_slice(k)`` for every key (transformers' loading loop), each slice
    materialized with ``[:]`` unless ``lazy`` (transformers keeps the slice objects)."""
    import torch  # noqa: F401  (imported before the clock: the library's own imports count)

    path, lazy = a["path"], a.get("lazy", False)

    def op() -> int:
        kept = []
        with mod.safe_open(path, framework="pt") as f:
            for k in f.keys():  # noqa: SIM118  (safe_open is not a mapping)
                s = f.get_slice(k)
                kept.append(s if lazy else s[:])
        return len(kept)

    seconds, n = _timed(op)
    return {"seconds": seconds, "tensors": n}


def _get_tensor_loop(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """``safe_open`` then ``get_tensor(k)`` for every key."""
    import torch  # noqa: F401

    path = a["path"]

    def op() -> int:
        with mod.safe_open(path, framework="pt") as f:
            return len([f.get_tensor(k) for k in f.keys()])  # noqa: SIM118

    seconds, n = _timed(op)
    return {"seconds": seconds, "tensors": n}


def _first_open(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """The first ``safe_open`` + ``keys()`` of a process (framework "pt", torch imported before)."""
    import torch  # noqa: F401

    path = a["path"]

    def op() -> int:
        with mod.safe_open(path, framework="pt") as f:
            return len(f.keys())

    seconds, n = _timed(op)
    return {"seconds": seconds, "tensors": n}


def _shard_paths(index: str) -> list[str]:
    with open(index) as f:
        weight_map = json.load(f)["weight_map"]
    return [os.path.join(os.path.dirname(index), s) for s in sorted(set(weight_map.values()))]


def _load_sharded_reader(impl: str) -> None:
    """Ours loads the sharded reader on the first index it opens (opening one file never imports
    it); import it here, before any clock, like every other module of the API (``_impl``), so a
    shard workload times the opens, not a once-per-process import (that is in ``-X importtime``)."""
    if impl != "upstream":
        importlib.import_module("pysafetensors.sharded")


def _shard_open(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """Open a sharded checkpoint and read every tensor's dtype and shape.  Ours opens the index;
    upstream cannot, so it reads the index JSON and opens every shard (what transformers does)."""
    import torch  # noqa: F401

    index = a["index"]
    _load_sharded_reader(impl)

    def describe(f: Any) -> int:
        return len([(f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()])  # noqa: SIM118

    def through_index() -> int:
        with mod.safe_open(index, framework="pt") as f:
            return describe(f)

    def per_shard() -> int:
        n = 0
        for shard in _shard_paths(index):
            with mod.safe_open(shard, framework="pt") as f:
                n += describe(f)
        return n

    seconds, n = _timed(per_shard if impl == "upstream" else through_index)
    return {"seconds": seconds, "tensors": n}


def _mapped_files(paths: list[str]) -> int:
    """How many of ``paths`` this process has mapped now (/proc/self/maps)."""
    wanted = {os.path.realpath(p) for p in paths}
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].strip() in wanted:
                found.add(parts[5].strip())
    return len(found)


def _shard_get_tensor(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """``get_tensor`` one tensor at a time over a sharded checkpoint, each touched and dropped:
    peak RSS and the most shard files mapped at once.  Ours through the index, upstream shard
    by shard."""
    import torch  # noqa: F401

    index = a["index"]
    _load_sharded_reader(impl)
    shards = _shard_paths(index)
    most = [0]

    def op() -> int:
        n = 0
        for path in [index] if impl != "upstream" else shards:
            with mod.safe_open(path, framework="pt") as f:
                for k in f.keys():  # noqa: SIM118
                    t = f.get_tensor(k)
                    _touch_torch({k: t})
                    del t
                    most[0] = max(most[0], _mapped_files(shards))
                    n += 1
        return n

    _reset_peak_rss()
    rss_before = _status_kib("VmRSS")
    seconds, n = _timed(op)
    return {"seconds": seconds, "tensors": n, "extra_peak_mib": max(0, _status_kib("VmHWM") - rss_before) / 1024,
            "shards_mapped": most[0]}


def _command(impl: str, a: dict[str, Any]) -> list[str]:
    """The command a CLI sample runs: ours (``python -m pysafetensors ...``) or the reference
    (``a["reference"]``: ``numpy`` for an interpreter that imports numpy, ``header`` for
    upstream's header-only open of ``a["path"]`` in a fresh process)."""
    if impl != "upstream":
        return [sys.executable, "-m", "pysafetensors", *a["argv"]]
    if a["reference"] == "numpy":
        return [sys.executable, "-c", "import numpy"]
    code = ("import sys; from safetensors import safe_open\n"
            "with safe_open(sys.argv[1], framework='np') as f: f.keys()")
    return [sys.executable, "-c", code, a["path"]]


def _env(impl: str) -> dict[str, str]:
    env = dict(os.environ)
    if impl != "upstream":
        env["PYTHONPATH"] = src_of(impl)
    return env


def _cli(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """A whole command in a fresh process, from start to exit (interpreter start included)."""
    import subprocess

    argv, env = _command(impl, a), _env(impl)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, proc = _timed(lambda: subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.PIPE, check=False))
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')[-2000:]}")
    return {"seconds": seconds, **_child_usage(before)}


def _child_usage(before: Any) -> dict[str, float]:
    """The command's own CPU seconds (counted in ``cpu_s``) and peak RSS."""
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {"command_peak_rss_mib": after.ru_maxrss / 1024}


def _view_url(mod: Any, impl: str, a: dict[str, Any]) -> dict[str, Any]:
    """``pysafetensors view FILE --no-browser``: seconds until it prints its URL (then stopped).
    The reference side runs upstream's header-only open of the same file in a fresh process."""
    import signal
    import subprocess

    if impl == "upstream":
        return _cli(mod, impl, a)
    argv = [sys.executable, "-m", "pysafetensors", "view", a["path"], "--no-browser", "--port", "0"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=_env(impl), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "http://" in line:
                seconds = time.perf_counter() - t0
                break
        else:
            raise SystemExit("view printed no URL")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"seconds": seconds, **_child_usage(before)}


PER_CALL: dict[str, Callable[[Any, str, dict[str, Any]], dict[str, Any]]] = {
    "slice_loop": _slice_loop,
    "get_tensor_loop": _get_tensor_loop,
    "first_open": _first_open,
    "shard_open": _shard_open,
    "shard_get_tensor": _shard_get_tensor,
    "cli": _cli,
    "view_url": _view_url,
}


if __name__ == "__main__":
    result = run(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
    result["peak_rss_mib"] = _status_kib("VmHWM") / 1024  # the OS's high-water mark
    result["cpu_s"] = sum(_CPU)
    result["gc_ms"] = _GC["seconds"] * 1e3
    result["gc_full"] = _GC["full"]
    if "headroom" in _GC:
        result["gc_headroom"] = _GC["headroom"]
    print(json.dumps(result))
