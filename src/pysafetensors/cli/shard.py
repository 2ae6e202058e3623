"""``pysafetensors shard FILE OUTDIR --max-shard-size 5GB``: split into Hugging Face shards + index.

The planning, the checks and the writing are :func:`pysafetensors.tools.shard.shard_checkpoint`'s
(its docstring says how); this module parses arguments and renders.  Tensors are taken in name
order and packed greedily (a tensor larger than the limit gets a shard of its own); sizes count
tensor bytes, decimal units (1 GB = 10^9) as transformers.  Each shard keeps the source
metadata; the index is written last, so a directory with an index is always complete.  OUTDIR
may be an fsspec URL prefix (``s3://bucket/sharded/``; credentials and endpoint from the
environment, as the store's library reads them).  A URL input is read ahead: runs of small
tensors share one request.
"""

from __future__ import annotations

import argparse
import os

from ..format.index import parse_size
from ..tools.shard import ShardResult, shard_checkpoint
from ._common import emit, fmt_bytes, plural, progress_factory, render_json, terminal_safe


def render_shard(r: ShardResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    r = terminal_safe(r)
    verb = "would write" if r.dry_run else "wrote"
    head = (f"{verb} {plural(len(r.shards), 'shard')} to {r.outdir}: max shard size {fmt_bytes(r.max_shard_size)}, "
            f"total {fmt_bytes(r.total_size)}")
    out = [head]
    out += [f"  {s.name}  {plural(s.tensors, 'tensor')}  {fmt_bytes(s.nbytes)}" for s in r.shards]
    if r.index:
        out.append(f"  {os.path.basename(r.index)}")
    return "\n".join(out) + "\n"


EXAMPLES = """\
examples:
  pysafetensors shard model.safetensors sharded/ --max-shard-size 2GB
  pysafetensors shard model.safetensors sharded/ --dry-run
  pysafetensors shard model.safetensors s3://bucket/sharded/ -o endpoint_url=http://127.0.0.1:9000
"""


DESCRIPTION = ("Split a checkpoint into Hugging Face shards (model-00001-of-0000N.safetensors) and write "
               "model.safetensors.index.json, as transformers' save_pretrained does.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="the checkpoint to split: file, URL, index JSON or directory")
    p.add_argument("outdir", help="directory, or a store URL prefix (s3://bucket/sharded/), to write into")
    p.add_argument("--max-shard-size", default="5GB", help="e.g. 5GB, 500MB, 100KB (decimal) or bytes; default 5GB")
    p.add_argument("--force", action="store_true", help="replace existing shards/index in OUTDIR")
    p.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")


def run(args: argparse.Namespace) -> int:
    try:
        limit = parse_size(args.max_shard_size)
    except (TypeError, ValueError) as e:
        from ._options import UsageError

        raise UsageError(f"pysafetensors shard: error: --max-shard-size: {e}") from None
    r = shard_checkpoint(args.file, args.outdir, limit, force=args.force, dry_run=args.dry_run,
                         progress=progress_factory(args), storage_options=args.remote.for_path(args.file) or None,
                         output_storage_options=args.remote.for_path(args.outdir) or None)
    emit(render_shard(r, "json" if args.json else "text"))
    return 0
