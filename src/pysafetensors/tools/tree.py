"""Tensors grouped by dotted prefix, every group carrying its subtree's totals.

Each tensor is exactly one leaf, whatever its name: ``a`` beside ``a.b`` gives a leaf ``a``
and a group ``a`` side by side; a leading, trailing or doubled dot gives a group labelled
``""``; the empty name is a leaf labelled ``""`` under the root.  Groups are keyed by their
path as a tuple of parts, never by the joined string, so no name can land on another's node.
Names deeper than MAX_DEPTH dots keep the rest of the name in their last label, so the tree
(and its JSON) stays shallow enough to walk without recursion limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._base import JsonResult

MAX_DEPTH = 64


class TensorLike(Protocol):
    """What a tree needs of a tensor: a TensorRow (``dtype`` a code, ``parameters``) or a
    TensorInfo (``dtype`` a DType, ``nelements``)."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> Sequence[int]: ...
    @property
    def nbytes(self) -> int: ...


def _facts(row: Any) -> tuple[str, int]:
    dtype = getattr(row.dtype, "code", row.dtype)
    params = row.parameters if hasattr(row, "parameters") else row.nelements
    return str(dtype), int(params)


@dataclass
class TreeNode(JsonResult):
    name: str  # the dotted path of this group or tensor ("" for the root)
    parameters: int
    tensors: int
    nbytes: int
    children: list[TreeNode] = field(default_factory=list)
    dtype: str | None = None  # tensors (leaves) only
    shape: list[int] | None = None
    label: str = ""  # what a tree view shows: the path after the parent's

    @property
    def is_tensor(self) -> bool:
        return self.dtype is not None

    def leaves(self) -> Iterable[TreeNode]:
        """Every tensor below this node, depth first (iterative: no recursion limit)."""
        stack = [self]
        while stack:
            node = stack.pop()
            if node.is_tensor:
                yield node
            stack.extend(reversed(node.children))


def split_name(name: str) -> list[str]:
    """The path parts of a tensor name: split at dots, at most MAX_DEPTH parts."""
    return name.split(".", MAX_DEPTH - 1)


def build_tree(rows: Sequence[TensorLike]) -> TreeNode:
    """Group tensors by dotted prefix; every node carries its subtree's totals.

    ``rows``: :func:`pysafetensors.tools.summary.tensor_rows` or ``Checkpoint.tensors``.
    """
    root = TreeNode("", 0, 0, 0)
    groups: dict[tuple[str, ...], TreeNode] = {(): root}
    for row in sorted(rows, key=lambda r: r.name):
        dtype, params = _facts(row)
        parts = split_name(row.name)
        node = root
        for depth in range(1, len(parts)):
            node.parameters += params
            node.tensors += 1
            node.nbytes += row.nbytes
            key = tuple(parts[:depth])
            child = groups.get(key)
            if child is None:
                child = groups[key] = TreeNode(".".join(key), 0, 0, 0, label=parts[depth - 1])
                node.children.append(child)
            node = child
        node.parameters += params
        node.tensors += 1
        node.nbytes += row.nbytes
        leaf = TreeNode(row.name, params, 1, row.nbytes, dtype=dtype, shape=list(row.shape), label=parts[-1])
        node.children.append(leaf)
    return root
