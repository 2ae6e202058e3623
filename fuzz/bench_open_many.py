"""Benchmark: open a file whose header lists many tensors (default 100,000), ours vs upstream.

    python fuzz/bench_open_many.py [--tensors 100000] [--repeat 3]

Prints the header size, the best open time (safe_open + keys()) for both backends and for
upstream safetensors when installed, and the ratio.  Not a test: timings are only reported.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from pysafetensors import safe_open


def build(path: str, tensors: int) -> int:
    header = {f"model.layers.{i}.weight": {"dtype": "F16", "shape": [2], "data_offsets": [4 * i, 4 * i + 4]} for i in range(tensors)}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(4 * tensors))
    return len(h)


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tensors", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "many.safetensors")
        n = build(path, args.tensors)
        print(f"{args.tensors} tensors, header {n / 1e6:.1f} MB")
        results = {}
        for backend in ("mmap", "pread"):
            def ours(backend: str = backend) -> None:
                with safe_open(path, framework="np", backend=backend) as f:
                    assert len(f.keys()) == args.tensors
            results[f"pysafetensors ({backend})"] = best(ours, args.repeat)
        try:
            import safetensors

            def upstream() -> None:
                with safetensors.safe_open(path, framework="np") as f:
                    assert len(f.keys()) == args.tensors
            results["safetensors (upstream)"] = best(upstream, args.repeat)
        except ImportError:
            pass
        base = results.get("safetensors (upstream)")
        for name, t in results.items():
            ratio = f"  {t / base:.1f}x upstream" if base else ""
            print(f"  {name:26} {t * 1000:8.0f} ms{ratio}")


if __name__ == "__main__":
    main()
