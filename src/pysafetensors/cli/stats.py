"""``pysafetensors stats FILE``: per-tensor min, max, mean, std and NaN/Inf/zero counts, streamed.

The numbers are :func:`pysafetensors.tools.stats.file_stats`'s (its docstring gives the
rules); this module renders them.
"""

from __future__ import annotations

import argparse
import sys

from ..tools.stats import StatsResult, file_stats
from ._common import emit, fmt_float, fmt_int, progress_factory, render_json, table, terminal_safe
from ._inputs import open_input
from ._options import INPUT_HELP


def render_stats(r: StatsResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    r = terminal_safe(r)
    rows = [[s.name, s.dtype, str(s.shape), fmt_float(s.min), fmt_float(s.max), fmt_float(s.mean), fmt_float(s.std),
             fmt_int(s.nan), fmt_int(s.inf), fmt_int(s.zeros)] for s in r.tensors]
    head = ["name", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf", "zeros"]
    return table(rows, head, right=range(3, 10)) + "\n"


EXAMPLES = """\
examples:
  pysafetensors stats model.safetensors
  pysafetensors stats model.safetensors --filter '*.layer.0.*' --json
  pysafetensors stats s3://bucket/model.safetensors -o profile=dev
"""


DESCRIPTION = ("Read every tensor once (streamed, in chunks) and print its min, max, mean, standard deviation "
               "and NaN, Inf and zero counts.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help=INPUT_HELP)
    p.add_argument("--filter", action="append", metavar="GLOB",
                   help="only tensors whose name matches (repeatable); none matching is exit 1")


def no_match_message(patterns: list[str]) -> str:
    """``no tensor matches 'a.*'`` (``... 'a.*' or 'b.*'`` for several ``--filter``)."""
    return "no tensor matches " + " or ".join(f"'{p}'" for p in patterns)


def run(args: argparse.Namespace) -> int:
    with open_input(args.file, args.remote, gguf=True) as ckpt:
        result = file_stats(ckpt, args.filter, progress_factory(args))
    if args.filter and not result.tensors:
        # A filter that matches nothing is a finding (exit 1), said on stderr; --json still
        # prints its (empty) result for scripts.
        from ._options import PROG, safe_message

        if args.json:
            emit(render_stats(result, "json"))
        print(f"{PROG}: {safe_message(no_match_message(args.filter))}", file=sys.stderr)
        return 1
    emit(render_stats(result, "json" if args.json else "text"))
    return 0
