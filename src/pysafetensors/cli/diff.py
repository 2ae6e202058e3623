"""``pysafetensors diff A B``: structural, metadata and (with --values) streamed value differences."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from ..format.header import TensorInfo
from ._common import bar_enabled, emit, fmt_float, fmt_int, iter_chunks, progress, render_json
from ._inputs import Input, open_input


@dataclass
class TensorDesc:
    name: str
    dtype: str
    shape: list[int]
    nbytes: int


@dataclass
class TensorChange:
    name: str
    a: TensorDesc
    b: TensorDesc
    changes: list[str]  # among "dtype", "shape", "nbytes"


@dataclass
class ValueDiff:
    name: str
    compared: bool
    elements: int = 0
    differing: int = 0
    max_abs_diff: float | None = None
    cosine_similarity: float | None = None
    reason: str | None = None  # why a tensor was not compared


@dataclass
class DiffResult:
    a: str
    b: str
    same: bool
    tensors_added: list[TensorDesc] = field(default_factory=list)
    tensors_removed: list[TensorDesc] = field(default_factory=list)
    tensors_changed: list[TensorChange] = field(default_factory=list)
    tensors_unchanged: int = 0
    metadata_added: dict[str, str] = field(default_factory=dict)
    metadata_removed: dict[str, str] = field(default_factory=dict)
    metadata_changed: dict[str, dict[str, str]] = field(default_factory=dict)
    values: list[ValueDiff] | None = None
    rtol: float | None = None
    atol: float | None = None


def _desc(t: TensorInfo) -> TensorDesc:
    return TensorDesc(t.name, t.dtype.code, list(t.shape), t.nbytes)


class _Acc:
    """Running comparison of two tensors, chunk by chunk (float64 / complex128 working copies)."""

    def __init__(self) -> None:
        self.differing = 0
        self.max_abs = 0.0
        self.dot = 0.0
        self.na = 0.0
        self.nb = 0.0

    def add(self, xa: Any, xb: Any, exact_bits: bool, rtol: float | None, atol: float | None) -> None:
        import numpy as np

        work = np.complex128 if np.iscomplexobj(xa) or np.iscomplexobj(xb) else np.float64
        fa = xa.astype(work)
        fb = xb.astype(work)
        if exact_bits and xa.tobytes() == xb.tobytes():
            # Identical chunk (the common case when checking a copy): only the norms are needed.
            self._norms(fa, fa, np)
            return
        if exact_bits:  # same dtype, exact: compare bit patterns (-0.0 != 0.0, equal NaNs match)
            ua = xa.view(f"u{xa.dtype.itemsize}") if xa.dtype.itemsize > 1 else xa.view(np.uint8)
            ub = xb.view(f"u{xb.dtype.itemsize}") if xb.dtype.itemsize > 1 else xb.view(np.uint8)
            self.differing += int(np.count_nonzero(ua != ub))
        same = (fa == fb) | (np.isnan(fa) & np.isnan(fb))
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(fa - fb)
        d = np.where(same, 0.0, d)
        np.nan_to_num(d, copy=False, nan=math.inf)  # NaN against a number, or inf - inf of opposite signs
        if d.size:
            self.max_abs = max(self.max_abs, float(d.max()))
        if not exact_bits:
            if rtol is None and atol is None:
                self.differing += int(d.size - np.count_nonzero(same))
            else:
                with np.errstate(invalid="ignore", over="ignore"):
                    close = np.isclose(fa, fb, rtol=rtol or 0.0, atol=atol or 0.0, equal_nan=True)
                self.differing += int(np.count_nonzero(~(close | same)))
        self._norms(fa, fb, np)

    def _norms(self, fa: Any, fb: Any, np: Any) -> None:
        finite = np.isfinite(fa) & np.isfinite(fb)
        if not finite.all():  # cosine is over the finite pairs only
            fa, fb = np.where(finite, fa, 0), np.where(finite, fb, 0)
        with np.errstate(over="ignore", invalid="ignore"):
            self.dot += float(np.vdot(fa, fb).real)
            self.na += float(np.vdot(fa, fa).real)
            self.nb += float(np.vdot(fb, fb).real) if fb is not fa else float(np.vdot(fa, fa).real)

    def cosine(self) -> float | None:
        denom = math.sqrt(self.na) * math.sqrt(self.nb)
        if denom == 0 or not math.isfinite(denom):
            return None  # undefined for an all-zero tensor
        return max(-1.0, min(1.0, self.dot / denom))  # rounding can step just past +-1


def _compare_values(
    ia: Input, ib: Input, ta: TensorInfo, tb: TensorInfo, rtol: float | None, atol: float | None, bar: Any
) -> ValueDiff:
    if ta.shape != tb.shape:
        return ValueDiff(ta.name, False, reason="shapes differ")
    n = ta.nelements
    exact_bits = ta.dtype == tb.dtype and rtol is None and atol is None
    acc = _Acc()
    da, db = ia.data(ta.name), ib.data(tb.name)
    for xa, xb in zip(iter_chunks(da, ta.dtype, n), iter_chunks(db, tb.dtype, n)):
        acc.add(xa, xb, exact_bits, rtol, atol)
        bar.update(xa.size * ta.dtype.bits // 8)
    return ValueDiff(ta.name, True, n, acc.differing, acc.max_abs if n else None, acc.cosine())


def compute_diff(
    path_a: str,
    path_b: str,
    values: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    show_progress: bool = False,
) -> DiffResult:
    """Compare two checkpoints.  ``same`` is False on any structural, metadata or value difference."""
    with open_input(path_a) as ia, open_input(path_b) as ib:
        a = {t.name: t for t in ia.tensors}
        b = {t.name: t for t in ib.tensors}
        r = DiffResult(path_a, path_b, True, rtol=rtol, atol=atol)
        r.tensors_added = [_desc(b[n]) for n in sorted(set(b) - set(a))]
        r.tensors_removed = [_desc(a[n]) for n in sorted(set(a) - set(b))]
        common = sorted(set(a) & set(b))
        for name in common:
            ta, tb = a[name], b[name]
            changes = [k for k, x, y in (("dtype", ta.dtype, tb.dtype), ("shape", ta.shape, tb.shape),
                                         ("nbytes", ta.nbytes, tb.nbytes)) if x != y]
            if changes:
                r.tensors_changed.append(TensorChange(name, _desc(ta), _desc(tb), changes))
        r.tensors_unchanged = len(common) - len(r.tensors_changed)
        ma, mb = ia.metadata or {}, ib.metadata or {}
        r.metadata_added = {k: mb[k] for k in sorted(set(mb) - set(ma))}
        r.metadata_removed = {k: ma[k] for k in sorted(set(ma) - set(mb))}
        r.metadata_changed = {k: {"a": ma[k], "b": mb[k]} for k in sorted(set(ma) & set(mb)) if ma[k] != mb[k]}
        if values:
            total = sum(a[n].nbytes for n in common)
            with progress(total, "comparing", show_progress) as bar:
                r.values = [_compare_values(ia, ib, a[n], b[n], rtol, atol, bar) for n in common]
        r.same = not (
            r.tensors_added or r.tensors_removed or r.tensors_changed
            or r.metadata_added or r.metadata_removed or r.metadata_changed
            or any(v.differing or not v.compared for v in r.values or [])
        )
        return r


def _shape(d: TensorDesc) -> str:
    return f"{d.dtype} {d.shape}"


def _value_line(v: ValueDiff) -> list[str]:
    if not v.compared:
        return [v.name, "-", "-", "-", v.reason or ""]
    return [v.name, f"{fmt_int(v.differing)}/{fmt_int(v.elements)}", fmt_float(v.max_abs_diff),
            fmt_float(v.cosine_similarity), ""]


def render_diff(r: DiffResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    md = fmt == "md"
    out: list[str] = []
    if md:
        out += [f"# diff `{r.a}` vs `{r.b}`", ""]
    else:
        out += [f"--- {r.a}", f"+++ {r.b}"]
    out.append(
        f"tensors: {len(r.tensors_added)} added, {len(r.tensors_removed)} removed, "
        f"{len(r.tensors_changed)} changed, {r.tensors_unchanged} unchanged"
    )
    rows: list[list[str]] = []
    rows += [["+", d.name, _shape(d)] for d in r.tensors_added]
    rows += [["-", d.name, _shape(d)] for d in r.tensors_removed]
    rows += [["~", c.name, f"{_shape(c.a)} -> {_shape(c.b)}"] for c in r.tensors_changed]
    meta: list[list[str]] = []
    meta += [["+", k, repr(v)] for k, v in r.metadata_added.items()]
    meta += [["-", k, repr(v)] for k, v in r.metadata_removed.items()]
    meta += [["~", k, f"{c['a']!r} -> {c['b']!r}"] for k, c in r.metadata_changed.items()]
    values = [_value_line(v) for v in r.values or [] if v.differing or not v.compared]
    if md:
        if rows:
            out += ["", "| | tensor | change |", "|---|---|---|"] + [f"| {a} | `{b}` | {c} |" for a, b, c in rows]
        counts = (f"metadata: {len(r.metadata_added)} added, {len(r.metadata_removed)} removed, "
                  f"{len(r.metadata_changed)} changed")
        out += ["", counts]
        if meta:
            out += ["", "| | key | value |", "|---|---|---|"] + [f"| {a} | `{b}` | {c} |" for a, b, c in meta]
        if r.values is not None:
            out += ["", f"values ({_tol(r)}): {len(values)} of {len(r.values)} tensors differ"]
            if values:
                out += ["", "| tensor | differing | max abs diff | cosine | note |", "|---|---|---|---|---|"]
                out += [f"| `{v[0]}` | {v[1]} | {v[2]} | {v[3]} | {v[4]} |" for v in values]
    else:
        out += [f"{a} {b}  {c}" for a, b, c in rows]
        out.append(f"metadata: {len(r.metadata_added)} added, {len(r.metadata_removed)} removed, "
                   f"{len(r.metadata_changed)} changed")
        out += [f"{a} {b}: {c}" for a, b, c in meta]
        if r.values is not None:
            out.append(f"values ({_tol(r)}): {len(values)} of {len(r.values)} compared tensors differ")
            out += [f"~ {v[0]}  differing {v[1]}  max_abs_diff {v[2]}  cosine {v[3]}" + (f"  ({v[4]})" if v[4] else "")
                    for v in values]
    out += ["", "result: " + ("identical" if r.same else "different")]
    return "\n".join(out) + "\n"


def _tol(r: DiffResult) -> str:
    if r.rtol is None and r.atol is None:
        return "exact"
    return f"rtol={r.rtol or 0}, atol={r.atol or 0}"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("diff", parents=[common_options()], help="compare two checkpoints (exit 1 if different)")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--values", action="store_true", help="also compare tensor values, streaming")
    p.add_argument("--rtol", type=float, help="relative tolerance for --values (implies --values)")
    p.add_argument("--atol", type=float, help="absolute tolerance for --values (implies --values)")
    p.add_argument("--format", choices=("text", "json", "md"), default=None, help="output format (default text)")


def run(args: argparse.Namespace) -> int:
    values = args.values or args.rtol is not None or args.atol is not None
    for name in ("rtol", "atol"):
        v = getattr(args, name)
        if v is not None and (v < 0 or not math.isfinite(v)):
            from .main import UsageError

            raise UsageError(f"pysafetensors diff: error: --{name} must be a finite number >= 0, got {v}")
    r = compute_diff(args.a, args.b, values, args.rtol, args.atol, bar_enabled(args))
    fmt = args.format or ("json" if args.json else "text")
    emit(render_diff(r, fmt))
    return 0 if r.same else 1
