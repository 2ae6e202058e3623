"""Reliability tests: the repo root goes on sys.path so the fuzz generator (fuzz/) is importable."""

from __future__ import annotations

import sys

from _reliability_helpers import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_terminal_summary(terminalreporter: object) -> None:
    """The differential fuzz target's counts, when its test ran (issue: report them in the output)."""
    module = sys.modules.get("test_differential_fuzz")
    counts = getattr(module, "COUNTS", None)
    if counts:
        from fuzz.differential import summary

        terminalreporter.write_line(f"differential fuzz vs upstream safetensors: {summary(counts)}")  # type: ignore[attr-defined]
