"""stats: every dtype family against numpy, chunked == whole, NaN/Inf/zero counts, filter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.tools import _chunks
from pysafetensors.tools.stats import file_stats as compute_stats

from .conftest import run_cli, sample_tensors


def _expected(a: np.ndarray) -> dict:
    if np.iscomplexobj(a):  # magnitudes computed in complex128 (no float32 rounding or overflow)
        x = np.abs(a.astype(np.complex128)).ravel()
    else:
        x = a.astype(np.float64).ravel()
    finite = x[np.isfinite(x)]
    return {"min": finite.min(), "max": finite.max(), "mean": finite.mean(), "std": finite.std(),
            "nan": int(np.isnan(x).sum()), "inf": int(np.isinf(x).sum()), "zeros": int((a.ravel() == 0).sum())}


def test_every_dtype_matches_numpy(sample: Path) -> None:
    arrays = sample_tensors()
    r = compute_stats(str(sample))
    assert {s.name for s in r.tensors} == set(arrays)
    for s in r.tensors:
        exp = _expected(arrays[s.name])
        assert s.elements == max(arrays[s.name].size, 1)
        for key in ("min", "max", "mean", "std"):
            assert getattr(s, key) == pytest.approx(exp[key], rel=1e-9, abs=1e-12), (s.name, key)
        assert (s.nan, s.inf, s.zeros) == (exp["nan"], exp["inf"], exp["zeros"]), s.name
    bias = next(s for s in r.tensors if s.name == "encoder.layer.0.bias")
    assert (bias.nan, bias.inf, bias.zeros) == (1, 1, 6)
    ids = next(s for s in r.tensors if s.name == "embeddings.position_ids")
    assert (ids.min, ids.max) == (0, 9) and isinstance(ids.min, int)


def test_chunked_equals_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ml_dtypes

    from pysafetensors.numpy import save_file

    rng = np.random.default_rng(2)
    t = {"f": (rng.standard_normal(1003) * 100 + 1e4).astype(np.float32),
         "f6": rng.standard_normal(64).astype(ml_dtypes.float6_e2m3fn),
         "i": rng.integers(-(2**62), 2**62, 101, dtype=np.int64)}
    path = tmp_path / "c.safetensors"
    save_file(t, str(path))
    whole = compute_stats(str(path))
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 8)
    chunked = compute_stats(str(path))
    for w, c in zip(whole.tensors, chunked.tensors):
        assert (w.min, w.max, w.nan, w.inf, w.zeros) == (c.min, c.max, c.nan, c.inf, c.zeros)
        assert c.mean == pytest.approx(w.mean, rel=1e-12) and c.std == pytest.approx(w.std, rel=1e-9)
    ints = next(s for s in chunked.tensors if s.name == "i")
    assert ints.min == int(t["i"].min()) and ints.max == int(t["i"].max())  # exact for 64-bit
    assert next(s for s in chunked.tensors if s.name == "f").std == pytest.approx(float(t["f"].astype(np.float64).std()))


def test_empty_and_all_nan(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "e.safetensors"
    save_file({"empty": np.zeros((0, 3), np.float32), "nan": np.full(4, np.nan, np.float16)}, str(path))
    by = {s.name: s for s in compute_stats(str(path)).tensors}
    assert by["empty"].elements == 0 and by["empty"].min is None and by["empty"].mean is None
    assert by["nan"].nan == 4 and by["nan"].max is None
    data = json.loads(run_cli("stats", path, "--json").out)
    assert data["tensors"][0]["min"] is None


def test_filter_and_text(sample: Path) -> None:
    r = run_cli("stats", sample, "--filter", "head.*")
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0].split() == ["name", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf", "zeros"]
    assert {ln.split()[0] for ln in lines[2:]} == {"head.f8", "head.f4", "head.u8", "head.c64"}


def test_real_model(real_model: Path) -> None:
    r = run_cli("stats", real_model, "--filter", "embeddings.*", "--json")
    assert r.code == 0
    data = json.loads(r.out)
    ids = next(t for t in data["tensors"] if t["name"] == "embeddings.position_ids")
    assert ids["dtype"] == "I64" and ids["min"] == 0 and ids["max"] == 511
    assert all(t["nan"] == 0 and t["inf"] == 0 for t in data["tensors"])


def test_memory_is_bounded_by_the_chunk_not_the_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stats and diff --values allocate per chunk: peak numpy memory stays far below the tensor size."""
    import tracemalloc

    from pysafetensors.numpy import save_file
    from pysafetensors.tools.diff import diff_files as compute_diff

    n = 4 << 20  # a 16 MB float32 tensor
    path = tmp_path / "big.safetensors"
    save_file({"t": np.arange(n, dtype=np.float32)}, str(path))
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 16)  # 64K elements: ~0.5 MB float64 copies
    for run in (lambda: compute_stats(str(path)), lambda: compute_diff(str(path), str(path), values=True)):
        tracemalloc.start()
        try:
            run()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20, peak  # whole-tensor float64 copies would be 32 MB each


def test_finite_data_gives_finite_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ml_dtypes

    from pysafetensors.numpy import save_file

    path = tmp_path / "huge.safetensors"
    tiny = np.full(5, 3e-300)
    save_file({"a": np.array([1e200, -1e200]), "b": np.concatenate([tiny, [1.5e308, -1.5e308]]),
               "c": np.array([3e38 + 3e38j, 0], np.complex64), "t": tiny,
               "bf": np.array([3e38, -3e38], ml_dtypes.bfloat16)}, str(path))
    for chunk in (None, 2):  # whole, and chunks whose scale grows from 3e-300 to 1.5e308
        if chunk:
            monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", chunk)
        by = {s.name: s for s in compute_stats(str(path)).tensors}
        assert by["a"].mean == 0.0 and by["a"].std == 1e200
        b = np.concatenate([tiny, [1.5e308, -1.5e308]])
        assert by["b"].std == pytest.approx(1.5e308 * np.sqrt(2 / 7), rel=1e-12)
        assert by["b"].mean == pytest.approx(b[:5].sum() / 7, rel=1e-6, abs=1e-290)
        assert by["t"].mean == pytest.approx(3e-300, rel=1e-12) and by["t"].std == pytest.approx(0.0, abs=1e-310)
        assert by["c"].max == pytest.approx(abs(complex(3e38, 3e38)), rel=1e-6) and by["c"].inf == 0
        bf = float(np.array(3e38, ml_dtypes.bfloat16).astype(np.float64))
        assert by["bf"].std == pytest.approx(bf)


def test_no_warning_reaches_stderr(tmp_path: Path) -> None:
    import subprocess
    import sys

    from pysafetensors.numpy import save_file

    path = tmp_path / "huge.safetensors"
    save_file({"a": np.array([1e200, -1e200]), "n": np.array([np.nan, np.inf, 1.0], np.float16)}, str(path))
    src = Path(__file__).resolve().parents[2] / "src"
    p = subprocess.run([sys.executable, "-W", "default", "-m", "pysafetensors", "stats", str(path), "--json"],
                       capture_output=True, text=True, timeout=120, check=False, env={"PYTHONPATH": str(src)})
    assert p.returncode == 0 and p.stderr == ""
    a = next(t for t in json.loads(p.stdout)["tensors"] if t["name"] == "a")
    assert a["std"] == 1e200
