"""A tensor's values at a glance, for the viewer: a histogram and a downsampled heatmap.

Both stream the tensor in bounded chunks (:mod:`._chunks`), so memory stays bounded whatever
the tensor size, and read only that tensor's bytes.

* :func:`histogram`: counts of the finite values (complex: magnitudes) in ``bins`` equal bins
  over ``value_range`` (default: the finite minimum to maximum, as ``numpy.histogram``).
  Without a range, a tensor larger than one chunk is read twice (the range, then the counts);
  one that fits in a chunk is read once.
* :func:`heatmap`: a tensor of two or more dimensions viewed as a matrix (leading dimensions
  folded into rows), reduced to at most ``max_cells`` x ``max_cells`` cells, each the mean
  (or the largest magnitude) of the finite values it covers.
* :func:`difference_histogram`: the histogram of ``a - b`` for a tensor both checkpoints hold
  with the same shape (the viewer's diff page).

Each takes a :class:`~pysafetensors.tools.checkpoint.Checkpoint` or a GGUFCheckpoint: a GGUF
tensor's values are its dequantized ones (``dtype`` F32 for quantized types), decoded a few
rows per chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import UnsupportedShape
from ._base import JsonResult
from ._chunks import iter_chunks
from .checkpoint import TensorAccess

MAX_CELLS = 512


@dataclass
class Histogram(JsonResult):
    name: str
    dtype: str
    of: str  # "values", "magnitudes" (complex) or "differences"
    edges: list[float]  # bins + 1 edges
    counts: list[int]
    finite: int  # finite values counted in some bin
    nan: int
    inf: int
    outside: int  # finite values outside value_range (when one was given)


@dataclass
class Heatmap(JsonResult):
    name: str
    dtype: str
    shape: list[int]
    rows: int  # the matrix view: leading dimensions folded into rows
    cols: int
    reduce: str  # "mean" or "max_abs"
    row_edges: list[int]  # cell i covers rows row_edges[i]..row_edges[i+1]-1
    col_edges: list[int]
    cells: list[list[float | None]]  # None: no finite value in the cell
    min: float | None  # over the cells
    max: float | None


def _as_float(chunk: Any, kind: str, np: Any) -> Any:
    if kind == "complex":
        return np.abs(chunk.astype(np.complex128))
    if kind == "bool":
        return chunk.astype(np.uint8).astype(np.float64)
    return chunk.astype(np.float64)


def _value_chunks(ckpt: TensorAccess, name: str) -> Callable[[], Iterator[Any]]:
    import numpy as np

    info = ckpt.info(name)

    def chunks() -> Iterator[Any]:
        for c in iter_chunks(ckpt.data(name), info.dtype, info.nelements):
            with np.errstate(all="ignore"):
                yield _as_float(c, info.dtype.kind, np)

    return chunks


def _histogram(
    name: str, dtype: str, of: str, chunks: Callable[[], Iterator[Any]], bins: int,
    value_range: tuple[float, float] | None,
) -> Histogram:
    import numpy as np

    if not isinstance(bins, int) or isinstance(bins, bool) or not 1 <= bins <= 10_000:
        raise ValueError(f"bins must be an integer from 1 to 10000, got {bins!r}")
    held: list[Any] | None = None
    if value_range is None:
        lo = hi = None
        it = chunks()
        held = []
        for c in it:
            finite = c[np.isfinite(c)]
            if finite.size:
                lo = float(finite.min()) if lo is None else min(lo, float(finite.min()))
                hi = float(finite.max()) if hi is None else max(hi, float(finite.max()))
            if held is not None:
                held.append(c)
                if len(held) > 1:  # more than one chunk: do not hold them, read again
                    held = None
        value_range = (0.0, 1.0) if lo is None or hi is None else (lo, hi)
    lo, hi = float(value_range[0]), float(value_range[1])
    if not (np.isfinite(lo) and np.isfinite(hi) and lo <= hi):
        raise ValueError(f"value_range must be two finite numbers, low <= high, got {value_range!r}")
    if lo == hi:  # numpy's convention for a constant tensor: a unit-wide range around it
        lo, hi = lo - 0.5, hi + 0.5
    counts = np.zeros(bins, np.int64)
    nan = inf = outside = 0
    with np.errstate(all="ignore"):
        for c in held if held is not None else chunks():
            isnan = np.isnan(c)
            nan += int(np.count_nonzero(isnan))
            inf += int(np.count_nonzero(np.isinf(c)))
            x = c[np.isfinite(c)]
            inside = (x >= lo) & (x <= hi)
            outside += int(x.size - np.count_nonzero(inside))
            counts += np.histogram(x[inside], bins=bins, range=(lo, hi))[0]
    edges = np.linspace(lo, hi, bins + 1)
    return Histogram(name, dtype, of, [float(e) for e in edges], [int(n) for n in counts],
                     int(counts.sum()), nan, inf, outside)


def histogram(
    ckpt: TensorAccess, name: str, bins: int = 64, value_range: tuple[float, float] | None = None
) -> Histogram:
    """Counts of the tensor's finite values (complex: magnitudes) in ``bins`` equal bins."""
    info = ckpt.info(name)
    of = "magnitudes" if info.dtype.kind == "complex" else "values"
    return _histogram(name, info.dtype.code, of, _value_chunks(ckpt, name), bins, value_range)


def difference_histogram(
    a: TensorAccess, b: TensorAccess, name: str, bins: int = 64, value_range: tuple[float, float] | None = None
) -> Histogram:
    """The histogram of ``a - b`` (complex: ``|a - b|``) for a tensor of the same shape in both."""
    import numpy as np

    ta, tb = a.info(name), b.info(name)
    if ta.shape != tb.shape:
        raise UnsupportedShape(f"{name}: shapes differ ({list(ta.shape)} vs {list(tb.shape)}); no value difference")
    complex_ = "complex" in (ta.dtype.kind, tb.dtype.kind)

    def chunks() -> Iterator[Any]:
        pairs = zip(iter_chunks(a.data(name), ta.dtype, ta.nelements), iter_chunks(b.data(name), tb.dtype, tb.nelements))
        for xa, xb in pairs:
            with np.errstate(all="ignore"):
                if complex_:
                    yield np.abs(xa.astype(np.complex128) - xb.astype(np.complex128))
                else:
                    yield _as_float(xa, ta.dtype.kind, np) - _as_float(xb, tb.dtype.kind, np)

    code = ta.dtype.code if ta.dtype == tb.dtype else f"{ta.dtype.code}-{tb.dtype.code}"
    return _histogram(name, code, "differences", chunks, bins, value_range)


def _edges(n: int, cells: int) -> Any:
    import numpy as np

    if cells == 0:
        return np.zeros(1, np.int64)
    # Cell k holds the indices i with i * cells // n == k: from ceil(k * n / cells).
    return -((-np.arange(cells + 1, dtype=np.int64) * n) // cells)


def heatmap(ckpt: TensorAccess, name: str, max_cells: int = MAX_CELLS, reduce: str = "mean") -> Heatmap:
    """The tensor as a matrix reduced to at most ``max_cells`` x ``max_cells`` cells.

    A tensor of shape (d0, ..., dk) is viewed as (d0*...*d(k-1), dk).  Cell (i, j) covers rows
    ``row_edges[i]`` to ``row_edges[i+1]-1`` and the same for columns (as even a split as
    integers allow); its value is the mean (``reduce="mean"``) or the largest magnitude
    (``"max_abs"``) of the finite values there (complex: magnitudes).  Streamed: two
    ``max_cells**2`` float64 accumulators plus one chunk's working copies.
    """
    import numpy as np

    if reduce not in ("mean", "max_abs"):
        raise ValueError(f"reduce must be 'mean' or 'max_abs', got {reduce!r}")
    if not isinstance(max_cells, int) or isinstance(max_cells, bool) or not 1 <= max_cells <= MAX_CELLS:
        raise ValueError(f"max_cells must be an integer from 1 to {MAX_CELLS}, got {max_cells!r}")
    info = ckpt.info(name)
    if len(info.shape) < 2:
        raise UnsupportedShape(f"{name}: a heatmap needs a tensor of two or more dimensions, shape is {list(info.shape)}")
    cols = info.shape[-1]
    rows = math.prod(info.shape[:-1])
    r_cells, c_cells = min(rows, max_cells), min(cols, max_cells)
    row_edges, col_edges = _edges(rows, r_cells), _edges(cols, c_cells)
    acc = np.zeros(r_cells * c_cells, np.float64)
    cnt = np.zeros(r_cells * c_cells, np.int64)
    start = 0
    with np.errstate(all="ignore"):
        for chunk in iter_chunks(ckpt.data(name), info.dtype, info.nelements):
            x = _as_float(chunk, info.dtype.kind, np)
            flat = np.arange(start, start + x.size, dtype=np.int64)
            start += x.size
            ok = np.isfinite(x)
            if not ok.all():
                x, flat = x[ok], flat[ok]
            r = (flat // cols) * r_cells // rows
            c = (flat % cols) * c_cells // cols
            cell = r * c_cells + c
            cnt += np.bincount(cell, minlength=acc.size)
            if reduce == "mean":
                acc += np.bincount(cell, weights=x, minlength=acc.size)
            else:
                np.maximum.at(acc, cell, np.abs(x))
        values = np.where(cnt > 0, acc / np.maximum(cnt, 1) if reduce == "mean" else acc, np.nan)
    grid = values.reshape(r_cells, c_cells)
    finite = grid[np.isfinite(grid)]
    cells = [[None if not np.isfinite(v) else float(v) for v in row] for row in grid]
    return Heatmap(
        name, info.dtype.code, list(info.shape), rows, cols, reduce,
        [int(e) for e in row_edges], [int(e) for e in col_edges], cells,
        float(finite.min()) if finite.size else None, float(finite.max()) if finite.size else None,
    )
