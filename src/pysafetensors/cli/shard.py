"""``pysafetensors shard FILE OUTDIR --max-shard-size 5GB``: split into Hugging Face shards + index.

Tensors are taken in name order and packed greedily (a tensor larger than the limit gets a
shard of its own); sizes count tensor bytes, decimal units (1 GB = 10^9) as transformers.  Each
shard keeps the source metadata.  Every file is streamed one tensor at a time from the mapped
source into a temp file that is renamed into place; the index is written last, so a directory
with an index is always complete.  OUTDIR may be an fsspec URL prefix (``s3://bucket/sharded/``;
credentials and endpoint from the environment, as the store's library reads them): every file is
then streamed to the store and appears only when complete (``pysafetensors.sharded.write_sharded``).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidIndex
from ..format.index import index_file_name, parse_size, plan_shards, shard_name_pattern, shard_names
from ..io.redact import redact_url
from ..io.sinks import is_url_target, open_directory
from ..sharded import write_sharded
from ..writer import WriteItem
from ._common import bar_enabled, emit, fmt_bytes, plural, progress, render_json
from ._inputs import Input, open_input, storage_options_for


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


def write_items(inp: Input, names: list[str], bar: Any) -> list[WriteItem]:
    """Write items streaming the named tensors of ``inp`` (one tensor in memory at a time)."""

    def item(name: str) -> WriteItem:
        t = inp.info(name)

        def get_bytes() -> memoryview:
            data = inp.read(name)  # a view of a mapped source: no copy until the write
            bar.update(len(data))
            return data

        return WriteItem(name, t.dtype, t.shape, get_bytes)

    return [item(n) for n in names]


def _existing(names: list[str], prefix: str) -> list[str]:
    pattern = shard_name_pattern(prefix)
    mine = {index_file_name(prefix), *shard_names(1, prefix)}
    return sorted(f for f in names if pattern.match(f) or f in mine)


def _input_locations(inp: Input) -> set[str]:
    """Where the input's files are: real paths, or (redacted) URLs."""
    if inp.local:
        base = os.path.dirname(os.path.abspath(inp.index_path or inp.path)) if not os.path.isdir(inp.path) else inp.path
        return {os.path.realpath(os.path.join(base, f)) for f in inp.file_names}
    found = {str(getattr(f.source, "name", "")) for f in inp.files}
    return found | ({inp.index_path} if inp.index_path else set())


def _output_location(target: Any, name: str) -> str:
    path = target.join(name)
    return redact_url(path) if is_url_target(path) else os.path.realpath(path)


def compute_shard(
    path: str,
    outdir: str,
    max_shard_size: int | str = "5GB",
    force: bool = False,
    dry_run: bool = False,
    show_progress: bool = False,
    prefix: str = "model",
) -> ShardResult:
    """Split ``path`` into Hugging Face shards in ``outdir`` (``pysafetensors.sharded.write_sharded``)."""
    limit = parse_size(max_shard_size)
    with open_input(path) as inp:
        nbytes = {t.name: t.nbytes for t in inp.tensors}
        names = sorted(nbytes)
        groups = plan_shards(((n, nbytes[n], None) for n in names), limit)
        files = shard_names(len(groups), prefix)
        shards = [ShardFile(f, len(g), sum(nbytes[n] for n in g)) for f, g in zip(files, groups)]
        options = storage_options_for(outdir) or None
        target = open_directory(outdir, options)
        shown = redact_url(outdir)
        index = target.join(index_file_name(prefix)) if len(groups) > 1 else None
        result = ShardResult(path, shown, limit, sum(nbytes.values()), shards,
                             redact_url(index) if index else None, dry_run)
        if dry_run:
            return result
        target.ensure()
        existing = _existing(target.names(), prefix)
        if existing and not force:
            raise InvalidIndex(f"{shown} already holds {', '.join(existing[:3])}; use --force to replace them")
        inputs = _input_locations(inp)
        if any(_output_location(target, f) in inputs for f in existing + files):
            raise InvalidIndex(f"{shown} holds the input checkpoint; choose another output directory")
        with progress(result.total_size, "sharding", show_progress) as bar:
            # Shards keep the source's header metadata; the index gets only total_size.
            write_sharded(write_items(inp, names, bar), outdir, max_shard_size=limit,
                          shard_metadata=inp.header_metadata or {}, basename=prefix, durable=True,
                          storage_options=options)
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
    p.add_argument("outdir", help="directory, or a store URL prefix (s3://bucket/sharded/), to write into")
    p.add_argument("--max-shard-size", default="5GB", help="e.g. 5GB, 500MB, 100KB (decimal) or bytes; default 5GB")
    p.add_argument("--force", action="store_true", help="replace existing shards/index in OUTDIR")
    p.add_argument("--dry-run", action="store_true", help="show the plan, write nothing")


def run(args: argparse.Namespace) -> int:
    try:
        limit = parse_size(args.max_shard_size)
    except (TypeError, ValueError) as e:
        from .main import UsageError

        raise UsageError(f"pysafetensors shard: error: --max-shard-size: {e}") from None
    r = compute_shard(args.file, args.outdir, limit, args.force, args.dry_run, bar_enabled(args))
    emit(render_shard(r, "json" if args.json else "text"))
    return 0
