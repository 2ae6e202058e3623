"""The benchmark harness (benchmarks/run.py) runs end to end; no time is asserted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

upstream_np = pytest.importorskip("safetensors.numpy")


def test_benchmark_quick_smoke(tmp_path: Any) -> None:
    run = os.fspath(Path(__file__).resolve().parents[2] / "benchmarks" / "run.py")
    proc = subprocess.run(
        [sys.executable, run, "--quick", "-w", "5", "-n", "1", "--data", os.fspath(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| 5 |" in proc.stdout
    assert re.search(r"\*\*\d+\.\d+x\*\*", proc.stdout), proc.stdout


@pytest.mark.slow
def test_per_call_suite_with_a_baseline_side(tmp_path: Any) -> None:
    """The per-call workloads run, and --baseline-src adds a third side with its own column."""
    root = Path(__file__).resolve().parents[2]
    run = os.fspath(root / "benchmarks" / "run.py")
    proc = subprocess.run(
        [sys.executable, run, "--quick", "--suite", "per-call", "-w", "p1", "-w", "o291", "-w", "s2", "-w", "c1",
         "-n", "1", "--data", os.fspath(tmp_path), "--baseline-src", os.fspath(root / "src")],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| base s | base/upstream |" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2] in "pocs"]
    assert [r.split("|")[1].strip() for r in rows] == ["p1", "o291", "s2", "c1"]
    for r in rows:
        assert re.search(r"\*\*\d+\.\d+x\*\* \| \d+\.\d+ \| \d+\.\d+x \|", r), r
