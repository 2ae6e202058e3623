"""``pysafetensors stats FILE``: per-tensor min, max, mean, std and NaN/Inf/zero counts, streamed.

Every dtype is covered (floats incl. BF16, F8, F6 and F4 via ml_dtypes; ints; bool as 0/1;
complex by magnitude).  min/max/mean/std are over the finite values only; NaN and Inf are
counted separately.  Tensors are read in chunks of at most 2M elements (16 MiB float64 working
copies), so memory stays bounded whatever the tensor size; mean and std are merged across
chunks with Chan's parallel formula, so they do not lose precision on long tensors.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._common import bar_enabled, emit, fmt_float, fmt_int, iter_chunks, matches, progress, render_json, table
from ._inputs import open_input


@dataclass
class TensorStats:
    name: str
    dtype: str
    shape: list[int]
    elements: int
    min: float | int | None
    max: float | int | None
    mean: float | None
    std: float | None  # population standard deviation
    nan: int
    inf: int
    zeros: int


@dataclass
class StatsResult:
    path: str
    tensors: list[TensorStats]
    filter: list[str] | None = None


class _Running:
    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.lo: Any = None
        self.hi: Any = None
        self.nan = 0
        self.inf = 0
        self.zeros = 0

    def add(self, chunk: Any, kind: str) -> None:
        import numpy as np

        if kind == "complex":
            self.zeros += int(np.count_nonzero(chunk == 0))
            self.nan += int(np.count_nonzero(np.isnan(chunk)))
            self.inf += int(np.count_nonzero(np.isinf(chunk) & ~np.isnan(chunk)))
            x = np.abs(chunk).astype(np.float64)
            x = x[np.isfinite(x)]
        elif kind in ("int", "uint", "bool"):
            native = chunk.astype(np.uint8) if kind == "bool" else chunk
            self.zeros += int(np.count_nonzero(native == 0))
            if native.size:
                lo, hi = int(native.min()), int(native.max())  # exact, even for 64-bit ints
                self.lo = lo if self.lo is None else min(self.lo, lo)
                self.hi = hi if self.hi is None else max(self.hi, hi)
            x = native.astype(np.float64)
            self._moments(x)
            return
        else:
            x = chunk.astype(np.float64)
            nan = np.isnan(x)
            inf = np.isinf(x)
            self.nan += int(np.count_nonzero(nan))
            self.inf += int(np.count_nonzero(inf))
            self.zeros += int(np.count_nonzero(x == 0))
            if self.nan or self.inf:
                x = x[~(nan | inf)]
        if x.size:
            lo_f, hi_f = float(x.min()), float(x.max())
            self.lo = lo_f if self.lo is None else min(self.lo, lo_f)
            self.hi = hi_f if self.hi is None else max(self.hi, hi_f)
        self._moments(x)

    def _moments(self, x: Any) -> None:
        nb = int(x.size)
        if not nb:
            return
        mb = float(x.mean())
        m2b = float(((x - mb) ** 2).sum())
        n = self.n + nb
        delta = mb - self.mean
        self.mean += delta * nb / n
        self.m2 += m2b + delta * delta * self.n * nb / n
        self.n = n


def compute_stats(path: str, patterns: Sequence[str] | None = None, show_progress: bool = False) -> StatsResult:
    """Statistics for every tensor of ``path`` that ``patterns`` selects, in file order."""
    out = []
    with open_input(path) as inp:
        chosen = [t for t in inp.tensors if matches(t.name, patterns)]
        with progress(sum(t.nbytes for t in chosen), "stats", show_progress) as bar:
            for t in chosen:
                acc = _Running()
                for chunk in iter_chunks(inp.data(t.name), t.dtype, t.nelements):
                    acc.add(chunk, t.dtype.kind)
                    bar.update(chunk.size * t.dtype.bits // 8)
                has = acc.n > 0
                out.append(TensorStats(
                    t.name, t.dtype.code, list(t.shape), t.nelements, acc.lo, acc.hi,
                    acc.mean if has else None, math.sqrt(max(acc.m2 / acc.n, 0.0)) if has else None,
                    acc.nan, acc.inf, acc.zeros,
                ))
    return StatsResult(path, out, list(patterns) if patterns else None)


def render_stats(r: StatsResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    rows = [[s.name, s.dtype, str(s.shape), fmt_float(s.min), fmt_float(s.max), fmt_float(s.mean), fmt_float(s.std),
             fmt_int(s.nan), fmt_int(s.inf), fmt_int(s.zeros)] for s in r.tensors]
    head = ["name", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf", "zeros"]
    return table(rows, head, right=range(3, 10)) + "\n"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("stats", parents=[common_options()], help="per-tensor min/max/mean/std, NaN/Inf/zero counts")
    p.add_argument("file")
    p.add_argument("--filter", action="append", metavar="GLOB", help="only tensors whose name matches (repeatable)")


def run(args: argparse.Namespace) -> int:
    emit(render_stats(compute_stats(args.file, args.filter, bar_enabled(args)), "json" if args.json else "text"))
    return 0
