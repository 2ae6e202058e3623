"""``pysafetensors merge INDEX_OR_DIR OUT``: join a sharded checkpoint into one file, streamed.

The checks and the writing are :func:`pysafetensors.tools.merge.merge_checkpoint`'s (its
docstring says how); this module parses arguments and renders.  Shard names from the index are
checked, every tensor of the weight map must be in the shard it names, and every shard must
come from the same save as the index.  Tensors a shard holds but the index does not map to it
are left out, and each such shard is named in a warning on stderr (``skipped`` in ``--json``).
The output keeps the first shard's metadata and is written through a temp file renamed into
place; an OUT that is the index or one of the shards (a symlink to one included) is refused.
OUT may be a store URL (``s3://bucket/model.safetensors``): streamed there, and published only
when complete.  A URL input is read ahead: runs of small tensors share one request.
"""

from __future__ import annotations

import argparse
import sys

from ..tools.merge import MergeResult, merge_checkpoint
from ._common import emit, escape_text, fmt_bytes, plural, progress_factory, render_json, terminal_safe


def render_merge(r: MergeResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    r = terminal_safe(r)
    return (f"wrote {r.output}: {plural(r.tensor_count, 'tensor')}, {fmt_bytes(r.total_size)} of tensor data "
            f"from {plural(len(r.shards), 'file')}\n")


EXAMPLES = """\
examples:
  pysafetensors merge sharded/ model.safetensors
  pysafetensors merge sharded/model.safetensors.index.json model.safetensors --json
  pysafetensors merge https://host/repo/model.safetensors.index.json s3://bucket/model.safetensors
"""


DESCRIPTION = ("Join the shards an index names into one .safetensors file (tensors in the index's order, "
               "the index's metadata kept), written all or nothing.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("index", metavar="INDEX_OR_DIR",
                   help="a *.safetensors.index.json (path or URL) or the directory holding one")
    p.add_argument("output", metavar="OUT", help="file, or store URL (s3://...), to write")


def run(args: argparse.Namespace) -> int:
    r = merge_checkpoint(args.index, args.output, progress=progress_factory(args),
                         storage_options=args.remote.for_path(args.index) or None,
                         output_storage_options=args.remote.for_path(args.output) or None)
    for message in r.skipped:
        print(f"pysafetensors merge: warning: {escape_text(message)}", file=sys.stderr)
    emit(render_merge(r, "json" if args.json else "text"))
    return 0
