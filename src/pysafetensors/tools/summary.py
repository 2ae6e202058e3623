"""What ``inspect`` shows and the viewer's summary card: sizes, counts per dtype, metadata, tensors.

Counts: a tensor's parameter count is the product of its shape (a 0-rank tensor counts 1),
summed per dtype as the Hugging Face "Safetensors" panel does.  Metadata follows the
checkpoint's one rule (:mod:`pysafetensors.tools.checkpoint`): the index's for a sharded
checkpoint, with the shard headers' own metadata and any disagreement reported beside it.

A GGUF file gives a :class:`GGUFSummary`: the same fields (``dtype`` is the GGML type, ``Q4_K``;
``shape`` PyTorch's order; ``header_size`` the bytes before the aligned tensor data;
``metadata`` None, as GGUF has no string ``__metadata__``) plus the GGUF version, alignment,
every tensor's dims in GGUF's order and the typed metadata, values in full.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..gguf.header import GGUFArray, GGUFNumbers
from ._base import JsonResult
from .checkpoint import (
    AnyCheckpoint,
    Checkpoint,
    GGUFCheckpoint,
    MetadataDisagreement,
    ShardMetadata,
    matches,
    open_checkpoint,
)
from .tree import TreeNode, build_tree

MODELSPEC_PREFIX = "modelspec."
#: how a GGUF metadata value is shown (``inspect``'s text and the viewer): an array's first
#: ARRAY_ITEMS items, strings in it cut to ITEM_CHARS, the whole cut to VALUE_CHARS characters
ARRAY_ITEMS = 5
ITEM_CHARS = 40
VALUE_CHARS = 200


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


@dataclass
class GGUFTensorRow(TensorRow):
    gguf_dims: list[int] = field(default_factory=list)  # GGUF's order: ``shape`` reversed


@dataclass
class GGUFMetadataEntry(JsonResult):
    type: str  # uint32, string, array[string], array[array[int32]]...
    value: Any  # in full: a number, bool, string, a (nested) list, or GGUFNumbers (a numeric array)
    count: int | None = None  # items, for an array


@dataclass
class GGUFSummary(Summary):
    format: str = "gguf"
    gguf_version: int = 0
    alignment: int = 0
    gguf_metadata: dict[str, GGUFMetadataEntry] = field(default_factory=dict)


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


_S = TypeVar("_S", bound=Summary)


def _summary(cls: type[_S], ckpt: Checkpoint | GGUFCheckpoint, rows: list[TensorRow], patterns: Sequence[str] | None,
             tree: bool, **fields: Any) -> _S:
    """``cls`` with what every format's summary holds (sizes, counts, per-dtype totals, the
    selected rows and their tree) filled in from ``ckpt`` and ``rows``; ``fields`` give the rest."""
    by_dtype: dict[str, int] = {}
    bytes_by: dict[str, int] = {}
    for r in rows:
        by_dtype[r.dtype] = by_dtype.get(r.dtype, 0) + r.parameters
        bytes_by[r.dtype] = bytes_by.get(r.dtype, 0) + r.nbytes
    return cls(
        path=ckpt.path,
        file_size=ckpt.file_size,
        header_size=ckpt.header_size,
        tensor_count=len(rows),
        parameter_count=sum(r.parameters for r in rows),
        parameters_by_dtype=dict(sorted(by_dtype.items())),
        bytes_by_dtype=dict(sorted(bytes_by.items())),
        tensors=rows,
        filter=list(patterns) if patterns else None,
        total_tensor_count=ckpt.tensor_count,
        tree=build_tree(rows) if tree else None,
        **fields,
    )


def summarize(
    ckpt: AnyCheckpoint | str, patterns: Sequence[str] | None = None, tree: bool = False
) -> Summary:
    """Everything ``inspect`` shows; counts cover the tensors ``patterns`` select.

    ``ckpt`` is an open :class:`Checkpoint` or :class:`GGUFCheckpoint` (left open), or anything
    :func:`open_checkpoint` takes (a GGUF file gives a :class:`GGUFSummary`).
    """
    if isinstance(ckpt, GGUFCheckpoint):
        return _summarize_gguf(ckpt, patterns, tree)
    if not isinstance(ckpt, Checkpoint):
        with open_checkpoint(ckpt, gguf=True) as opened:
            return summarize(opened, patterns, tree)
    metadata = ckpt.metadata
    return _summary(
        Summary, ckpt, tensor_rows(ckpt, patterns), patterns, tree,
        metadata=metadata,
        modelspec=modelspec(metadata),
        files=ckpt.file_names if ckpt.sharded else None,
        shard_metadata=ckpt.shard_metadata(),
        metadata_disagreements=ckpt.metadata_disagreements(),
    )


def _summarize_gguf(ckpt: GGUFCheckpoint, patterns: Sequence[str] | None, tree: bool) -> GGUFSummary:
    rows: list[TensorRow] = [
        GGUFTensorRow(t.name, t.type, list(t.shape), [t.begin, t.end], t.nbytes, t.nelements, None, list(t.dims))
        for t in ckpt.tensors
        if matches(t.name, patterns)
    ]
    header = ckpt.header
    entries = {}
    for key, f in header.fields.items():
        # A numeric array stays compact (GGUFNumbers): text shows its first items, JSON lists it.
        compact = isinstance(f.value, GGUFArray) and isinstance(f.value.items, GGUFNumbers)
        value = f.value.items if compact else f.plain()
        entries[key] = GGUFMetadataEntry(f.type_name, value, len(f.value) if isinstance(f.value, GGUFArray) else None)
    return _summary(
        GGUFSummary, ckpt, rows, patterns, tree,
        metadata=None,
        modelspec={},
        gguf_version=header.version,
        alignment=header.alignment,
        gguf_metadata=entries,
    )


def shorten(value: str, limit: int = VALUE_CHARS) -> str:
    """``value`` cut to ``limit`` characters, saying how long it was."""
    return value if len(value) <= limit else value[:limit] + f"... ({len(value)} chars)"


def _scalar(value: Any, type_name: str, limit: int | None = None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and "float32" in type_name:
        import numpy as np

        return str(np.float32(value))  # the shortest text that reads back as the stored float32
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        return text if limit is None or len(text) <= limit else text[: limit - 4] + '..."'
    if isinstance(value, (list, GGUFNumbers)):
        inner = type_name[len("array["):-1] if type_name.startswith("array[") else type_name
        shown = [_scalar(v, inner, ITEM_CHARS) for v in value[:ARRAY_ITEMS]]
        return "[" + ", ".join(shown) + (", ..." if len(value) > ARRAY_ITEMS else "") + "]"
    return str(value)


def gguf_value_text(entry: GGUFMetadataEntry) -> str:
    """One GGUF metadata value as text: strings JSON-quoted, an array as its length and first
    items (a 128k-word vocabulary is a line, not megabytes), at most VALUE_CHARS characters."""
    if entry.count is None:
        return shorten(_scalar(entry.value, entry.type))
    text = _scalar(entry.value, entry.type)
    if entry.count > ARRAY_ITEMS:
        text = f"{entry.count:,} items: {text}"
    return shorten(text)
