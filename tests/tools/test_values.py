"""tools.values: histogram and heatmap against numpy references, streamed in small chunks."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.errors import UnsupportedShape
from pysafetensors.numpy import save_file
from pysafetensors.tools import _chunks
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.values import MAX_CELLS, difference_histogram, heatmap, histogram


@pytest.fixture
def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    f = rng.standard_normal(5000).astype(np.float32)
    f[[3, 10]] = np.nan
    f[20] = np.inf
    return {
        "f": f,
        "c": (rng.standard_normal(300) + 1j * rng.standard_normal(300)).astype(np.complex64),
        "i": rng.integers(-50, 50, 777).astype(np.int16),
        "m": rng.standard_normal((1000, 700)).astype(np.float32),
        "m3": rng.standard_normal((3, 40, 9)).astype(np.float64),
        "const": np.full(10, 2.5, np.float32),
    }


@pytest.fixture
def path(tmp_path: Path, arrays: dict[str, np.ndarray]) -> Path:
    p = tmp_path / "v.safetensors"
    save_file(arrays, str(p))
    return p


@pytest.mark.parametrize("chunk", [None, 64])
def test_histogram_matches_numpy(path: Path, arrays: dict[str, np.ndarray], chunk: int | None,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if chunk:
        monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", chunk)  # many chunks: the range pass, then the counts
    with open_checkpoint(path) as ckpt:
        for name, values in (("f", arrays["f"].astype(np.float64)), ("i", arrays["i"].astype(np.float64)),
                             ("c", np.abs(arrays["c"].astype(np.complex128)))):
            h = histogram(ckpt, name, bins=17)
            finite = values[np.isfinite(values)]
            counts, edges = np.histogram(finite, bins=17)
            assert h.counts == counts.tolist(), name
            assert h.edges == pytest.approx(edges.tolist()), name
            assert h.finite == finite.size and h.outside == 0
        assert (histogram(ckpt, "f").nan, histogram(ckpt, "f").inf) == (2, 1)
        assert histogram(ckpt, "c").of == "magnitudes"
        ranged = histogram(ckpt, "f", bins=4, value_range=(-1.0, 1.0))
        finite = arrays["f"][np.isfinite(arrays["f"])].astype(np.float64)
        assert ranged.counts == np.histogram(finite, bins=4, range=(-1, 1))[0].tolist()
        assert ranged.outside == int(np.count_nonzero((finite < -1) | (finite > 1)))
        const = histogram(ckpt, "const", bins=5)
        assert const.counts == np.histogram(arrays["const"], bins=5)[0].tolist()
        with pytest.raises(ValueError, match="bins"):
            histogram(ckpt, "f", bins=0)


def _reference_heatmap(m: np.ndarray, cells: int, reduce: str) -> np.ndarray:
    rows, cols = m.shape
    r_cells, c_cells = min(rows, cells), min(cols, cells)
    re = [-(-k * rows // r_cells) for k in range(r_cells + 1)]
    ce = [-(-k * cols // c_cells) for k in range(c_cells + 1)]
    out = np.empty((r_cells, c_cells))
    for i in range(r_cells):
        for j in range(c_cells):
            block = m[re[i]:re[i + 1], ce[j]:ce[j + 1]].astype(np.float64)
            out[i, j] = block.mean() if reduce == "mean" else np.abs(block).max()
    return out


@pytest.mark.parametrize("reduce", ["mean", "max_abs"])
def test_heatmap_matches_block_reduction(path: Path, arrays: dict[str, np.ndarray], reduce: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 10_007)  # chunks that end mid-row
    with open_checkpoint(path) as ckpt:
        h = heatmap(ckpt, "m", reduce=reduce)
        assert (h.rows, h.cols) == (1000, 700)
        assert len(h.cells) == MAX_CELLS and all(len(row) == MAX_CELLS for row in h.cells)
        np.testing.assert_allclose(np.array(h.cells), _reference_heatmap(arrays["m"], MAX_CELLS, reduce), rtol=1e-9)
        small = heatmap(ckpt, "m3", max_cells=16, reduce=reduce)  # (3, 40, 9) folds to 120 x 9
        assert (small.rows, small.cols, len(small.cells), len(small.cells[0])) == (120, 9, 16, 9)
        ref = _reference_heatmap(arrays["m3"].reshape(120, 9), 16, reduce)
        np.testing.assert_allclose(np.array(small.cells), ref, rtol=1e-12)
        assert small.row_edges[0] == 0 and small.row_edges[-1] == 120
        with pytest.raises(UnsupportedShape, match="two or more dimensions"):
            heatmap(ckpt, "f")


def test_heatmap_memory_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.safetensors"
    save_file({"m": np.ones((4096, 2048), np.float32)}, str(path))  # 32 MB: 64 MB as float64
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 16)
    with open_checkpoint(path) as ckpt:
        tracemalloc.start()
        try:
            h = heatmap(ckpt, "m")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert h.min == h.max == 1.0
    # 512 x 512 cells cost ~20 MB (accumulators, and the cells as Python floats), one chunk
    # ~2 MB; the tensor in float64 would be 64 MB.
    assert peak < 28 << 20, peak


def test_difference_histogram(tmp_path: Path) -> None:
    a = np.linspace(-1, 1, 101)
    b = a.copy()
    b[::10] += 0.25
    save_file({"t": a, "s": np.zeros(3)}, str(tmp_path / "a.safetensors"))
    save_file({"t": b, "s": np.zeros((3, 1))}, str(tmp_path / "b.safetensors"))
    with open_checkpoint(tmp_path / "a.safetensors") as ca, open_checkpoint(tmp_path / "b.safetensors") as cb:
        h = difference_histogram(ca, cb, "t", bins=2)
        assert h.of == "differences" and h.counts == [11, 90]
        with pytest.raises(UnsupportedShape, match="shapes differ"):
            difference_histogram(ca, cb, "s")
