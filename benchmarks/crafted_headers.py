"""What crafted headers cost to open: time and peak memory, ours vs upstream, one fresh process each.

    python benchmarks/crafted_headers.py               # 100 MB headers (the format's cap)
    python benchmarks/crafted_headers.py --mb 10 --case top-level-objects

Each case is a file whose header is about ``--mb`` MB of one crafted shape (a top-level
array of a million objects, an ignored field holding millions of floats, ...).  For each,
a fresh process opens it with ``safe_open`` (ours, then upstream safetensors) and reports
the verdict, the wall time of the open, and how much its peak RSS grew (VmHWM after the
open minus RSS before it).  The table it prints is what SECURITY.md quotes.  Not a test:
nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")
_VALID = '"dtype":"U8","shape":[1],"data_offsets":[0,1]'


def _repeat(item: str, size: int) -> str:
    count = max(1, size // (len(item) + 1))
    return ",".join([item] * count)


# name -> (description, header text builder for a size in bytes, data bytes after the header)
CASES: dict[str, tuple[str, Callable[[int], str], bytes]] = {
    "top-level-objects": ("`[{},{},…]`", lambda s: "[" + _repeat("{}", s) + "]", b""),
    "top-level-floats": ("`[1.5,1.5,…]`", lambda s: "[" + _repeat("1.5", s) + "]", b""),
    "entry-floats": ('`{"a":[1.5,…]}` (a tensor entry)', lambda s: '{"a":[' + _repeat("1.5", s) + "]}", b""),
    "entry-objects": ('`{"a":[{},…]}` (a tensor entry)', lambda s: '{"a":[' + _repeat("{}", s) + "]}", b""),
    "metadata-objects": ('`{"__metadata__":[{},…]}`', lambda s: '{"__metadata__":[' + _repeat("{}", s) + "]}", b""),
    "ignored-objects": ('`[{},…]` in an ignored field of a valid tensor (accepted)',
                        lambda s: '{"a":{' + _VALID + ',"x":[' + _repeat("{}", s) + "]}}", b"\0"),
    "ignored-floats": ('`[1.5,…]` in an ignored field (accepted)',
                       lambda s: '{"a":{' + _VALID + ',"x":[' + _repeat("1.5", s) + "]}}", b"\0"),
    "ignored-arrays": ('`[[],…]` in an ignored field (accepted)',
                       lambda s: '{"a":{' + _VALID + ',"x":[' + _repeat("[]", s) + "]}}", b"\0"),
    "ignored-ints-minus-zero": ('`[-0,1,1,…]` in an ignored field (accepted; -0 is rewritten outside strings first)',
                                lambda s: '{"a":{' + _VALID + ',"x":[-0,' + _repeat("1", s) + "]}}", b"\0"),
    "ignored-near-f64-max": ('`[1.7976931348623157e308,…]` in an ignored field (accepted; exact number checks)',
                             lambda s: '{"a":{' + _VALID + ',"x":[' + _repeat("1.7976931348623157e308", s) + "]}}",
                             b"\0"),
    "deep-nesting": ('`[[[…` 1,000,000 deep in an ignored field',
                     lambda s: '{"a":{' + _VALID + ',"x":' + "[" * 1_000_000 + "]" * 1_000_000 + "}}", b"\0"),
    "many-tensors": ("a valid header of 1,000,000 tensors (89 MB; for scale)", None, b""),  # type: ignore[dict-item]
}


def _many_tensors() -> tuple[str, bytes]:
    header: dict[str, object] = {}
    for i in range(1_000_000):
        header[f"model.layers.{i}.weight"] = {"dtype": "F16", "shape": [2], "data_offsets": [4 * i, 4 * i + 4]}
    return json.dumps(header, separators=(",", ":")), bytes(4_000_000)


def write_case(path: str, name: str, size: int) -> int:
    _, build, data = CASES[name]
    if build is None:
        text, data = _many_tensors()
    else:
        text = build(size)
    header = text.encode()
    header += b" " * ((8 - (8 + len(header)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + data)
    return len(header)


_WORKER = r"""
import json, sys, time
impl, path = sys.argv[1], sys.argv[2]
if impl == "ours":
    sys.path.insert(0, sys.argv[3])
    import pysafetensors as mod
else:
    import safetensors as mod
import numpy  # both faces need it: imported before the clock starts

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])

try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := current RSS
except OSError:
    pass
before = status("VmRSS")
t = time.perf_counter()
try:
    with mod.safe_open(path, framework="np") as f:
        f.keys()
    verdict = "accepted"
except Exception as e:
    verdict = type(e).__name__ + ": " + str(e)[:90]
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_mib": (status("VmHWM") - before) / 1024, "verdict": verdict}))
"""


def sample(impl: str, path: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", _WORKER, impl, path, SRC], capture_output=True, text=True,
                          timeout=900, check=False)
    if proc.returncode != 0:
        return {"seconds": float("nan"), "peak_mib": float("nan"), "verdict": f"process died ({proc.returncode})"}
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=100.0, help="header size in MB (default 100, the cap)")
    p.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases")
    p.add_argument("--dir", default=None, help="where to write the files (default: a temp dir)")
    args = p.parse_args()
    size = int(args.mb * 1e6) - 100
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f} at start; header {args.mb:g} MB; "
          f"PYSAFETENSORS_JSON={os.environ.get('PYSAFETENSORS_JSON', '(default)')}")
    print("| case | header MB | ours s | ours peak RSS MiB | upstream s | upstream peak RSS MiB | verdict (ours / upstream) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "crafted.safetensors")
        for name in args.case or list(CASES):
            n = write_case(path, name, size)
            time.sleep(1)  # let the writer's memory settle before sampling
            ours, up = sample("ours", path), sample("upstream", path)
            os.unlink(path)
            same = "same" if (ours["verdict"] == "accepted") == (up["verdict"] == "accepted") else "DIFFERENT"
            print(f"| {CASES[name][0]} | {n / 1e6:.0f} | {ours['seconds']:.2f} | {ours['peak_mib']:.0f} | "
                  f"{up['seconds']:.2f} | {up['peak_mib']:.0f} | {same}: {str(ours['verdict'])[:60]} |", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
