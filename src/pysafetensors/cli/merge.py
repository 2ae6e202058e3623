"""``pysafetensors merge INDEX_OR_DIR OUT``: join a sharded checkpoint into one file, streamed.

Shard names from the index are checked (no ``..``, no absolute paths, ``.safetensors`` only),
every tensor of the weight map must be in the shard it names, and every shard must come from
the same save as the index.  Tensors a shard holds but the index does not map to it are not
part of the checkpoint: they are left out, and each such shard is named in a warning on stderr
(``skipped`` in ``--json``).  The output keeps the first shard's metadata and is written
through a temp file renamed into place; an OUT that is the index or one of the shards (a
symlink to one included) is refused.  OUT may be a store URL (``s3://bucket/model.safetensors``):
streamed there, and published only when complete.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnmappedTensorWarning, WriteError
from ..io.redact import redact_url
from ..io.sinks import is_url_target
from ..writer import write_file
from ._common import bar_enabled, emit, fmt_bytes, plural, progress, render_json
from ._inputs import Input, open_input, storage_options_for
from .shard import write_items


@dataclass
class MergeResult:
    source: str
    output: str
    shards: list[str]
    tensor_count: int
    total_size: int  # tensor bytes
    skipped: list[str] = field(default_factory=list)  # warnings: tensors left out, per shard


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _refuse_own_input(inp: Input, output: str) -> None:
    """OUT must not be one of the files being read (the index, a shard), symlinks included."""
    inputs = [str(getattr(f.source, "name", "")) for f in inp.files]
    if inp.index_path is not None:
        inputs.append(inp.index_path)
    if not inp.local or is_url_target(output):
        shown = redact_url(output)
        if shown in inputs:
            raise WriteError(f"merge output {shown} is an input file; choose another output", filename=shown)
        return
    for source in inputs:
        if _same_file(output, source):
            raise WriteError(
                f"merge output {output} is the input file {source}; choose another output path",
                filename=output,
            )


def compute_merge(path: str, output: str, show_progress: bool = False) -> MergeResult:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnmappedTensorWarning)
        inp = open_input(path)
    skipped = [str(w.message) for w in caught if issubclass(w.category, UnmappedTensorWarning)]
    for w in caught:
        if not issubclass(w.category, UnmappedTensorWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    with inp:
        _refuse_own_input(inp, output)
        names = sorted(t.name for t in inp.tensors)
        total = sum(t.nbytes for t in inp.tensors)
        with progress(total, "merging", show_progress) as bar:
            write_file(write_items(inp, names, bar), output, inp.header_metadata, durable=True,
                       storage_options=storage_options_for(output) or None)
        return MergeResult(path, redact_url(output), inp.file_names, len(names), total, skipped)


def render_merge(r: MergeResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    return (f"wrote {r.output}: {plural(r.tensor_count, 'tensor')}, {fmt_bytes(r.total_size)} of tensor data "
            f"from {plural(len(r.shards), 'file')}\n")


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("merge", parents=[common_options()], help="join a sharded checkpoint into one file")
    p.add_argument("index", metavar="INDEX_OR_DIR")
    p.add_argument("output", metavar="OUT", help="file, or store URL (s3://...), to write")


def run(args: argparse.Namespace) -> int:
    r = compute_merge(args.index, args.output, bar_enabled(args))
    for message in r.skipped:
        print(f"pysafetensors merge: warning: {message}", file=sys.stderr)
    emit(render_merge(r, "json" if args.json else "text"))
    return 0
