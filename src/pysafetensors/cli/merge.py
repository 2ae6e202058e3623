"""``pysafetensors merge INDEX_OR_DIR OUT``: join a sharded checkpoint into one file, streamed.

Shard names from the index are checked (no ``..``, no absolute paths, ``.safetensors`` only)
and every tensor of the weight map must be in the shard it names.  The output keeps the
first shard's metadata and is written through a temp file renamed into place.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ..writer import write_file
from ._common import bar_enabled, emit, fmt_bytes, plural, progress, render_json
from ._inputs import open_input
from .shard import write_items


@dataclass
class MergeResult:
    source: str
    output: str
    shards: list[str]
    tensor_count: int
    total_size: int  # tensor bytes


def compute_merge(path: str, output: str, show_progress: bool = False) -> MergeResult:
    with open_input(path) as inp:
        names = sorted(t.name for t in inp.tensors)
        total = sum(t.nbytes for t in inp.tensors)
        with progress(total, "merging", show_progress) as bar:
            write_file(write_items(inp, names, bar), output, inp.header_metadata, durable=True)
        return MergeResult(path, output, inp.file_names, len(names), total)


def render_merge(r: MergeResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    return (f"wrote {r.output}: {plural(r.tensor_count, 'tensor')}, {fmt_bytes(r.total_size)} of tensor data "
            f"from {plural(len(r.shards), 'file')}\n")


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("merge", parents=[common_options()], help="join a sharded checkpoint into one file")
    p.add_argument("index", metavar="INDEX_OR_DIR")
    p.add_argument("output", metavar="OUT")


def run(args: argparse.Namespace) -> int:
    emit(render_merge(compute_merge(args.index, args.output, bar_enabled(args)), "json" if args.json else "text"))
    return 0
