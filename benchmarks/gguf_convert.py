"""Throughput of ``pysafetensors convert IN.gguf OUT.safetensors``: ``python benchmarks/gguf_convert.py``.

Builds a GGUF of about ``--mb`` megabytes with gguf-py (half the bytes Q8_0 weight matrices, half
F16, plus F32 norms, like a small llama), then converts it ``-n`` times per ``--dtype`` in a fresh
process each time (the command line, as a user runs it) and prints the median wall time, MB/s of
GGUF read and of safetensors written, the process's peak RSS (which counts the pages of the
memory-mapped input it touched) and its peak anonymous memory (sampled every 5 ms: what the
conversion itself holds), before and during the run.  The output is fsynced (``convert`` writes
durably).  The page cache is warm: the input was just written.  Report the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, resource, sys, threading, time
from pysafetensors.cli.main import main

peak_anon = 0
done = threading.Event()

def sample():  # anonymous memory (not the mapped input's pages), every 5 ms
    global peak_anon
    while not done.is_set():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    peak_anon = max(peak_anon, int(line.split()[1]))
        time.sleep(0.005)

threading.Thread(target=sample, daemon=True).start()
time.sleep(0.05)
base = peak_anon
t = time.perf_counter()
code = main(["convert", sys.argv[1], sys.argv[2], "--dtype", sys.argv[3], "--quiet"])
wall = time.perf_counter() - t
done.set()
print(json.dumps({"code": code, "wall": wall, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "anon_before_mib": base / 1024, "peak_anon_mib": peak_anon / 1024}))
"""


def build(path: Path, mb: int) -> dict[str, int]:
    import gguf
    import numpy as np
    from gguf import GGMLQuantizationType as Q
    from gguf import quants

    rng = np.random.default_rng(0)
    rows, cols = 1024, 4096
    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_block_count(1)
    budget = mb * 10**6
    made = {"Q8_0": 0, "F16": 0, "F32": 0}
    i = 0
    while sum(made.values()) < budget:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        if made["Q8_0"] <= made["F16"]:
            data = quants.quantize(x, Q.Q8_0)
            w.add_tensor(f"blk.{i}.ffn_up.weight", data, raw_dtype=Q.Q8_0)
            made["Q8_0"] += data.nbytes
        else:
            data = x.astype(np.float16)
            w.add_tensor(f"blk.{i}.ffn_down.weight", data)
            made["F16"] += data.nbytes
        norm = rng.standard_normal(cols).astype(np.float32)
        w.add_tensor(f"blk.{i}.attn_norm.weight", norm)
        made["F32"] += norm.nbytes
        i += 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return made


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=400, help="GGUF size to build (default 400 MB)")
    p.add_argument("-n", type=int, default=3, help="runs per dtype (default 3)")
    p.add_argument("--dtype", action="append", default=None, help="f32, f16, bf16 (default: f32 and f16)")
    args = p.parse_args()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory(prefix="gguf-bench-") as tmp:
        src = Path(tmp) / "in.gguf"
        made = build(src, args.mb)
        size = src.stat().st_size
        print(f"input: {size / 1e6:.1f} MB GGUF ({', '.join(f'{k} {v / 1e6:.1f} MB' for k, v in made.items())}); "
              f"load average {os.getloadavg()[0]:.2f}")
        for dtype in args.dtype or ["f32", "f16"]:
            runs = []
            for _ in range(args.n):
                out = Path(tmp) / "out.safetensors"
                proc = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out), dtype], env=env,
                                      capture_output=True, text=True, check=True)
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                assert result["code"] == 0, proc.stderr
                result["out_bytes"] = out.stat().st_size
                runs.append(result)
                out.unlink()
                time.sleep(1)
            wall = statistics.median(r["wall"] for r in runs)
            written = runs[0]["out_bytes"]
            print(json.dumps({"dtype": dtype, "median_s": round(wall, 3), "in_MB_s": round(size / 1e6 / wall, 1),
                              "out_MB_s": round(written / 1e6 / wall, 1), "out_MB": round(written / 1e6, 1),
                              "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs), 1),
                              "anon_before_mib": round(runs[0]["anon_before_mib"], 1),
                              "peak_anon_mib": round(max(r["peak_anon_mib"] for r in runs), 1),
                              "walls": [round(r["wall"], 3) for r in runs], "load": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
