"""The sample file the safe_open and slicing tests read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pysafetensors.numpy as pnp


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "s.safetensors"
    pnp.save_file(
        {
            "b": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
            "a": np.arange(5, dtype=np.int16),
            "c": np.array(7, dtype=np.uint64),
            "e": np.zeros((0, 3), dtype=np.float64),
        },
        path,
    )
    return path
