"""``pysafetensors diff A B``: structural, metadata and (with --values) streamed value differences.

The comparison is :func:`pysafetensors.tools.diff.diff_files` (its docstring gives the rules
for integers, floats and tolerances, and how a GGUF side is matched); this module renders it.
With a GGUF side, text output says how names were matched, and long metadata values (a
tokenizer's vocabulary) are shortened; ``--json`` has them in full.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from ..tools.diff import DiffResult, GGUFDiffResult, TensorDesc, ValueDiff, diff_files
from ._common import (
    emit,
    first_names,
    fmt_float,
    fmt_int,
    gguf_order_warning,
    plural,
    progress_factory,
    render_json,
    short_text,
    terminal_safe,
)
from ._inputs import open_input


def _quote(value: str) -> str:
    return f"'{value}'"


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
    gguf = r if isinstance(r, GGUFDiffResult) else None
    if gguf is not None:
        r = _shortened(gguf)
    r = terminal_safe(r)
    md = fmt == "md"
    out: list[str] = []
    if md:
        out += [f"# diff `{r.a}` vs `{r.b}`", ""]
    else:
        out += [f"--- {r.a}", f"+++ {r.b}"]
    if gguf is not None:
        out += _gguf_lines(terminal_safe(gguf)) + ([""] if md else [])
    out.append(
        f"tensors: {len(r.tensors_added)} added, {len(r.tensors_removed)} removed, "
        f"{len(r.tensors_changed)} changed, {r.tensors_unchanged} unchanged"
    )
    rows: list[list[str]] = []
    rows += [["+", d.name, _shape(d)] for d in r.tensors_added]
    rows += [["-", d.name, _shape(d)] for d in r.tensors_removed]
    rows += [["~", c.name, f"{_shape(c.a)} -> {_shape(c.b)}"] for c in r.tensors_changed]
    meta: list[list[str]] = []
    meta += [["+", k, _quote(v)] for k, v in r.metadata_added.items()]
    meta += [["-", k, _quote(v)] for k, v in r.metadata_removed.items()]
    meta += [["~", k, f"{_quote(c['a'])} -> {_quote(c['b'])}"] for k, c in r.metadata_changed.items()]
    values = [_value_line(v) for v in r.values or [] if v.differing or not v.compared]
    if md:
        if rows:
            out += ["", "| | tensor | change |", "|---|---|---|"] + [f"| {a} | `{b}` | {c} |" for a, b, c in rows]
        counts = (f"metadata: {len(r.metadata_added)} added, {len(r.metadata_removed)} removed, "
                  f"{len(r.metadata_changed)} changed") if gguf is None or gguf.metadata_compared else _NOT_COMPARED
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
                   f"{len(r.metadata_changed)} changed" if gguf is None or gguf.metadata_compared else _NOT_COMPARED)
        out += [f"{a} {b}: {c}" for a, b, c in meta]
        if r.values is not None:
            out.append(f"values ({_tol(r)}): {len(values)} of {len(r.values)} compared tensors differ")
            out += [f"~ {v[0]}  differing {v[1]}  max_abs_diff {v[2]}  cosine {v[3]}" + (f"  ({v[4]})" if v[4] else "")
                    for v in values]
    out += ["", "result: " + ("identical" if r.same else "different")]
    return "\n".join(out) + "\n"


_NOT_COMPARED = "metadata: not compared (a GGUF's metadata and a safetensors __metadata__ say different things)"


def _shortened(r: GGUFDiffResult) -> GGUFDiffResult:
    import dataclasses

    return dataclasses.replace(
        r,
        metadata_added={k: short_text(v) for k, v in r.metadata_added.items()},
        metadata_removed={k: short_text(v) for k, v in r.metadata_removed.items()},
        metadata_changed={k: {s: short_text(v) for s, v in c.items()} for k, c in r.metadata_changed.items()},
    )


def _gguf_lines(r: GGUFDiffResult) -> list[str]:
    out = [f"formats: {r.formats[0]} vs {r.formats[1]}"]
    if r.names_mapped:
        line = (f"names: {plural(r.names_mapped, 'GGUF name')} shown as Hugging Face names "
                f"(gguf-py's map for {r.architecture})")
        if r.unpermuted:
            line += f"; q/k rows put back in Hugging Face order in {plural(len(r.unpermuted), 'tensor')}"
        out.append(line)
        if r.unmapped:
            shown = first_names(r.unmapped)
            out.append(f"names: {plural(len(r.unmapped), 'GGUF name')} gguf-py could not map: {shown}")
    if r.left_in_gguf_order:
        out.append(gguf_order_warning(list(r.left_in_gguf_order), "compared"))
    return out


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
    with open_input(args.a, gguf=True) as a, open_input(args.b, gguf=True) as b:
        r = diff_files(a, b, values, args.rtol, args.atol, progress_factory(args))
    fmt = args.format or ("json" if args.json else "text")
    emit(render_diff(r, fmt))
    return 0 if r.same else 1
