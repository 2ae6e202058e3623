"""Join a sharded checkpoint into one file: the ``merge`` command's library function.

Shard names from the index are checked (no ``..``, no absolute paths, ``.safetensors`` only),
every tensor of the weight map must be in the shard it names, and every shard must come from
the same save as the index (:func:`~pysafetensors.tools.checkpoint.open_checkpoint`).  Tensors
a shard holds but the index does not map to it are not part of the checkpoint: they are left
out, and each such shard is named in :attr:`MergeResult.skipped`.  The output keeps the first
shard's metadata and is written through a temp file renamed into place (or streamed to a store
URL and published when complete), its tensors read with read-ahead
(:func:`~pysafetensors.tools.shard.streamed_items`).  An output that is the index or one of the
shards (a symlink to one included) is refused before anything is written.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnmappedTensorWarning, WriteError
from ..io.redact import redact_url
from ..io.targets import is_url_target
from ..writer import write_file
from ._base import JsonResult, Progress, no_progress
from .checkpoint import Checkpoint, open_checkpoint
from .shard import streamed_items


@dataclass
class MergeResult(JsonResult):
    source: str  # the input as given, a URL without its secrets (io.redact)
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


def refuse_own_input(ckpt: Checkpoint, output: str) -> None:
    """Raise WriteError when ``output`` is one of the files ``ckpt`` reads (the index, a shard),
    symlinks included."""
    inputs = [str(f.source.name) for f in ckpt.files]
    if ckpt.index_path is not None:
        inputs.append(ckpt.index_path)
    if not ckpt.local or is_url_target(output):
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


def merge_checkpoint(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    progress: Progress = no_progress,
    storage_options: Mapping[str, Any] | None = None,
    output_storage_options: Mapping[str, Any] | None = None,
) -> MergeResult:
    """Write the checkpoint at ``path`` (an index, a directory, or one file) as one file at
    ``output`` (see the module docstring).  ``storage_options`` go to a remote input,
    ``output_storage_options`` to a store ``output``.  Other warnings raised while opening the
    input are passed on."""
    path, output = os.fspath(path), os.fspath(output)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UnmappedTensorWarning)
        ckpt = open_checkpoint(path, storage_options)
    skipped = [str(w.message) for w in caught if issubclass(w.category, UnmappedTensorWarning)]
    for w in caught:
        if not issubclass(w.category, UnmappedTensorWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    with ckpt:
        refuse_own_input(ckpt, output)
        names = sorted(t.name for t in ckpt.tensors)
        total = sum(t.nbytes for t in ckpt.tensors)
        with progress(total, "merging") as bar:
            write_file(streamed_items(ckpt, names, bar), output, ckpt.header_metadata, durable=True,
                       storage_options=dict(output_storage_options) if output_storage_options else None)
        return MergeResult(redact_url(path), redact_url(output), ckpt.file_names, len(names), total, skipped)


__all__ = ["MergeResult", "merge_checkpoint", "refuse_own_input"]
