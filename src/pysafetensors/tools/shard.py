"""Split a checkpoint into Hugging Face shards + index: the ``shard`` command's library function.

Tensors are taken in name order and packed greedily (:func:`~pysafetensors.format.index.plan_shards`:
a tensor larger than the limit gets a shard of its own); sizes count tensor bytes, decimal
units (1 GB = 10^9) as transformers.  Each shard keeps the source's header metadata.  The
files are written by :func:`pysafetensors.sharded.write_sharded` (temp files renamed into
place, the index last), streamed one tensor at a time from the input; ``outdir`` may be an
fsspec URL prefix (``s3://bucket/sharded/``).

Before anything is written, shards or an index already in ``outdir`` are refused unless
``force``, and an ``outdir`` holding the input itself is always refused.

:func:`streamed_items` is also what ``merge`` writes from: the tensors' bytes are read in the
order the writer asks for them, with :func:`~pysafetensors.tools.checkpoint.stream_tensors`, so runs of small tensors on a
remote input share one request instead of costing one each.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidIndex
from ..format.index import index_file_name, parse_size, plan_shards, shard_name_pattern, shard_names
from ..format.layout import plan_layout
from ..io.redact import redact_url
from ..io.targets import is_url_target, open_directory
from ..sharded import write_sharded
from ..writer import WriteItem
from ._base import Bar, JsonResult, Progress, no_progress
from .checkpoint import Checkpoint, ReadOnSlice, TensorBytes, open_checkpoint, stream_tensors


@dataclass
class ShardFile(JsonResult):
    name: str
    tensors: int
    nbytes: int  # tensor bytes in this shard


@dataclass
class ShardResult(JsonResult):
    source: str  # the input as given, a URL without its secrets (io.redact)
    outdir: str
    max_shard_size: int
    total_size: int
    shards: list[ShardFile]
    index: str | None  # None when everything fits in one model.safetensors
    dry_run: bool = False


class _ReadAhead:
    """Whole tensors for a writer that asks for them one at a time, in ``order``.

    They come from :func:`~pysafetensors.tools.checkpoint.stream_tensors` over ``order``: on a remote input, runs of small
    tensors lying back to back are one request.  A name asked out of that order restarts the
    stream there (still correct, only with fewer shared reads).  Each buffer handed out is the
    writer's to keep: the stream reads every run into a fresh buffer.
    """

    def __init__(self, ckpt: Checkpoint, order: Sequence[str]) -> None:
        self._ckpt = ckpt
        self._order = list(order)
        self._position = {name: i for i, name in enumerate(self._order)}
        self._stream: Iterator[tuple[Any, TensorBytes]] | None = None
        self._expected = -1  # position of the name the stream yields next

    def read(self, name: str) -> Any:
        i = self._position.get(name)
        if i is None:
            return self._ckpt.read(name)
        if self._stream is None or i != self._expected:
            self._stream = stream_tensors(self._ckpt, self._order[i:])
        info, data = next(self._stream)
        self._expected = i + 1
        if isinstance(data, ReadOnSlice):  # larger than a read-ahead window: one read of its own
            return self._ckpt.read(info.name)
        return data


def writer_order(ckpt: Checkpoint, groups: Sequence[Sequence[str]]) -> list[str]:
    """The order the writer asks for the tensors of ``groups`` (one group per output file,
    written in turn): each file's layout order (``format.layout.plan_layout``; the names are the
    checkpoint's, and the writer checks them)."""
    order: list[str] = []
    for group in groups:
        infos = [ckpt.info(n) for n in group]
        order += [e.name for e in plan_layout(((t.name, t.dtype, t.shape) for t in infos), names_checked=True).entries]
    return order


def streamed_items(ckpt: Checkpoint, names: Sequence[str], bar: Bar,
                   files: Sequence[Sequence[str]] | None = None) -> list[WriteItem]:
    """Write items for ``names`` (in that order), their bytes read with read-ahead as the writer
    asks for them.  ``files`` is how the writer splits them into files, written in turn (the
    shard plan; default: one file), which gives the order it asks in."""
    reader = _ReadAhead(ckpt, writer_order(ckpt, [names] if files is None else files))

    def item(name: str) -> WriteItem:
        t = ckpt.info(name)

        def get_bytes() -> Any:
            data = reader.read(name)  # a view of a mapped source: no copy until the write
            bar.update(len(data))
            return data

        return WriteItem(name, t.dtype, t.shape, get_bytes)

    return [item(n) for n in names]


def existing_shards(names: list[str], prefix: str = "model") -> list[str]:
    """Which of ``names`` (a directory's files) are shards or the index of checkpoint ``prefix``."""
    pattern = shard_name_pattern(prefix)
    mine = {index_file_name(prefix), *shard_names(1, prefix)}
    return sorted(f for f in names if pattern.match(f) or f in mine)


def input_locations(ckpt: Checkpoint) -> set[str]:
    """Where the checkpoint's files are: real paths, or (redacted) URLs, its index included."""
    if ckpt.local:
        base = ckpt.path if os.path.isdir(ckpt.path) else os.path.dirname(os.path.abspath(ckpt.index_path or ckpt.path))
        return {os.path.realpath(os.path.join(base, f)) for f in ckpt.file_names}
    found = {str(f.source.name) for f in ckpt.files}
    return found | ({ckpt.index_path} if ckpt.index_path else set())


def _output_location(target: Any, name: str) -> str:
    path = target.join(name)
    return redact_url(path) if is_url_target(path) else os.path.realpath(path)


def shard_checkpoint(
    path: str | os.PathLike[str],
    outdir: str | os.PathLike[str],
    max_shard_size: int | str = "5GB",
    *,
    force: bool = False,
    dry_run: bool = False,
    prefix: str = "model",
    progress: Progress = no_progress,
    storage_options: Mapping[str, Any] | None = None,
    output_storage_options: Mapping[str, Any] | None = None,
) -> ShardResult:
    """Split the checkpoint at ``path`` into Hugging Face shards in ``outdir`` (see the module
    docstring).  ``dry_run`` plans and writes nothing.  ``storage_options`` go to a remote
    input, ``output_storage_options`` to a store ``outdir``."""
    path, outdir = os.fspath(path), os.fspath(outdir)
    limit = parse_size(max_shard_size)
    with open_checkpoint(path, storage_options) as ckpt:
        nbytes = {t.name: t.nbytes for t in ckpt.tensors}
        names = sorted(nbytes)
        groups = plan_shards(((n, nbytes[n], None) for n in names), limit, names_checked=True)  # a dict's keys
        files = shard_names(len(groups), prefix)
        shards = [ShardFile(f, len(g), sum(nbytes[n] for n in g)) for f, g in zip(files, groups)]
        options = dict(output_storage_options) if output_storage_options else None
        target = open_directory(outdir, options)
        shown = redact_url(outdir)
        index = target.join(index_file_name(prefix)) if len(groups) > 1 else None
        result = ShardResult(redact_url(path), shown, limit, sum(nbytes.values()), shards,
                             redact_url(index) if index else None, dry_run)
        if dry_run:
            return result
        target.ensure()
        existing = existing_shards(target.names(), prefix)
        if existing and not force:
            raise InvalidIndex(f"{shown} already holds {', '.join(existing[:3])}; use --force to replace them")
        inputs = input_locations(ckpt)
        if any(_output_location(target, f) in inputs for f in existing + files):
            raise InvalidIndex(f"{shown} holds the input checkpoint; choose another output directory")
        with progress(result.total_size, "sharding") as bar:
            # Shards keep the source's header metadata; the index gets only total_size.
            write_sharded(streamed_items(ckpt, names, bar, groups), outdir, max_shard_size=limit,
                          shard_metadata=ckpt.header_metadata or {}, basename=prefix, durable=True,
                          storage_options=options)
        return result


__all__ = ["ShardFile", "ShardResult", "existing_shards", "input_locations", "shard_checkpoint", "streamed_items",
           "writer_order"]
