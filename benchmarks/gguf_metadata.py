"""What crafted GGUF metadata costs the CLI: time and peak memory per command, per file byte.

    python benchmarks/gguf_metadata.py                      # every case at 4 MB, every command
    python benchmarks/gguf_metadata.py --mb 12 --case nested-empty --command inspect

Each case is a GGUF file of about ``--mb`` MB whose metadata is one crafted shape (an array of
N empty arrays, N distinct short keys, N one-byte keys that repeat) plus one small F32 tensor.
Each command (``inspect``, ``inspect --json``, ``id``, ``validate``, ``stats``, ``diff`` of the
file with a copy of itself, ``convert`` to safetensors) runs in a fresh process; the table gives
its exit status, wall time, peak RSS (the process's own ``VmHWM``) and both per MB of file.  The
table is what ``benchmarks/RESULTS.md`` quotes.  Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")

_ARRAY, _UINT32, _INT32, _STRING = 9, 4, 5, 8


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _nested_empty(size: int) -> tuple[int, bytes]:
    """One key whose value is an array of N empty int32 arrays (12 bytes each)."""
    n = max(1, size // 12)
    body = _s(b"x.nested") + struct.pack("<IIQ", _ARRAY, _ARRAY, n) + struct.pack("<IQ", _INT32, 0) * n
    return 1, body


def _distinct_keys(size: int) -> tuple[int, bytes]:
    """N distinct 4-byte keys, each a uint32 (20 bytes a key)."""
    n = max(1, size // 20)
    body = b"".join(_s(b"%04x" % (i & 0xFFFF) if i < 65536 else i.to_bytes(4, "little").hex()[:4].encode())
                    + struct.pack("<II", _UINT32, i) for i in range(min(n, 65536)))
    if n > 65536:  # more keys than 4 hex digits name: 8-byte keys from here on (distinct)
        body += b"".join(_s(b"%08x" % i) + struct.pack("<II", _UINT32, i) for i in range(65536, n))
    return n, body


def _one_byte_keys(size: int) -> tuple[int, bytes]:
    """N keys of one byte (so mostly repeats), each an empty string (21 bytes a key)."""
    n = max(1, size // 21)
    body = b"".join(_s(bytes([97 + i % 26])) + struct.pack("<IQ", _STRING, 0) for i in range(n))
    return n, body


CASES: dict[str, tuple[str, Callable[[int], tuple[int, bytes]]]] = {
    "nested-empty": ("an array of N empty arrays", _nested_empty),
    "distinct-keys": ("N distinct short keys (uint32 values)", _distinct_keys),
    "one-byte-keys": ("N one-byte keys (repeats), empty strings", _one_byte_keys),
}

COMMANDS: dict[str, Callable[[str, str], list[str]]] = {
    "inspect": lambda f, tmp: ["inspect", f],
    "inspect --json": lambda f, tmp: ["inspect", "--json", f],
    "id": lambda f, tmp: ["id", f],
    "validate": lambda f, tmp: ["validate", f],
    "stats": lambda f, tmp: ["stats", f],
    "diff": lambda f, tmp: ["diff", f, os.path.join(tmp, "copy.gguf")],
    "convert": lambda f, tmp: ["convert", f, os.path.join(tmp, "out.safetensors")],
}


def write_case(path: str, name: str, size: int) -> tuple[int, int]:
    """Write the case's file; (its size in bytes, the count of crafted items in it)."""
    n_kv, body = CASES[name][1](size)
    items = max(1, size // 12) if name == "nested-empty" else n_kv
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, n_kv) + body
    head += _s(b"w") + struct.pack("<I", 1) + struct.pack("<Q", 4) + struct.pack("<IQ", 0, 0)  # f32 [4] at 0
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + struct.pack("<4f", 1, 2, 3, 4))
    return len(head) + 16, items


# The command in a fresh interpreter that reports its own peak RSS: a child's ru_maxrss counts
# the parent's memory it shared before exec (the files this script generated), VmHWM does not.
_WORKER = r"""
import sys
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := the current RSS
except OSError:
    pass
from pysafetensors.cli.main import main
try:
    code = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    sys.stderr.write(f"\nVMHWM {hwm}\n")
sys.exit(code)
"""


def sample(argv: list[str], timeout: float, src: str) -> tuple[int | str, float, float]:
    """(exit status, seconds, peak RSS MiB) of one CLI run in a fresh process."""
    env = {**os.environ, "PYTHONPATH": src}
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", _WORKER, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t, float("nan")
    seconds = time.perf_counter() - t
    hwm = [line for line in proc.stderr.splitlines() if line.startswith("VMHWM ")]
    return proc.returncode, seconds, int(hwm[-1].split()[1]) / 1024 if hwm else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=float, default=4.0, help="file size in MB (default 4)")
    p.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases")
    p.add_argument("--command", action="append", choices=sorted(COMMANDS), help="only these commands")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before a run is killed (default 300)")
    p.add_argument("--dir", default=None, help="where to write the files (default: a temp dir)")
    p.add_argument("--src", default=SRC, help="the pysafetensors source tree to run (default: this checkout's src)")
    args = p.parse_args()
    size = int(args.mb * 1e6)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    print("| case | file MB | items | command | exit | s | peak RSS MiB | s per MB | MiB per MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "crafted.gguf")
        for name in args.case or list(CASES):
            nbytes, items = write_case(path, name, size)
            shutil.copyfile(path, os.path.join(tmp, "copy.gguf"))
            mb = nbytes / 1e6
            for command in args.command or list(COMMANDS):
                code, seconds, peak = sample(COMMANDS[command](path, tmp), args.timeout, args.src)
                print(f"| {CASES[name][0]} | {mb:.1f} | {items:,} | `{command}` | {code} | {seconds:.2f} | {peak:.0f} | "
                      f"{seconds / mb:.3f} | {peak / mb:.1f} |", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
