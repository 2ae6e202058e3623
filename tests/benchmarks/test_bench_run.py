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
