"""Benchmark: header-only open of files listing many tensors, ours vs upstream, by tensor count.

    python benchmarks/open_many.py                      # 1,000 / 10,000 / 100,000 / 1,000,000 tensors
    python benchmarks/open_many.py --tensors 100000 --repeat 7

For each count: the header size and the best open time (``safe_open`` + ``keys()`` +
``metadata()``) of ours and of upstream safetensors, run alternately in this process, the
ratio, and the time per tensor (a flat column means time linear in the tensor count).
``PYSAFETENSORS_JSON=stdlib`` measures ours without the msgspec fast path.  Not a test:
timings are only reported (benchmarks/run.py's workload 5 is the 100,000-tensor case in
fresh processes).
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
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    for i in range(tensors):
        header[f"model.layers.{i}.weight"] = {"dtype": "F16", "shape": [2], "data_offsets": [4 * i, 4 * i + 4]}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(4 * tensors))
    return len(h)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tensors", type=int, action="append", help="tensor counts (default 1e3 1e4 1e5 1e6)")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    import safetensors

    def opener(module: object, path: str, count: int) -> float:
        t = time.perf_counter()
        with module.safe_open(path, framework="np") as f:  # type: ignore[attr-defined]
            assert len(f.keys()) == count
            f.metadata()
        return time.perf_counter() - t

    print(f"{'tensors':>9} {'header MB':>9} {'ours ms':>9} {'upstream ms':>11} {'ratio':>6} {'ours us/tensor':>15} "
          f"{'upstream us/tensor':>19}")
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.tensors or [1_000, 10_000, 100_000, 1_000_000]:
            path = os.path.join(tmp, f"many-{count}.safetensors")
            n = build(path, count)
            opener(sys.modules["pysafetensors"], path, count)  # first use: imports, the decoder, caches
            opener(safetensors, path, count)
            ours, up = [], []
            for _ in range(args.repeat):  # alternate, so a busy machine slows both alike
                ours.append(opener(sys.modules["pysafetensors"], path, count))
                up.append(opener(safetensors, path, count))
            o, u = min(ours), min(up)
            print(f"{count:>9,} {n / 1e6:>9.1f} {o * 1e3:>9.1f} {u * 1e3:>11.1f} {o / u:>5.2f}x {o / count * 1e6:>15.2f} "
                  f"{u / count * 1e6:>19.2f}")
            os.unlink(path)


if __name__ == "__main__":
    assert safe_open  # imported from this checkout's src/ (above)
    main()
