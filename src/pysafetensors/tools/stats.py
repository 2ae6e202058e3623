"""Per-tensor min, max, mean, std and NaN/Inf/zero counts, streamed in bounded chunks.

Every dtype is covered (floats incl. BF16, F8, F6 and F4 via ml_dtypes; ints; bool as 0/1;
complex by magnitude, computed in complex128 so a large complex64 does not overflow).
min/max/mean/std are over the finite values only; NaN and Inf are counted separately.
Integers keep exact min/max (64-bit included).

Mean and std are merged across chunks with Chan's parallel formula on values scaled by a
power of two at least their largest magnitude (exact scaling, rescaled when a later chunk is
larger), so squares never overflow: finite data gives finite results (``[1e200, -1e200]``
has std 1e200), and long tensors do not lose precision.  No floating-point warning escapes.

GGUF tensors are described by their GGML type (``dtype`` is ``Q4_K``) and their values are the
dequantized ones (gguf-py), decoded a few rows per chunk: a quantized tensor is never whole in
memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._base import JsonResult, Progress, no_progress
from ._chunks import iter_chunks
from .checkpoint import (
    AnyCheckpoint,
    TensorAccess,
    TensorBytes,
    ValueTensor,
    matches,
    open_checkpoint,
    stream_tensors,
)


@dataclass
class TensorStats(JsonResult):
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
class StatsResult(JsonResult):
    path: str
    tensors: list[TensorStats]
    filter: list[str] | None = None


class RunningStats:
    """Statistics of a stream of chunks (numpy arrays of one dtype kind)."""

    def __init__(self) -> None:
        self.n = 0  # finite values seen
        self.mean = 0.0  # of the values scaled by 2**-exp
        self.m2 = 0.0  # sum of squared deviations, scaled by 2**-(2*exp)
        self.exp: int | None = None  # the scale's exponent: 2**exp > every |value| so far
        self.lo: Any = None
        self.hi: Any = None
        self.nan = 0
        self.inf = 0
        self.zeros = 0

    def add(self, chunk: Any, kind: str) -> None:
        import numpy as np

        with np.errstate(all="ignore"):
            self._add(chunk, kind, np)

    def _add(self, chunk: Any, kind: str, np: Any) -> None:
        if kind in ("int", "uint", "bool"):
            native = chunk.astype(np.uint8) if kind == "bool" else chunk
            self.zeros += int(np.count_nonzero(native == 0))
            if native.size:
                lo, hi = int(native.min()), int(native.max())  # exact, even for 64-bit ints
                self.lo = lo if self.lo is None else min(self.lo, lo)
                self.hi = hi if self.hi is None else max(self.hi, hi)
            self._moments(native.astype(np.float64), np)
            return
        if kind == "complex":
            wide = chunk.astype(np.complex128)
            self.zeros += int(np.count_nonzero(wide == 0))
            nan = np.isnan(wide)
            self.nan += int(np.count_nonzero(nan))
            self.inf += int(np.count_nonzero(np.isinf(wide) & ~nan))
            x = np.abs(wide)
            x = x[np.isfinite(x)]
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
        self._moments(x, np)

    def _moments(self, x: Any, np: Any) -> None:
        nb = int(x.size)
        if not nb:
            return
        amax = max(float(x.max()), -float(x.min()))
        if amax > 0:
            exp = math.frexp(amax)[1]  # amax < 2**exp
            if self.exp is None or exp > self.exp:
                if self.exp is not None:  # rescale what is accumulated (exact: powers of two)
                    self.mean = math.ldexp(self.mean, self.exp - exp)
                    self.m2 = math.ldexp(self.m2, 2 * (self.exp - exp))
                self.exp = exp
        y = np.ldexp(x, -self.exp) if self.exp is not None else x
        mb = float(y.mean())
        m2b = float(np.square(y - mb).sum())
        n = self.n + nb
        delta = mb - self.mean
        self.mean += delta * nb / n
        self.m2 += m2b + delta * delta * self.n * nb / n
        self.n = n

    def result_mean(self) -> float | None:
        if not self.n:
            return None
        return math.ldexp(self.mean, self.exp or 0)

    def result_std(self) -> float | None:
        if not self.n:
            return None
        return math.ldexp(math.sqrt(max(self.m2 / self.n, 0.0)), self.exp or 0)


def stats_of(info: ValueTensor, data: TensorBytes, bar: Any = None) -> TensorStats:
    """The statistics of one tensor's bytes, chunk by chunk; the tensor is described by its stored
    type (a GGUF tensor's GGML type, not the dtype its values read as)."""
    acc = RunningStats()
    for chunk in iter_chunks(data, info.dtype, info.nelements):
        acc.add(chunk, info.dtype.kind)
        if bar is not None:
            bar.update(chunk.size * info.dtype.bits // 8)
    return TensorStats(
        info.name, info.type, list(info.shape), info.nelements, acc.lo, acc.hi,
        acc.result_mean(), acc.result_std(), acc.nan, acc.inf, acc.zeros,
    )


def tensor_stats(ckpt: TensorAccess, name: str) -> TensorStats:
    """One tensor's statistics, reading only that tensor's bytes."""
    return stats_of(ckpt.info(name), ckpt.data(name))


def file_stats(
    ckpt: AnyCheckpoint | str, patterns: Sequence[str] | None = None, progress: Progress = no_progress
) -> StatsResult:
    """Statistics for every tensor ``patterns`` select, in file order (remote inputs read ahead)."""
    if isinstance(ckpt, (str, os.PathLike)):
        with open_checkpoint(ckpt, gguf=True) as opened:
            return file_stats(opened, patterns, progress)
    chosen = [t for t in ckpt.tensors if matches(t.name, patterns)]
    # the bar counts the values read (a GGUF tensor's dequantized, not its stored bytes)
    with progress(sum(t.dtype.nbytes(t.nelements) for t in chosen), "stats") as bar:
        out = [stats_of(info, data, bar) for info, data in stream_tensors(ckpt, [t.name for t in chosen])]
    return StatsResult(ckpt.path, out, list(patterns) if patterns else None)
