"""Tensors grouped by dotted prefix, every group carrying its subtree's totals.

Each tensor is exactly one leaf, whatever its name: ``a`` beside ``a.b`` gives a leaf ``a``
and a group ``a`` side by side; a leading, trailing or doubled dot gives a group labelled
``""``; the empty name is a leaf labelled ``""`` under the root.  Groups are keyed by their
path as a tuple of parts, never by the joined string, so no name can land on another's node.
Names deeper than MAX_DEPTH dots keep the rest of the name in their last label, so the tree
(and its JSON) stays shallow enough to walk without recursion limits.

Siblings come in natural order (:func:`natural_order`): ``layers.2`` before ``layers.10``,
``h9`` before ``h10``, compared part by part, so the page's tree, its table sorted by name and
``inspect --tree`` list tensors in the one order a reader expects.

:func:`prefix_groups` does the grouping and the totals, in one pass over the names in natural
order, and gives the compact form the viewer sends as it is (nested lists, a tensor as its row
number); :func:`build_tree` turns that into :class:`TreeNode` objects for ``inspect --tree``.
One grouping, so the page and the CLI cannot disagree.  :func:`name_order_groups` is the same
grouping with siblings in the names' own order, for what does not show the tree (``inspect``'s
repeated blocks): it skips the natural sort.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, filterfalse
from operator import sub
from typing import Any, Protocol

from ..format._gcpause import paused_gc
from ..format.header import TensorInfo
from ._base import JsonResult

MAX_DEPTH = 64


class TensorRowLike(Protocol):
    """What a tree needs of a tensor row (a TensorRow): ``dtype`` a code, ``parameters``."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Sequence[int]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def parameters(self) -> int: ...


#: a row, or a header entry (``dtype`` a DType, ``nelements``)
TensorLike = TensorRowLike | TensorInfo


def _facts(row: TensorLike) -> tuple[str, int]:
    """A tensor's dtype code and parameter count."""
    if isinstance(row, TensorInfo):
        return row.dtype.code, row.nelements
    return row.dtype, row.parameters


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


_DIGITS = re.compile(r"([0-9]+)")


def natural_key(part: str) -> tuple[tuple[Any, ...], ...]:
    """How one path part sorts: runs of ASCII digits by their value (``2`` before ``10``, leading
    zeros and length compared without ``int``, so a 5,000-digit run is no error), the text
    between them as text.  Two parts with equal keys are equal strings: the key keeps every
    character."""
    out: list[tuple[Any, ...]] = []
    for i, piece in enumerate(_DIGITS.split(part)):
        if i % 2:
            digits = piece.lstrip("0")
            out.append((0, len(digits), digits, piece))
        elif piece:
            out.append((1, piece))
    return tuple(out)


def natural_order(names: Sequence[str]) -> list[int]:
    """The positions of ``names`` in natural order: compared part by part (:func:`split_name`),
    each part by :func:`natural_key`.  A prefix of parts sorts first, and all the names under
    one group are neighbours, as the tree needs.
    """
    return _natural_order(names)[0]


#: a part of ASCII digits only, short enough to rank by its value as an ``int``
_NUMBER = re.compile("[0-9]{1,18}")
_PADDED = re.compile("^0.", re.MULTILINE)


def _part_ranks(distinct: set[str]) -> dict[str, int]:
    """Each part's rank in :func:`natural_key` order.

    The order is natural_key's own, made cheap for the parts names are mostly made of: a part of
    ASCII digits only has the key ``((0, value's length, value's digits, part),)``, the order of
    ``(int(part), part)``; a part without an ASCII digit has ``((1, part),)``, the order of the
    part itself; and every digit-only key is below every such text key.  Those two kinds are
    sorted by those flat keys, and the final sort by natural_key only merges the few other
    parts in (its runs are already in order, so it compares each part about once).
    """
    numbers = list(filter(_NUMBER.fullmatch, distinct))
    others = distinct.difference(numbers)
    words = list(filterfalse(_DIGITS.search, others))
    mixed = list(filter(_DIGITS.search, others))
    if _PADDED.search("\n".join(numbers)):  # equal values (leading zeros): ties by the part,
        numbers.sort()  # which the sort by value below keeps
    numbers.sort(key=int)
    words.sort()  # "" (the key ()) first: it is a prefix of every other part
    ordered = numbers + words if not words or words[0] else ["", *numbers, *words[1:]]
    if mixed:
        ordered += mixed
        ordered.sort(key=natural_key)
    return dict(zip(ordered, range(len(ordered))))


def _natural_order(names: Sequence[str]) -> tuple[list[int], list[list[str]]]:
    """:func:`natural_order` of ``names``, and each name's parts (:func:`split_name`).

    Each distinct part is ranked once (:func:`_part_ranks`); a name's key is then a tuple of
    small integers, so a 100,000-name sort compares integers, not strings.
    """
    parts = [n.split(".", MAX_DEPTH - 1) for n in names]
    rank = _part_ranks(set().union(*parts))
    get = rank.__getitem__
    keys = [tuple(map(get, p)) for p in parts]
    return sorted(range(len(names)), key=keys.__getitem__), parts


@dataclass
class PrefixGroups:
    """The tree of a list of tensors, flat: what :func:`prefix_groups` gives.

    ``nodes`` lists every node but the root in depth-first order, children in the order of the
    names in natural order: a tensor as its position in the names given (``>= 0``), group ``g`` as
    ``-1 - g``.  The per-group lists are indexed by group number, group 0 being the root:
    ``label`` (the path part after the parent's), the subtree's ``parameters``, ``tensors`` and
    ``nbytes``, ``end``, the position in ``nodes`` just past the group's subtree (a collapsed
    group is skipped by jumping there), ``parent`` and ``start``; per tensor, ``leaf``.  Plain
    lists of strings and integers: the viewer sends the ones it draws as they are.
    """

    nodes: list[int]
    label: list[str]
    parameters: list[int]
    tensors: list[int]
    nbytes: list[int]
    end: list[int]
    parent: list[int]  # each group's parent group (the root's: 0)
    start: list[int]  # where each group's children begin in ``nodes``, just past its own node (the root's: 0)
    leaf: list[str]  # each tensor's label (its name after its group's path and a dot), by its position
    #: siblings in natural order (:func:`prefix_groups`); False: in the names' code-point order
    #: (:func:`name_order_groups`), the same groups numbered otherwise
    natural: bool = True


@paused_gc()  # a large header's tree is many small acyclic lists: see paused_gc
def prefix_groups(names: Sequence[str], parameters: Sequence[int], nbytes: Sequence[int]) -> PrefixGroups:
    """Group ``names`` by dotted prefix (each tensor's ``parameters`` and ``nbytes`` beside it),
    every group with its subtree's totals, siblings in natural order: see :class:`PrefixGroups`."""
    order, split = _natural_order(names)
    return _grouped(order, split, parameters, nbytes, natural=True)


@paused_gc()
def name_order_groups(names: Sequence[str], parameters: Sequence[int], nbytes: Sequence[int]) -> PrefixGroups:
    """:func:`prefix_groups`' groups, labels and totals with siblings in the code-point order of
    the names instead of natural order (``natural`` False): no natural sort, and the names of a
    checkpoint come that way already (a header lists them sorted within each dtype, so the sort
    here merges a few runs).  What the repeated blocks are found on when no tree is shown: they
    do not depend on the order of siblings (see :func:`~pysafetensors.tools.blocks.find_blocks`).

    Sorted strings keep every group's names together too: the names under ``a`` / ``b`` are
    those that begin ``a.b.``.
    """
    split = [n.split(".", MAX_DEPTH - 1) for n in names]
    return _grouped(sorted(range(len(names)), key=names.__getitem__), split, parameters, nbytes, natural=False)


def _grouped(order: Sequence[int], split: list[list[str]], parameters: Sequence[int], nbytes: Sequence[int],
             natural: bool) -> PrefixGroups:
    """The groups of the names whose parts (:func:`split_name`) are ``split``, visited in
    ``order``, an order where every group's tensors are neighbours (all the names whose parts
    begin ``a``, ``b``, and only they, are under group ``a`` / ``b``): the groups of the previous
    name are kept on a stack, closed where the next name leaves them.  A tensor's label is its
    name after its group's path and a dot: the last of its parts, taken off ``split``'s lists
    (this call's own).

    A group's tensors are a run of ``order`` (``first`` to ``last``), so its totals are
    differences of running sums, taken in C after the walk rather than added up group by group.
    """
    nodes: list[int] = []
    label, first, last, end, parent, start = [""], [0], [0], [0], [0], [0]
    stack = [0]  # the open groups, the root first; path[d - 1] is stack[d]'s label
    path: list[str] = []
    leaf = list(map(list.pop, split))  # what is left are the group labels
    for j, i in enumerate(order):
        parts = split[i]
        if parts != path:
            depth = len(parts)
            if depth == len(path) and parts[:-1] == path[:-1]:  # the last group's sibling: numbered layers
                keep = depth - 1
            else:
                shared = min(depth, len(path))
                keep = 0
                while keep < shared and parts[keep] == path[keep]:
                    keep += 1
            while len(stack) > keep + 1:
                done = stack.pop()
                end[done] = len(nodes)
                last[done] = j
            for part in parts[keep:]:
                g = len(label)
                label.append(part)
                first.append(j)
                last.append(0)
                end.append(0)
                parent.append(stack[-1])
                nodes.append(-1 - g)
                start.append(len(nodes))
                stack.append(g)
            path = parts
        nodes.append(i)
    for done in stack:
        end[done] = len(nodes)
        last[done] = len(order)
    running_params = [0, *accumulate(map(parameters.__getitem__, order))]
    running_bytes = [0, *accumulate(map(nbytes.__getitem__, order))]
    return PrefixGroups(
        nodes, label,
        list(map(sub, map(running_params.__getitem__, last), map(running_params.__getitem__, first))),
        list(map(sub, last, first)),
        list(map(sub, map(running_bytes.__getitem__, last), map(running_bytes.__getitem__, first))),
        end, parent, start, leaf, natural)


def build_tree(rows: Sequence[TensorLike]) -> TreeNode:
    """Group tensors by dotted prefix; every node carries its subtree's totals.

    ``rows``: :func:`pysafetensors.tools.summary.tensor_rows` or ``Checkpoint.tensors``.
    """
    facts = [_facts(r) for r in rows]
    names = [r.name for r in rows]
    params = [f[1] for f in facts]
    nbytes = [r.nbytes for r in rows]
    g = prefix_groups(names, params, nbytes)
    return tree_nodes(g, names, [f[0] for f in facts], [r.shape for r in rows], params, nbytes)


def tree_nodes(g: PrefixGroups, names: Sequence[str], dtypes: Sequence[str], shapes: Sequence[Sequence[int]],
               parameters: Sequence[int], nbytes: Sequence[int]) -> TreeNode:
    """:func:`prefix_groups`' flat tree ``g`` of ``names`` (the tensors' ``dtypes``, ``shapes``,
    ``parameters`` and ``nbytes`` beside them) as :class:`TreeNode` objects."""
    root = TreeNode("", g.parameters[0], g.tensors[0], g.nbytes[0])
    stack = [(root, g.end[0])]  # the open groups and where their subtrees end in g.nodes
    for pos, n in enumerate(g.nodes):
        while pos >= stack[-1][1]:
            stack.pop()
        parent = stack[-1][0]
        if n >= 0:
            name = names[n]
            prefix = len(parent.name) + 1 if parent is not root else 0  # the label follows "path."
            parent.children.append(TreeNode(name, parameters[n], 1, nbytes[n], dtype=dtypes[n],
                                            shape=list(shapes[n]), label=name[prefix:]))
        else:
            k = -1 - n
            name = f"{parent.name}.{g.label[k]}" if parent is not root else g.label[k]
            group = TreeNode(name, g.parameters[k], g.tensors[k], g.nbytes[k], label=g.label[k])
            parent.children.append(group)
            stack.append((group, g.end[k]))
    return root


def within_depth(root: TreeNode, depth: int) -> TreeNode:
    """A copy of ``root`` without the nodes more than ``depth`` levels below it (a group at the
    last level keeps its totals, with no children)."""
    top = TreeNode(root.name, root.parameters, root.tensors, root.nbytes, dtype=root.dtype,
                   shape=root.shape, label=root.label)
    stack = [(root, top, 0)]
    while stack:
        node, copy, level = stack.pop()
        if level >= depth:
            continue
        for c in node.children:
            kid = TreeNode(c.name, c.parameters, c.tensors, c.nbytes, dtype=c.dtype, shape=c.shape, label=c.label)
            copy.children.append(kid)
            stack.append((c, kid, level + 1))
    return top
