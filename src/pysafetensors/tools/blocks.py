"""Repeated blocks: the numbered groups of a tree that hold the same tensors (``layers.0`` ...
``layers.31`` of an LLM), found once and shown folded by ``inspect`` and the viewer.

A group's *numbered children* are its child groups labelled by a decimal number written the
plain way (``0``, ``12``; not ``01``), of at most 18 digits (a longer run is a name, not a count).  Two of them are the same block when they hold the same
tensors: the same names below them (after their own path), each with the same dtype and shape,
which is what a model repeating one block gives.  Every set of two or more alike children is a
:class:`RepeatedBlock` (``model.layers.[0–31] × 32``); a numbered child that is alike to no other
is not folded in, and the largest block at that group says why it differs
(:class:`BlockDifference`): a partial repeat is shown as such, never as a whole one.

The search runs over :func:`~pysafetensors.tools.tree.prefix_groups`' flat tree, so it is one pass
over the tensors per level of numbering (a mixture of experts' ``layers.L.experts.E`` is two).
A block inside another block's members is found in each of them; only the one in the first member
is reported (:attr:`RepeatedBlock.nested` marks the others, which the viewer folds as it expands a
member), and its label names the outer members by their range: ``model.layers.[0–31].experts.[0–7]
× 8``.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from operator import invert, itemgetter, sub
from typing import Any

from ..format._gcpause import paused_gc
from ._base import JsonResult
from .tree import PrefixGroups, natural_key, natural_order

#: differences named in a BlockDifference's reason before "and N more"
REASONS_SHOWN = 2


@dataclass
class BlockDifference(JsonResult):
    """A numbered child alike to no other: not folded into the block beside it, and why."""

    index: int  # its number: 5 for "model.layers.5"
    path: str
    reason: str  # "mlp.up_proj.weight is F32 [14336, 4096], the block's F32 [11008, 4096]"


@dataclass
class RepeatedBlock(JsonResult):
    """Numbered children of one group that hold the same tensors (names, dtypes, shapes)."""

    path: str  # the group whose numbered children repeat: "model.layers"
    label: str  # "model.layers.[0–31] × 32" (outer repeats named by their ranges)
    indices: list[int]  # the members' numbers, ascending
    count: int
    tensors: int  # per member
    parameters: int  # per member
    nbytes: int  # per member
    # Copies of the block in the checkpoint: ``count``, times the count of every block whose
    # first member holds this one (``layers.[0–31].experts.[0–7] × 8`` is 8 × 32 = 256 copies).
    copies: int
    total_parameters: int  # copies × parameters
    total_nbytes: int
    differing: list[BlockDifference] = field(default_factory=list)  # numbered children not folded in
    whole_group: bool = False  # the group holds nothing but this block's members
    nested: bool = False  # inside a member (not the first) of another block: reported in the first
    _group: int = -1  # the group's number in the PrefixGroups
    _members: list[int] = field(default_factory=list)  # the members' group numbers, as ``indices``
    _differing_groups: list[int] = field(default_factory=list)  # as ``differing``


def index_ranges(indices: Sequence[int]) -> str:
    """``0–31``; ``0–4, 6–31``; ``0, 2, …, 30`` (every second); ``3, 7``: ascending numbers as
    runs (three or more in steps of one), progressions (four or more in a larger step) and singles."""
    n = len(indices)
    if n >= 3 and indices[-1] - indices[0] == n - 1:  # one run (they ascend): a stack of layers
        return f"{indices[0]}–{indices[-1]}"
    out: list[str] = []
    i = 0
    while i < n:
        j = i + 1
        if j < n:
            step = indices[j] - indices[i]
            while j + 1 < n and indices[j + 1] - indices[j] == step:
                j += 1
            run = j - i + 1
            if step == 1 and run >= 3:
                out.append(f"{indices[i]}–{indices[j]}")
                i = j + 1
                continue
            if step > 1 and run >= 4:
                out.append(f"{indices[i]}, {indices[i + 1]}, …, {indices[j]}")
                i = j + 1
                continue
        out.append(str(indices[i]))
        i += 1
    return ", ".join(out)


#: the most digits a numbered child's label has (as tools.tree ranks numbers by value): a
#: longer run is no layer count, and reading it as an ``int`` could pass Python's limit
NUMBER_DIGITS = 18
#: a label that writes a number the plain way (``"12"``; not ``"01"``, ``"x"``, ``"٣"``)
_PLAIN_NUMBER = re.compile(f"0|[1-9][0-9]{{0,{NUMBER_DIGITS - 1}}}")


Signature = tuple[tuple[str, int], ...]


def _shape_text(dtype: str, shape: Sequence[int]) -> str:
    return f"{dtype} [{', '.join(map(str, shape))}]"


def _reason(sig: Signature, block: Signature, facts: Mapping[int, tuple[str, tuple[int, ...]]]) -> str:
    """Why a member with tensors ``sig`` is not the block ``block``: its first differences."""
    mine, theirs = dict(sig), dict(block)
    diffs: list[str] = []
    for name, fact in sig:
        shown = name or '""'
        if name not in theirs:
            diffs.append(f"has {shown}, which the block lacks")
        elif theirs[name] != fact:
            diffs.append(f"{shown} is {_shape_text(*facts[fact])}, the block's {_shape_text(*facts[theirs[name]])}")
    diffs.extend("lacks " + (name or '""') for name, _ in block if name not in mine)
    shown_all = "; ".join(diffs[:REASONS_SHOWN])
    more = len(diffs) - REASONS_SHOWN
    return shown_all + (f"; and {more} more difference{'s' if more != 1 else ''}" if more > 0 else "")


@paused_gc()  # a tuple per node: see paused_gc
def find_blocks(groups: PrefixGroups, names: Sequence[str], dtypes: Sequence[str],
                shapes: Sequence[Sequence[int]]) -> list[RepeatedBlock]:
    """Every repeated block of the tree ``groups`` (:func:`~pysafetensors.tools.tree.prefix_groups`
    or :func:`~pysafetensors.tools.tree.name_order_groups` of ``names``; ``dtypes`` and ``shapes``
    beside them), the groups in natural depth-first order and the blocks of one group by their
    first member.  ``nested`` ones included: :func:`reported` leaves them out.  The same blocks
    whichever order ``groups`` has its siblings in (only their group numbers differ).

    Two groups hold the same tensors exactly when their direct children have the same labels,
    in the same order, each child tensor the same dtype and shape and each child group the same
    tensors in turn (the same names below two groups come in the same order, whichever order
    ``groups`` has); so every group gets a structure number from its children's, bottom up
    (equal numbers, equal structure), in one pass over the groups whatever the nesting.
    """
    g = groups
    nodes, label, end, parent, start, tensors = g.nodes, g.label, g.end, g.parent, g.start, g.tensors
    ngroups = len(label)
    # A number per distinct (dtype, shape), made in C (sparse: the count runs on for known ones).
    fact_ids: dict[tuple[str, tuple[int, ...]], int] = {}
    fact = list(map(fact_ids.setdefault, zip(dtypes, map(tuple, shapes)), count()))
    facts = {v: k for k, v in fact_ids.items()}
    leaf = g.leaf
    structure = [0] * ngroups
    interned: dict[tuple[tuple[str, int], ...], int] = {}
    numbers = count()  # structure numbers: distinct, not dense
    # A group of one tensor (a layer's "weight"; every group of a 100,000-layer stack) is its
    # tensor's label and fact: numbered all at once, in C.
    sizes = list(map(sub, end, start))  # nodes below each group
    ones = list(compress(range(ngroups), map((1).__eq__, sizes)))
    one_tensor = list(map(nodes.__getitem__, map(start.__getitem__, ones)))
    one_entries = zip(zip(map(leaf.__getitem__, one_tensor), map(fact.__getitem__, one_tensor)))
    deque(map(structure.__setitem__, ones, map(interned.setdefault, one_entries, numbers)), maxlen=0)
    # Every group's child groups, in C: the groups by parent (a stable sort: in the order of
    # their nodes), a parent's a run found by bisection.
    by_parent = sorted(range(1, ngroups), key=parent.__getitem__)
    parents = list(map(parent.__getitem__, by_parent))
    # The groups with two or more child groups: their child groups, and how many children they have.
    subgroups: dict[int, tuple[list[int], int]] = {}
    for k in compress(range(ngroups - 1, -1, -1), map((1).__ne__, reversed(sizes))):  # a group after its children
        s, e = start[k], end[k]
        if e - s == tensors[k]:  # tensors only
            entries = tuple([(leaf[n], fact[n]) for n in nodes[s:e]])
            structure[k] = interned.setdefault(entries, next(numbers))
            continue
        subs = by_parent[bisect_left(parents, k):bisect_right(parents, k)]
        if sum(map(tensors.__getitem__, subs)) == tensors[k]:  # no tensor of its own: its children, in C
            items = list(zip(map(label.__getitem__, subs), map(invert, map(structure.__getitem__, subs))))
            s = e
        else:  # its children, a child group's subtree jumped over
            items = []
            subs = []
        while s < e:
            n = nodes[s]
            if n >= 0:
                items.append((leaf[n], fact[n]))
                s += 1
            else:
                c = -1 - n
                items.append((label[c], -1 - structure[c]))
                subs.append(c)
                s = end[c]
        structure[k] = interned.setdefault(tuple(items), next(numbers))
        if len(subs) >= 2:
            subgroups[k] = (subs, len(items))

    def flat(c: int) -> Signature:
        """Group ``c``'s tensors as (name after its path, fact number): what a reason compares."""
        at = len(path_of(c)) + 1 if c else 0
        below = [i for i in nodes[start[c]:end[c]] if i >= 0]
        if not g.natural:  # the order its tensors are listed (and its differences named) in
            below = [below[j] for j in natural_order([names[i] for i in below])]
        return tuple((names[i][at:], fact[i]) for i in below)

    path: dict[int, str] = {0: ""}
    shown: dict[int, str] = {0: ""}  # the path, the first members of outer blocks written as their ranges
    marked: set[int] = set()  # members after the first of some block

    def path_of(k: int) -> str:
        if k not in path:
            up = parent[k]
            path[k] = f"{path_of(up)}.{label[k]}" if up else label[k]
        return path[k]

    def shown_of(k: int) -> str:
        # Asked only once every block of k's ancestors is known (groups go in number order, parents first).
        if k not in shown:
            up = parent[k]
            part = first_member.get(k, label[k])
            shown[k] = f"{shown_of(up)}.{part}" if up else part
        return shown[k]

    def outer_copies(k: int) -> int:
        """How many copies of group ``k`` the checkpoint holds: the product of the counts of the
        blocks whose first members hold it."""
        n = 1
        while k:
            n *= first_count.get(k, 1)
            k = parent[k]
        return n

    def is_nested(k: int) -> bool:
        while k:
            if k in marked:
                return True
            k = parent[k]
        return False

    plain = _PLAIN_NUMBER.fullmatch
    first_member: dict[int, str] = {}  # group -> how its block writes it: "[0–31]"
    first_count: dict[int, int] = {}  # group -> the members of the block it stands for
    blocks: list[RepeatedBlock] = []
    for gid in sorted(subgroups):  # each group after its parent
        child_groups, children = subgroups[gid]
        texts = list(map(label.__getitem__, child_groups))
        # A stack of layers: all numbered, checked and read in C (ASCII digits, no leading zero
        # but in "0" itself, not too long: what _PLAIN_NUMBER matches).
        if (all(map(str.isdecimal, texts)) and all(map(str.isascii, texts))
                and max(map(len, texts)) <= NUMBER_DIGITS
                and sum(map("0".__eq__, map(itemgetter(0), texts))) == texts.count("0")):
            numbered = list(zip(map(int, texts), child_groups))
        else:
            numbered = [(int(t), c) for t, c in zip(texts, child_groups) if plain(t)]
        if len(numbered) < 2:
            continue
        if not g.natural:
            numbered.sort(key=itemgetter(0))  # natural order: a plain number's value (two labels, two values)
        kinds = list(map(structure.__getitem__, map(itemgetter(1), numbered)))
        alike_by: dict[int, list[tuple[int, int]]]
        if len(set(kinds)) == 1:  # all alike
            alike_by = {kinds[0]: numbered}
        else:
            alike_by = {}
            for m, kind in zip(numbered, kinds):
                alike_by.setdefault(kind, []).append(m)
        alike = [ms for ms in alike_by.values() if len(ms) >= 2]  # in the order of their first members
        if not alike:
            continue
        main = max(alike, key=len)  # the largest; the first of equals
        lone = [ms[0] for ms in alike_by.values() if len(ms) == 1]
        main_sig = flat(main[0][1]) if lone else ()
        only_numbered = len(numbered) == children
        here, owner, inside, outer = path_of(gid), shown_of(gid), is_nested(gid), outer_copies(gid)
        for members in alike:
            nums = list(map(itemgetter(0), members))
            member_groups = list(map(itemgetter(1), members))
            ranges = f"[{index_ranges(nums)}]"
            first = members[0][1]
            params, nbytes = g.parameters[first], g.nbytes[first]
            is_main = members is main
            blocks.append(RepeatedBlock(
                path=here,
                label=(f"{owner}.{ranges}" if gid else ranges) + f" × {len(members):,}",
                indices=nums,
                count=len(members),
                tensors=g.tensors[first],
                parameters=params,
                nbytes=nbytes,
                copies=outer * len(members),
                total_parameters=params * outer * len(members),
                total_nbytes=nbytes * outer * len(members),
                differing=[BlockDifference(num, path_of(c), _reason(flat(c), main_sig, facts))
                           for num, c in lone] if is_main else [],
                whole_group=len(alike) == 1 and not lone and only_numbered,
                nested=inside,
                _group=gid,
                _members=member_groups,
                _differing_groups=[c for _, c in lone] if is_main else [],
            ))
            # The first member stands for the others: what is below it is labelled by the
            # range, and what is below the others is the same, so it is not reported again.
            first_member[first] = ranges
            first_count[first] = len(members)
            marked.update(member_groups[1:])
    if not g.natural:  # in the natural order of their groups' paths (a stable sort: a group's stay in order)
        keys: dict[int, tuple[tuple[Any, ...], ...]] = {0: ()}

        def path_key(k: int) -> tuple[tuple[Any, ...], ...]:
            if k not in keys:
                keys[k] = (*path_key(parent[k]), natural_key(label[k]))
            return keys[k]

        blocks.sort(key=lambda b: path_key(b._group))
    return blocks


def reported(blocks: Sequence[RepeatedBlock]) -> list[RepeatedBlock]:
    """The blocks a summary lists: all but those ``nested`` in a member other than the first."""
    return [b for b in blocks if not b.nested]


__all__ = ["BlockDifference", "RepeatedBlock", "find_blocks", "index_ranges", "reported"]
