"""tools.stats called directly: every statistic compared with numpy over the same values, read back
by upstream safetensors (the oracle)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pysafetensors.numpy import save_file
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.stats import RunningStats, file_stats, tensor_stats

upstream = pytest.importorskip("safetensors.numpy")

RNG = np.random.default_rng(7)
ARRAYS = {
    "f32": RNG.standard_normal((40, 30)).astype(np.float32),
    "f16": np.array([0.0, -0.0, 1.5, np.inf, -np.inf, np.nan, 2.0], np.float16),
    "i32": RNG.integers(-1000, 1000, (257,)).astype(np.int32),
    "u8": np.array([0, 0, 255, 7], np.uint8),
    "bf16": np.array([1.0, 2.0, -3.0, 0.0], ml_dtypes.bfloat16),
    "empty": np.zeros((0, 3), np.float32),
    "flag": np.array([True, False, True]),
}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "s.safetensors"
    save_file(ARRAYS, str(p))
    return p


def _expected(a: np.ndarray) -> dict[str, object]:
    x = a.astype(np.float64)
    finite = x[np.isfinite(x)]
    return {
        "elements": a.size,
        "nan": int(np.isnan(x).sum()),
        "inf": int(np.isinf(x).sum()),
        "zeros": int((x == 0).sum()),
        "min": float(finite.min()) if finite.size else None,
        "max": float(finite.max()) if finite.size else None,
        "mean": float(finite.mean()) if finite.size else None,
        "std": float(finite.std()) if finite.size else None,
    }


@pytest.mark.parametrize("name", ["f32", "f16", "i32", "u8", "bf16", "flag"])
def test_tensor_stats_match_numpy(path: Path, name: str) -> None:
    oracle = upstream.load_file(str(path))[name]
    want = _expected(oracle)
    with open_checkpoint(path) as ckpt:
        got = tensor_stats(ckpt, name)
    assert (got.name, got.shape, got.elements) == (name, list(oracle.shape), want["elements"])
    assert (got.nan, got.inf, got.zeros) == (want["nan"], want["inf"], want["zeros"])
    assert got.min == want["min"] and got.max == want["max"]
    assert got.mean == pytest.approx(want["mean"], rel=1e-12, abs=1e-15)
    assert got.std == pytest.approx(want["std"], rel=1e-9, abs=1e-15)


def test_integer_extremes_are_exact_integers(path: Path) -> None:
    with open_checkpoint(path) as ckpt:
        got = tensor_stats(ckpt, "i32")
    assert isinstance(got.min, int) and isinstance(got.max, int)
    assert (got.min, got.max) == (int(ARRAYS["i32"].min()), int(ARRAYS["i32"].max()))
    assert got.dtype == "I32"


def test_an_empty_tensor_has_no_statistics(path: Path) -> None:
    with open_checkpoint(path) as ckpt:
        got = tensor_stats(ckpt, "empty")
    assert (got.elements, got.min, got.max, got.mean, got.std) == (0, None, None, None, None)
    assert (got.nan, got.inf, got.zeros) == (0, 0, 0)


def test_file_stats_cover_the_selected_tensors_in_file_order(path: Path) -> None:
    every = file_stats(str(path))
    with open_checkpoint(path) as ckpt:
        assert [t.name for t in every.tensors] == [t.name for t in ckpt.tensors]
    assert every.filter is None and every.path == str(path)
    chosen = file_stats(str(path), ["f*"])
    assert sorted(t.name for t in chosen.tensors) == ["f16", "f32", "flag"] and chosen.filter == ["f*"]
    assert {t.name: t for t in chosen.tensors}["f32"] == {t.name: t for t in every.tensors}["f32"]


def test_running_stats_over_chunks_equal_one_pass() -> None:
    values = RNG.standard_normal(1000) * 1e6
    one, chunked = RunningStats(), RunningStats()
    one.add(values, "f")
    for part in np.array_split(values, 7):
        chunked.add(part, "f")
    assert (one.lo, one.hi, one.n) == (chunked.lo, chunked.hi, chunked.n) == (values.min(), values.max(), 1000)
    assert chunked.result_mean() == pytest.approx(values.mean(), rel=1e-12)
    assert chunked.result_std() == pytest.approx(values.std(), rel=1e-12)
    assert RunningStats().result_mean() is None and RunningStats().result_std() is None
