"""The tools are usable without argparse, and their to_dict() is exactly what --json prints."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from cli.conftest import SAMPLE_METADATA, run_cli, sample_tensors
from hypothesis import given, settings
from hypothesis import strategies as st

from pysafetensors.numpy import save_file
from pysafetensors.tools import _chunks
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.diff import diff_files, tensor_value_diff
from pysafetensors.tools.identity import identify
from pysafetensors.tools.metadata import read_metadata
from pysafetensors.tools.stats import RunningStats, file_stats, tensor_stats
from pysafetensors.tools.summary import summarize


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "sample.safetensors"
    save_file(sample_tensors(), str(path), metadata=dict(SAMPLE_METADATA))
    return path


def _cli(*args: object) -> dict:
    r = run_cli(*args, "--json")
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def test_to_dict_is_the_json_output(sample: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.safetensors"
    save_file({k: v for k, v in sample_tensors().items() if k != "mask"}, str(other))
    with open_checkpoint(sample) as ckpt, open_checkpoint(other) as ockpt:
        assert summarize(ckpt, tree=True).to_dict() == _cli("inspect", sample, "--tree")
        assert identify(ckpt, content=True, per_tensor=True).to_dict() == _cli("id", sample, "--content", "--tensors")
        assert file_stats(ckpt).to_dict() == _cli("stats", sample)
        assert read_metadata(ckpt).to_dict() == _cli("metadata", sample, "get")
        assert diff_files(ckpt, ockpt, values=True).to_dict() == _cli("diff", sample, other, "--values")
        one = tensor_stats(ckpt, "encoder.layer.0.weight").to_dict()
        assert one in file_stats(ckpt).to_dict()["tensors"]
        assert tensor_value_diff(ckpt, ockpt, "scale").to_dict()["differing"] == 0
    # Paths work too, and the JSON keys are the ones the CLI has always printed.
    keys = set(summarize(str(sample)).to_dict())
    assert keys >= {"path", "file_size", "header_size", "tensor_count", "parameter_count", "parameters_by_dtype",
                    "bytes_by_dtype", "metadata", "modelspec", "tensors", "filter", "total_tensor_count", "files",
                    "tree"}


def _exact_stats(values: list[float]) -> tuple[float, float]:
    """Mean and population std in exact rational arithmetic (the std rounded once, at the end)."""
    xs = [Fraction(v) for v in values]
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / len(xs)
    # sqrt(num/den) to 64+ bits: isqrt of the ratio scaled by 4**k, then divided by 2**k.
    k = max(0, 64 - (var.numerator.bit_length() - var.denominator.bit_length()) // 2)
    root = math.isqrt(var.numerator * 4**k // var.denominator)
    return float(mean), float(Fraction(root, 2**k))


finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite64, min_size=1, max_size=40), st.integers(1, 7))
def test_running_stats_match_exact_arithmetic(values: list[float], chunk: int) -> None:
    acc = RunningStats()
    arr = np.array(values, np.float64)
    for i in range(0, len(arr), chunk):
        acc.add(arr[i : i + chunk], "float")
    mean, std = _exact_stats(values)
    scale = max(abs(v) for v in values)
    got_mean, got_std = acc.result_mean(), acc.result_std()
    assert got_mean is not None and got_std is not None
    assert np.isfinite(got_mean) and np.isfinite(got_std)  # finite data, finite results
    assert abs(got_mean - mean) <= 1e-12 * scale
    assert abs(got_std - std) <= 1e-9 * std + 1e-12 * scale


def test_chunk_constant_is_read_at_call_time(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = file_stats(str(sample)).to_dict()
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 3)
    chunked = file_stats(str(sample)).to_dict()
    for w, c in zip(whole["tensors"], chunked["tensors"]):
        assert {k: v for k, v in w.items() if k not in ("mean", "std")} == {
            k: v for k, v in c.items() if k not in ("mean", "std")}
