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
    assert "| base s | base/upstream | ours/base |" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and line[2] in "pocs"]
    assert [r.split("|")[1].strip() for r in rows] == ["p1", "o291", "s2", "c1"]
    for r in rows:
        assert re.search(r"\*\*\d+\.\d+x\*\* \| \d+\.\d+ \| \d+\.\d+x \| \d+\.\d+x \|", r), r


def test_record_writes_the_run_log_with_a_checkout_root_as_baseline(tmp_path: Any) -> None:
    """--record writes the run as a Markdown log; --baseline-src takes a checkout's root (as a git
    worktree of an older commit gives it) as well as its src/."""
    root = Path(__file__).resolve().parents[2]
    log = tmp_path / "2026-01-01-bulk.md"
    proc = subprocess.run(
        [sys.executable, os.fspath(root / "benchmarks" / "run.py"), "--quick", "-w", "5", "-n", "2",
         "--data", os.fspath(tmp_path), "--baseline-src", os.fspath(root), "--record", os.fspath(log)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    text = log.read_text(encoding="utf-8")
    assert text.startswith("# bulk workloads (benchmarks/run.py), ")
    for field in ("**Machine**: ", "**Command**: `python benchmarks/run.py --quick -w 5", "**Code**: ours ",
                  "; base ", "**Run**: "):
        assert field in text, field
    assert os.fspath(root / "src") in text  # the checkout's root resolved to its src/
    assert "| base s | base/upstream | ours/base |" in text
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert table and all(line in text for line in table)  # the printed table, as printed
    samples = dict(re.findall(r"^\| 5 \| (upstream|ours|base) \| ([\d. ]+) \|$", text, re.MULTILINE))
    assert set(samples) == {"upstream", "ours", "base"}
    assert all(len(v.split()) == 2 for v in samples.values())
    assert not list(tmp_path.glob("*.tmp"))


def test_a_baseline_without_the_package_is_refused(tmp_path: Any) -> None:
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, os.fspath(root / "benchmarks" / "run.py"), "--quick", "-w", "5", "-n", "1",
         "--data", os.fspath(tmp_path), "--baseline-src", os.fspath(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode != 0
    assert "no pysafetensors package in it or in its src/ folder" in proc.stderr
