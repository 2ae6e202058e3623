"""One benchmark sample in a fresh process: ``worker.py WORKLOAD IMPL JSON-ARGS``.

Imports (torch, numpy, the implementation) happen before the clock starts: the number is
the operation itself.  Prints one JSON object: ``seconds`` plus workload-specific facts
(peak RSS growth from /proc/self/status, bytes read from /proc/self/io).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")


def _impl(name: str) -> Any:
    """The package under test: upstream ``safetensors`` or ours (from this checkout)."""
    if name.startswith("ours"):
        sys.path.insert(0, SRC)
        import pysafetensors as mod

        assert mod.__file__ and mod.__file__.startswith(SRC), mod.__file__
        if name == "ours_durable":
            # Diagnostic: ours with durable=True (fsync before the rename), which upstream
            # never does, to show what power-loss safety costs.
            os.environ["PYSAFETENSORS_DURABLE"] = "1"
        return mod
    import safetensors as mod

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


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of ``fn``; its CPU seconds (all threads) are kept for the report."""
    c0 = _cpu()
    t0 = time.perf_counter()
    out = fn()
    elapsed = time.perf_counter() - t0
    _CPU.append(_cpu() - c0)
    return elapsed, out


def run(workload: str, impl: str, args: dict[str, Any]) -> dict[str, Any]:
    mod = _impl(impl)
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
    raise SystemExit(f"unknown workload {workload}")


if __name__ == "__main__":
    result = run(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
    result["peak_rss_mib"] = _status_kib("VmHWM") / 1024  # the OS's high-water mark
    result["cpu_s"] = sum(_CPU)
    print(json.dumps(result))
