"""benchmarks/gguf_metadata.py runs end to end on tiny files; no time is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_gguf_metadata_benchmark_smoke(tmp_path: Path) -> None:
    script = os.fspath(Path(__file__).resolve().parents[2] / "benchmarks" / "gguf_metadata.py")
    proc = subprocess.run([sys.executable, script, "--mb", "0.02", "--command", "inspect", "--command", "convert",
                           "--dir", os.fspath(tmp_path)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) == 6, proc.stdout  # 3 cases x 2 commands
    exits = {(r.split("|")[1].strip(), r.split("|")[4].strip()): r.split("|")[5].strip() for r in rows}
    assert exits[("an array of N empty arrays", "`inspect`")] == "0"
    assert exits[("N distinct short keys (uint32 values)", "`convert`")] == "0"
    assert exits[("N one-byte keys (repeats), empty strings", "`inspect`")] == "2"  # repeated keys are refused
