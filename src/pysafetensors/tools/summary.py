"""What ``inspect`` shows and the viewer's summary card: sizes, counts per dtype, metadata, tensors.

Counts: a tensor's parameter count is the product of its shape (a 0-rank tensor counts 1),
summed per dtype as the Hugging Face "Safetensors" panel does.  Metadata follows the
checkpoint's one rule (:mod:`pysafetensors.tools.checkpoint`): the index's for a sharded
checkpoint, with the shard headers' own metadata and any disagreement reported beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._base import JsonResult
from .checkpoint import Checkpoint, MetadataDisagreement, ShardMetadata, matches, open_checkpoint
from .tree import TreeNode, build_tree

MODELSPEC_PREFIX = "modelspec."


@dataclass
class TensorRow(JsonResult):
    name: str
    dtype: str
    shape: list[int]
    data_offsets: list[int]
    nbytes: int
    parameters: int
    file: str | None = None  # the shard holding it (sharded inputs only)


@dataclass
class Summary(JsonResult):
    path: str
    file_size: int
    header_size: int
    tensor_count: int
    parameter_count: int
    parameters_by_dtype: dict[str, int]
    bytes_by_dtype: dict[str, int]
    metadata: dict[str, str] | None
    modelspec: dict[str, str]
    tensors: list[TensorRow]
    filter: list[str] | None = None
    total_tensor_count: int | None = None  # before the filter
    files: list[str] | None = None  # shards, for a sharded input
    tree: TreeNode | None = None
    shard_metadata: list[ShardMetadata] | None = None  # sharded inputs: the shard headers' own
    metadata_disagreements: list[MetadataDisagreement] | None = None


def tensor_rows(ckpt: Checkpoint, patterns: Sequence[str] | None = None) -> list[TensorRow]:
    """One row per tensor ``patterns`` select, in file order."""
    sharded = ckpt.sharded
    return [
        TensorRow(t.name, t.dtype.code, list(t.shape), [t.begin, t.end], t.nbytes, t.nelements,
                  ckpt.file_of(t.name) if sharded else None)
        for t in ckpt.tensors
        if matches(t.name, patterns)
    ]


def modelspec(metadata: dict[str, str] | None) -> dict[str, str]:
    """The ``modelspec.*`` entries (Stability AI's ModelSpec), keys as written."""
    return {k: v for k, v in (metadata or {}).items() if k.startswith(MODELSPEC_PREFIX)}


def summarize(
    ckpt: Checkpoint | str, patterns: Sequence[str] | None = None, tree: bool = False
) -> Summary:
    """Everything ``inspect`` shows; counts cover the tensors ``patterns`` select.

    ``ckpt`` is an open :class:`Checkpoint` (left open) or anything :func:`open_checkpoint` takes.
    """
    if not isinstance(ckpt, Checkpoint):
        with open_checkpoint(ckpt) as opened:
            return summarize(opened, patterns, tree)
    rows = tensor_rows(ckpt, patterns)
    by_dtype: dict[str, int] = {}
    bytes_by: dict[str, int] = {}
    for r in rows:
        by_dtype[r.dtype] = by_dtype.get(r.dtype, 0) + r.parameters
        bytes_by[r.dtype] = bytes_by.get(r.dtype, 0) + r.nbytes
    metadata = ckpt.metadata
    return Summary(
        path=ckpt.path,
        file_size=ckpt.file_size,
        header_size=ckpt.header_size,
        tensor_count=len(rows),
        parameter_count=sum(r.parameters for r in rows),
        parameters_by_dtype=dict(sorted(by_dtype.items())),
        bytes_by_dtype=dict(sorted(bytes_by.items())),
        metadata=metadata,
        modelspec=modelspec(metadata),
        tensors=rows,
        filter=list(patterns) if patterns else None,
        total_tensor_count=ckpt.tensor_count,
        files=ckpt.file_names if ckpt.sharded else None,
        tree=build_tree(rows) if tree else None,
        shard_metadata=ckpt.shard_metadata(),
        metadata_disagreements=ckpt.metadata_disagreements(),
    )
