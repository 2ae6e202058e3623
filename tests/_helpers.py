"""Helpers shared by tests in several folders: sample tensors, page-cache control, advice spies.

``evict`` is the benchmarks' own (``benchmarks/_common.py``, stdlib only), loaded by path since
``benchmarks/`` is a folder of scripts, not a package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.io.sources import MmapSource

ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "_common.py")
assert _spec is not None and _spec.loader is not None
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)

#: Drop a file from the page cache (written back first, so every page can go).
evict = _common.evict


def sample_arrays() -> dict[str, dict[str, np.ndarray]]:
    """Three checkpoints' tensors (seeded): mixed dtypes and ranks, one big tensor, many small ones."""
    rng = np.random.default_rng(1)
    return {
        "mixed": {
            "a": rng.standard_normal((64, 33)).astype(np.float32),
            "b": rng.integers(-9, 9, (17,), dtype=np.int64),
            "c": np.zeros((0, 4), np.float16),
            "d": rng.integers(0, 2, (5, 5)).astype(bool),
            "e": rng.standard_normal(()).astype(np.float64),
        },
        "one_big": {"w": rng.standard_normal((300, 257)).astype(np.float32)},
        "many_small": {f"t{i:03d}": np.full((i % 7 + 1,), i, np.int32) for i in range(150)},
    }


def spy_advice(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Every ``MmapSource.advise`` call (offset, length, advice); the advice is still given."""
    calls: list[tuple[int, int, int]] = []
    real = MmapSource.advise

    def spy(self: MmapSource, offset: int, length: int, advice: int) -> None:
        calls.append((offset, length, advice))
        real(self, offset, length, advice)

    monkeypatch.setattr(MmapSource, "advise", spy)
    return calls
