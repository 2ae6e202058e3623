"""``pysafetensors diff A B``: structural, metadata, tensor-byte and (with --values) value differences.

The comparison is :func:`pysafetensors.tools.diff.diff_files` (its docstring gives what is
compared when, the verdicts, the rules for integers, floats and tolerances, and how a GGUF side
is matched); this module renders its verdicts as they are and maps the overall one to the exit
code (:data:`EXIT_CODES`).
With a GGUF side, text output says how names were matched, and long metadata values (a
tokenizer's vocabulary) are shortened; ``--json`` has them in full.
"""

from __future__ import annotations

import argparse
import math

from ..tools.diff import (
    BYTES,
    DIFFERENT,
    EQUAL_WITHIN_TOLERANCE,
    IDENTICAL,
    SAME_STRUCTURE,
    STRUCTURE,
    VALUES_DIFFER,
    VALUES_EQUAL,
    DiffResult,
    GGUFDiffResult,
    TensorDesc,
    ValueDiff,
    diff_files,
)
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
    """name, differing, max abs diff, cosine, note (why not compared, or a verdict other than
    "values differ"), verdict."""
    if not v.compared:
        return [v.name, "-", "-", "-", v.reason or "", v.verdict]
    note = "" if v.verdict == VALUES_DIFFER else v.verdict
    return [v.name, f"{fmt_int(v.differing)}/{fmt_int(v.elements)}", fmt_float(v.max_abs_diff),
            fmt_float(v.cosine_similarity), note, v.verdict]


def _compared(r: DiffResult) -> str:
    """What was compared, in words (``r.compared``; the verdicts say what came of it)."""
    if r.compared == STRUCTURE:
        return "names, dtypes, shapes and metadata; values not compared (--values reads and compares them)"
    if r.compared == BYTES:
        return "tensor bytes"
    if r.values is None:  # a GGUF against a safetensors checkpoint, without --values
        return "tensor values, exactly (a GGUF's as read: dequantized, q/k rows in Hugging Face order)"
    return f"tensor values ({_tol(r)})"


def _tensor_counts(r: DiffResult) -> str:
    counts = [f"{len(r.tensors_added)} added", f"{len(r.tensors_removed)} removed", f"{len(r.tensors_changed)} changed"]
    counts += [f"{fmt_int(n)} {verdict}" for verdict, n in r.verdict_counts.items()]
    return "tensors: " + ", ".join(counts)


def render_diff(r: DiffResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    gguf = r.gguf_part()
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
    out.append(f"compared: {_compared(r)}")
    if md:
        out.append("")
    out.append(_tensor_counts(r))
    rows: list[list[str]] = []
    rows += [["+", d.name, _shape(d)] for d in r.tensors_added]
    rows += [["-", d.name, _shape(d)] for d in r.tensors_removed]
    rows += [["~", c.name, f"{_shape(c.a)} -> {_shape(c.b)}"] for c in r.tensors_changed]
    if r.values is None and r.compared != STRUCTURE:  # the verdicts of a comparison without numbers
        rows += [["!", name, verdict] for name, verdict in r.tensor_verdicts.items()
                 if verdict not in (IDENTICAL, VALUES_EQUAL)]
    meta: list[list[str]] = []
    meta += [["+", k, _quote(v)] for k, v in r.metadata_added.items()]
    meta += [["-", k, _quote(v)] for k, v in r.metadata_removed.items()]
    meta += [["~", k, f"{_quote(c['a'])} -> {_quote(c['b'])}"] for k, c in r.metadata_changed.items()]
    values = [_value_line(v) for v in r.values or [] if v.verdict not in (IDENTICAL, VALUES_EQUAL)]
    differing = sum(1 for v in r.values or [] if v.verdict == VALUES_DIFFER or not v.compared)
    if md:
        if rows:
            out += ["", "| | tensor | change |", "|---|---|---|"] + [f"| {a} | `{b}` | {c} |" for a, b, c in rows]
        counts = (f"metadata: {len(r.metadata_added)} added, {len(r.metadata_removed)} removed, "
                  f"{len(r.metadata_changed)} changed") if gguf is None or gguf.metadata_compared else _NOT_COMPARED
        out += ["", counts]
        if meta:
            out += ["", "| | key | value |", "|---|---|---|"] + [f"| {a} | `{b}` | {c} |" for a, b, c in meta]
        if r.values is not None:
            out += ["", f"values ({_tol(r)}): {differing} of {plural(len(r.values), 'compared tensor')} differ"]
            if values:
                out += ["", "| tensor | verdict | differing | max abs diff | cosine | note |", "|---|---|---|---|---|---|"]
                out += [f"| `{v[0]}` | {v[5]} | {v[1]} | {v[2]} | {v[3]} | {v[4] if v[4] != v[5] else ''} |"
                        for v in values]
        out += ["", f"result: {r.verdict}"]
    else:
        out += [f"{a} {b}  {c}" for a, b, c in rows]
        out.append(f"metadata: {len(r.metadata_added)} added, {len(r.metadata_removed)} removed, "
                   f"{len(r.metadata_changed)} changed" if gguf is None or gguf.metadata_compared else _NOT_COMPARED)
        out += [f"{a} {b}: {c}" for a, b, c in meta]
        if r.values is not None:
            out.append(f"values ({_tol(r)}): {differing} of {plural(len(r.values), 'compared tensor')} differ")
            out += [f"~ {v[0]}  differing {v[1]}  max_abs_diff {v[2]}  cosine {v[3]}" + (f"  ({v[4]})" if v[4] else "")
                    for v in values]
        out += ["", f"result: {r.verdict}"]
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


#: the exit code of each overall verdict (2 is an error: unreadable input, bad arguments)
EXIT_CODES = {IDENTICAL: 0, VALUES_EQUAL: 0, EQUAL_WITHIN_TOLERANCE: 0, DIFFERENT: 1, SAME_STRUCTURE: 3}

EXAMPLES = """\
what is compared:
  two local checkpoints: names, dtypes, shapes, metadata and every tensor's bytes (streamed,
  stopping at the first differing chunk of a tensor); a URL input: the structure only, unless
  --values. --values compares values and reports per tensor the differing count, the largest
  difference and the cosine similarity.

exit status:
  0  identical (bytes compared and equal), values equal, or equal within --rtol/--atol
  1  different
  2  error (unreadable input, bad arguments)
  3  same structure, values not compared (a URL without --values, or --structure-only)

examples:
  pysafetensors diff old.safetensors new.safetensors
  pysafetensors diff fp32.safetensors bf16.safetensors --values --atol 1e-2
  pysafetensors diff a.safetensors https://host/b.safetensors --structure-only --format md
"""


DESCRIPTION = "Compare two checkpoints: tensors added, removed or changed, metadata, and tensor bytes or values."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="the first checkpoint: file, URL, index JSON, directory or pipe")
    p.add_argument("b", metavar="B", help="the second checkpoint, compared with A")
    p.add_argument("--values", action="store_true",
                   help="compare tensor values, streaming: differing count, max abs diff, cosine similarity")
    p.add_argument("--structure-only", action="store_true",
                   help="compare names, dtypes, shapes and metadata only; read no tensor byte (exit 3 when they match)")
    p.add_argument("--rtol", type=float, help="relative tolerance for --values (implies --values)")
    p.add_argument("--atol", type=float, help="absolute tolerance for --values (implies --values)")
    p.add_argument("--format", choices=("text", "json", "md"), default=None, help="output format (default text)")


def run(args: argparse.Namespace) -> int:
    from ._options import UsageError

    values = args.values or args.rtol is not None or args.atol is not None
    for name in ("rtol", "atol"):
        v = getattr(args, name)
        if v is not None and (v < 0 or not math.isfinite(v)):
            raise UsageError(f"pysafetensors diff: error: --{name} must be a finite number >= 0, got {v}")
    if values and args.structure_only:
        raise UsageError("pysafetensors diff: error: --structure-only compares no values: "
                         "it cannot go with --values, --rtol or --atol")
    with open_input(args.a, args.remote, gguf=True) as a, open_input(args.b, args.remote, gguf=True) as b:
        r = diff_files(a, b, values, args.rtol, args.atol, progress_factory(args), structure_only=args.structure_only)
    fmt = args.format or ("json" if args.json else "text")
    emit(render_diff(r, fmt))
    return EXIT_CODES[r.verdict]
