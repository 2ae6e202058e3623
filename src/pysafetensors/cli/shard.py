"""``pysafetensors shard FILE OUTDIR --max-shard-size 5GB``: split into Hugging Face shards + index.

Tensors are taken in name order and packed greedily (a tensor larger than the limit gets a
shard of its own); sizes count tensor bytes, decimal units (1 GB = 10^9) as transformers.  Each
shard keeps the source metadata.  Every file is streamed one tensor at a time from the mapped
source into a temp file that is renamed into place; the index is written last, so a directory
with an index is always complete.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from typing import Any

from ..io.sinks import AtomicFileSink
from ..writer import WriteItem, plan, stream
from ._common import bar_enabled, emit, fmt_bytes, plural, progress, render_json
from ._inputs import Input, open_input
from ._shards import INDEX_NAME, ShardIndexError, index_json, parse_size, plan_shards, shard_name


@dataclass
class ShardFile:
    name: str
    tensors: int
    nbytes: int  # tensor bytes in this shard


@dataclass
class ShardResult:
    source: str
    outdir: str
    max_shard_size: int
    total_size: int
    shards: list[ShardFile]
    index: str | None  # None when everything fits in one model.safetensors
    dry_run: bool = False


def write_tensors(inp: Input, names: list[str], path: str, metadata: dict[str, str] | None, bar: Any) -> None:
    """Stream the named tensors of ``inp`` into a new safetensors file at ``path`` (atomic)."""

    def item(name: str) -> WriteItem:
        t = inp.info(name)

        def get_bytes() -> memoryview:
            data = inp.data(name)  # a view of the mapped source: no copy until the write
            bar.update(len(data))
            return data

        return WriteItem(name, t.dtype, t.shape, get_bytes)

    layout, items = plan([item(n) for n in names], metadata)
    with AtomicFileSink(path) as sink:
        stream(layout, items, sink)


def _stale(outdir: str, prefix: str) -> list[str]:
    pattern = re.compile(rf"^{re.escape(prefix)}(-\d{{5}}-of-\d{{5}})?\.safetensors$")
    return sorted(f for f in os.listdir(outdir) if pattern.match(f) or f == INDEX_NAME)


def compute_shard(
    path: str,
    outdir: str,
    max_shard_size: int | str = "5GB",
    force: bool = False,
    dry_run: bool = False,
    show_progress: bool = False,
    prefix: str = "model",
) -> ShardResult:
    limit = parse_size(max_shard_size)
    with open_input(path) as inp:
        sizes = sorted((t.name, t.nbytes) for t in inp.tensors)
        groups = plan_shards(sizes, limit)
        count = max(len(groups), 1)
        nbytes = dict(sizes)
        shards = [ShardFile(shard_name(i + 1, count, prefix), len(g), sum(nbytes[n] for n in g))
                  for i, g in enumerate(groups)]
        total = sum(nbytes.values())
        index = os.path.join(outdir, INDEX_NAME) if count > 1 else None
        result = ShardResult(path, outdir, limit, total, shards, index, dry_run)
        if dry_run:
            return result
        os.makedirs(outdir, exist_ok=True)
        stale = _stale(outdir, prefix)
        inputs = {os.path.realpath(os.path.join(os.path.dirname(inp.index_path or inp.path), f)) for f in inp.file_names}
        if stale and not force:
            raise ShardIndexError(f"{outdir} already holds {', '.join(stale[:3])}; use --force to replace them")
        if any(os.path.realpath(os.path.join(outdir, f)) in inputs for f in stale + [s.name for s in shards]):
            raise ShardIndexError(f"{outdir} holds the input checkpoint; choose another output directory")
        with progress(total, "sharding", show_progress) as bar:
            weight_map: dict[str, str] = {}
            for shard, group in zip(shards, groups):
                write_tensors(inp, group, os.path.join(outdir, shard.name), inp.metadata, bar)
                weight_map.update((n, shard.name) for n in group)
            if not groups:  # an empty checkpoint still gets its one (empty) file
                write_tensors(inp, [], os.path.join(outdir, shard_name(1, 1, prefix)), inp.metadata, bar)
                result.shards = [ShardFile(shard_name(1, 1, prefix), 0, 0)]
        written = {s.name for s in result.shards}
        for f in stale:  # leftovers of an earlier split with another shard count
            if f not in written and f != INDEX_NAME:
                os.unlink(os.path.join(outdir, f))
        if index is not None:
            with AtomicFileSink(index) as sink:
                sink.write([index_json(total, dict(sorted(weight_map.items())))])
        elif INDEX_NAME in stale:
            os.unlink(os.path.join(outdir, INDEX_NAME))
        return result


def render_shard(r: ShardResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    verb = "would write" if r.dry_run else "wrote"
    head = (f"{verb} {len(r.shards)} shard(s) to {r.outdir} (max shard size {fmt_bytes(r.max_shard_size)}, "
            f"total {fmt_bytes(r.total_size)})")
    out = [head]
    out += [f"  {s.name}  {plural(s.tensors, 'tensor')}  {fmt_bytes(s.nbytes)}" for s in r.shards]
    if r.index:
        out.append(f"  {os.path.basename(r.index)}")
    return "\n".join(out) + "\n"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("shard", parents=[common_options()], help="split into Hugging Face shards + index")
    p.add_argument("file")
    p.add_argument("outdir")
    p.add_argument("--max-shard-size", default="5GB", help="e.g. 5GB, 500MB, 100KB (decimal) or bytes; default 5GB")
    p.add_argument("--force", action="store_true", help="replace existing shards/index in OUTDIR")
    p.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")


def run(args: argparse.Namespace) -> int:
    try:
        limit = parse_size(args.max_shard_size)
    except ValueError as e:
        from .main import UsageError

        raise UsageError(f"pysafetensors shard: error: --max-shard-size: {e}") from None
    r = compute_shard(args.file, args.outdir, limit, args.force, args.dry_run, bar_enabled(args))
    emit(render_shard(r, "json" if args.json else "text"))
    return 0
