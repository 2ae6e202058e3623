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
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from math import prod
from operator import attrgetter, itemgetter, sub
from typing import Any, TypeVar

from ..format._gcpause import paused_gc
from ..gguf.header import GGUFArray, array_values
from ._base import JsonResult
from .blocks import RepeatedBlock, find_blocks, reported
from .checkpoint import (
    AnyCheckpoint,
    Checkpoint,
    GGUFCheckpoint,
    MetadataDisagreement,
    ShardMetadata,
    matches,
    open_checkpoint,
)
from .tree import PrefixGroups, TreeNode, name_order_groups, prefix_groups, tree_nodes

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
    # The numbered groups that repeat one block (tools.blocks); None where not computed (the
    # viewer's first answer, which sends them with the tensors).
    repeated_blocks: list[RepeatedBlock] | None = None
    # The selected tensors' grouping and columns the blocks and tree were made from (None where
    # neither was): what ``inspect`` draws its tree from, node objects made only for what it shows.
    _groups: tuple[PrefixGroups, TensorColumns] | None = field(default=None, repr=False, compare=False)

    def gguf_part(self) -> GGUFSummary | None:
        """This summary with its GGUF fields (a GGUF file's), else None."""
        return None


@dataclass
class GGUFTensorRow(TensorRow):
    gguf_dims: list[int] = field(default_factory=list)  # GGUF's order: ``shape`` reversed


@dataclass
class GGUFMetadataEntry(JsonResult):
    type: str  # uint32, string, array[string], array[array[int32]]...
    value: Any  # in full: a number, bool, string, or an array's items (gguf.header.array_values: a read-only sequence)
    count: int | None = None  # items, for an array


@dataclass
class GGUFSummary(Summary):
    format: str = "gguf"
    gguf_version: int = 0
    alignment: int = 0
    gguf_metadata: dict[str, GGUFMetadataEntry] = field(default_factory=dict)

    def gguf_part(self) -> GGUFSummary | None:
        return self


@dataclass
class TensorColumns:
    """The rows of :func:`tensor_rows` as one list per field (the same values, in file order):
    what a 100,000-tensor header is cheap to hold and send as.  ``file`` is None unless sharded."""

    name: list[str]
    dtype: list[str]
    shape: list[list[int]]
    begin: list[int]
    end: list[int]
    nbytes: list[int]
    parameters: list[int]
    file: list[str] | None = None

    @paused_gc()
    def rows(self) -> list[TensorRow]:
        files: Iterable[str | None] = self.file if self.file is not None else repeat(None)
        return [TensorRow(n, d, s, [b, e], nb, p, f)
                for n, d, s, b, e, nb, p, f in zip(self.name, self.dtype, self.shape, self.begin, self.end, self.nbytes,
                                                   self.parameters, files)]


@paused_gc()  # a list per tensor (its shape): see paused_gc
def tensor_columns(ckpt: Checkpoint, patterns: Sequence[str] | None = None) -> TensorColumns:
    """The tensors ``patterns`` select, in file order, as columns (see :func:`tensor_rows`).

    Built column by column with ``map`` over the header's entries (named tuples): no Python
    loop runs per tensor, and no object is made per tensor beyond its shape list.
    """
    infos = ckpt.tensors
    if patterns:
        infos = [t for t in infos if matches(t.name, patterns)]
    shapes = list(map(itemgetter(2), infos))
    begin = list(map(itemgetter(3), infos))
    end = list(map(itemgetter(4), infos))
    names = list(map(itemgetter(0), infos))
    return TensorColumns(
        name=names,
        dtype=list(map(attrgetter("code"), map(itemgetter(1), infos))),
        shape=list(map(list, shapes)),
        begin=begin,
        end=end,
        nbytes=list(map(sub, end, begin)),  # TensorInfo.nbytes
        parameters=list(map(prod, shapes)),  # TensorInfo.nelements
        file=list(map(ckpt.file_of, names)) if ckpt.sharded else None,
    )


def tensor_rows(ckpt: Checkpoint, patterns: Sequence[str] | None = None) -> list[TensorRow]:
    """One row per tensor ``patterns`` select, in file order."""
    return tensor_columns(ckpt, patterns).rows()


def modelspec(metadata: dict[str, str] | None) -> dict[str, str]:
    """The ``modelspec.*`` entries (Stability AI's ModelSpec), keys as written."""
    return {k: v for k, v in (metadata or {}).items() if k.startswith(MODELSPEC_PREFIX)}


_S = TypeVar("_S", bound=Summary)


def _summary(cls: type[_S], ckpt: Checkpoint | GGUFCheckpoint, columns: TensorColumns, rows: list[TensorRow],
             patterns: Sequence[str] | None, tree: bool, blocks: bool = True, **fields: Any) -> _S:
    """``cls`` with what every format's summary holds (sizes, counts, per-dtype totals, the
    selected rows, their repeated blocks and tree) filled in from ``ckpt`` and the selected
    tensors' ``columns`` (``rows``: the same tensors as rows, or empty when the caller wants the
    columns only); ``fields`` give the rest.  ``blocks``: find the repeated blocks (else None).
    The grouping is in natural order only for ``tree``'s node objects; the blocks, and the text
    tree (which sorts the siblings it shows), need no natural sort of every name."""
    found: list[RepeatedBlock] | None = None
    root = None
    grouped = None
    if blocks or tree:
        grouping = (prefix_groups if tree else name_order_groups)(columns.name, columns.parameters, columns.nbytes)
        grouped = (grouping, columns)
        found = reported(find_blocks(grouping, columns.name, columns.dtype, columns.shape)) if blocks else None
        if tree:
            root = tree_nodes(grouping, columns.name, columns.dtype, columns.shape, columns.parameters,
                              columns.nbytes)
    # Per dtype, a pass in C over the columns for each of the (few) dtypes, not a Python loop per tensor.
    by_dtype: dict[str, int] = {}
    bytes_by: dict[str, int] = {}
    for dtype in set(columns.dtype):
        by_dtype[dtype] = sum(compress(columns.parameters, map(dtype.__eq__, columns.dtype)))
        bytes_by[dtype] = sum(compress(columns.nbytes, map(dtype.__eq__, columns.dtype)))
    return cls(
        path=ckpt.path,
        file_size=ckpt.file_size,
        header_size=ckpt.header_size,
        tensor_count=len(columns.name),
        parameter_count=sum(columns.parameters),
        parameters_by_dtype=dict(sorted(by_dtype.items())),
        bytes_by_dtype=dict(sorted(bytes_by.items())),
        tensors=rows,
        filter=list(patterns) if patterns else None,
        total_tensor_count=ckpt.tensor_count,
        tree=root,
        repeated_blocks=found,
        _groups=grouped,
        **fields,
    )


def summarize(
    ckpt: AnyCheckpoint | str, patterns: Sequence[str] | None = None, tree: bool = False, *, rows: bool = True
) -> Summary:
    """Everything ``inspect`` shows; counts cover the tensors ``patterns`` select.

    ``ckpt`` is an open :class:`Checkpoint` or :class:`GGUFCheckpoint` (left open), or anything
    :func:`open_checkpoint` takes (a GGUF file gives a :class:`GGUFSummary`).  ``rows=False``
    leaves ``tensors`` empty (no row object per tensor: what ``inspect`` does without
    ``--tensors``); every other field is the same.
    """
    if isinstance(ckpt, (str, os.PathLike)):
        with open_checkpoint(ckpt, gguf=True) as opened:
            return summarize(opened, patterns, tree, rows=rows)
    if ckpt.format == "gguf":
        return summarize_gguf(ckpt, patterns, tree)
    columns = tensor_columns(ckpt, patterns)
    return _summarize(ckpt, columns, columns.rows() if rows else [], patterns, tree)


def summarize_columns(ckpt: Checkpoint, patterns: Sequence[str] | None = None) -> tuple[Summary, TensorColumns]:
    """:func:`summarize`'s summary of a safetensors checkpoint with its tensors as columns
    (:func:`tensor_columns`) rather than rows: the summary's ``tensors`` is left empty and no
    row object is made per tensor (the viewer's data on a 100,000-tensor header), and
    ``repeated_blocks`` is None (the viewer finds them with the tree it sends later).  Every
    other field is computed by the same code as :func:`summarize`'s."""
    columns = tensor_columns(ckpt, patterns)
    return _summarize(ckpt, columns, [], patterns, False, blocks=False), columns


def _summarize(ckpt: Checkpoint, columns: TensorColumns, rows: list[TensorRow], patterns: Sequence[str] | None,
               tree: bool, blocks: bool = True) -> Summary:
    metadata = ckpt.metadata
    return _summary(
        Summary, ckpt, columns, rows, patterns, tree, blocks,
        metadata=metadata,
        modelspec=modelspec(metadata),
        files=ckpt.file_names if ckpt.sharded else None,
        shard_metadata=ckpt.shard_metadata(),
        metadata_disagreements=ckpt.metadata_disagreements(),
    )


def summarize_gguf(ckpt: GGUFCheckpoint, patterns: Sequence[str] | None = None, tree: bool = False) -> GGUFSummary:
    """:func:`summarize` of a GGUF file."""
    rows: list[TensorRow] = [
        GGUFTensorRow(t.name, t.type, list(t.shape), [t.begin, t.end], t.nbytes, t.nelements, None, list(t.dims))
        for t in ckpt.tensors
        if matches(t.name, patterns)
    ]
    columns = TensorColumns([r.name for r in rows], [r.dtype for r in rows], [r.shape for r in rows],
                            [r.data_offsets[0] for r in rows], [r.data_offsets[1] for r in rows],
                            [r.nbytes for r in rows], [r.parameters for r in rows])
    header = ckpt.header
    entries = {}
    for key, f in header.fields.items():
        # An array stays compact (numbers as GGUFNumbers, arrays of arrays made when read):
        # text shows its first items, JSON lists it.
        if isinstance(f.value, GGUFArray):
            entries[key] = GGUFMetadataEntry(f.type_name, array_values(f.value), len(f.value))
        else:
            entries[key] = GGUFMetadataEntry(f.type_name, f.value)
    return _summary(
        GGUFSummary, ckpt, columns, rows, patterns, tree,
        metadata=None,
        modelspec={},
        gguf_version=header.version,
        alignment=header.alignment,
        gguf_metadata=entries,
        files=ckpt.file_names if len(ckpt.file_names) > 1 else None,  # a split set's files
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
    if isinstance(value, Sequence):  # an array's items (a list, GGUFNumbers, GGUFArrayValues)
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
