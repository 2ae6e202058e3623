"""Turn an unpickled tree into named tensors: pick a subtree, flatten with dots, drop tied copies."""

from __future__ import annotations

from typing import Any

from ..errors import ConversionError, ConversionLimitExceeded, CorruptCheckpoint
from .checkpoint import SourceTensor, Unconvertible, settle
from .limits import WALK_ALLOWANCE, WALK_FACTOR, Budget, key_name
from .torch_objects import TorchSize

MAX_DEPTH = 200
SINGLE_TENSOR_NAME = "tensor"  # the name a bare tensor (or a .npy array) is written under


def is_leaf(obj: Any) -> bool:
    """A tensor leaf (of a settled tree: :func:`select` and :func:`flatten` settle what they walk)."""
    return isinstance(obj, (SourceTensor, Unconvertible))


def _is_container(obj: Any) -> bool:
    return isinstance(obj, (dict, list, tuple)) and not isinstance(obj, TorchSize)


def _children(obj: Any) -> list[tuple[str, Any]] | None:
    if isinstance(obj, dict):
        # str and int keys name children; any other key (a tuple...) is kept visible by repr
        return [(key_name(k), settle(v)) for k, v in obj.items()]
    if _is_container(obj):
        return [(str(i), settle(v)) for i, v in enumerate(obj)]
    return None


def distinct_entries(tree: Any) -> int:
    """Container entries in the tree counting each container once, however often it is shared:
    what the file really holds, and linear in its size."""
    seen: set[int] = set()
    pending = [tree]
    entries = 0
    while pending:
        node = pending.pop()
        if not _is_container(node) or id(node) in seen:
            continue
        seen.add(id(node))
        values = node.values() if isinstance(node, dict) else node
        entries += len(values)
        pending.extend(values)
    return entries


def select(tree: Any, key: str) -> Any:
    """The subtree (or single tensor) at dotted ``key``.

    Dict keys may themselves contain dots, so at each level the longest key matching the front
    of the remaining path wins.
    """
    node, rest, walked = settle(tree), key, []
    while rest:
        children = _children(node)
        if children is None:
            break
        names = dict(children)
        parts = rest.split(".")
        for cut in range(len(parts), 0, -1):
            head = ".".join(parts[:cut])
            if head in names:
                node, rest = names[head], ".".join(parts[cut:])
                walked.append(head)
                break
        else:
            break
    if rest:
        where = ".".join(walked) or "the top level"
        options = [short_name(n) for n in sorted(dict(_children(node) or []))[:10]]
        raise ConversionError(
            f"--key {key!r}: no entry {rest!r} under {where}; it has {options}", key=key
        )
    return node


def flatten(tree: Any, budget: Budget) -> tuple[dict[str, Any], list[str]]:
    """(name -> tensor leaf, names of skipped non-tensor leaves), in the tree's own order.

    A container shared by several parents (a pickle memo reference) is walked once per path,
    as each path names its own tensors; to keep a few hundred bytes of memo references from
    describing 2**40 paths, the walk may visit at most WALK_FACTOR times the entries the tree
    really holds (plus WALK_ALLOWANCE), and the names it builds are charged to ``budget``.
    """
    tree = settle(tree)
    distinct = distinct_entries(tree)
    allowed = WALK_FACTOR * distinct + WALK_ALLOWANCE
    walked = 0
    tensors: dict[str, Any] = {}
    skipped: list[str] = []
    stack: list[tuple[str, Any, int]] = [("", tree, 0)]
    while stack:
        name, node, depth = stack.pop()
        if is_leaf(node):
            final = name or SINGLE_TENSOR_NAME
            if final in tensors:
                raise ConversionError(f"two tensors flatten to the same name {short_name(final)!r}", tensor=final)
            tensors[final] = node
            continue
        children = _children(node)
        if children is None:
            if name:
                skipped.append(name)
            continue
        if depth >= MAX_DEPTH:
            raise CorruptCheckpoint(
                f"containers nested deeper than {MAX_DEPTH} levels at {short_name(name)!r} (a cycle?)"
            )
        walked += len(children)
        if walked > allowed:
            raise ConversionLimitExceeded(
                f"{budget.label}: its containers are shared so often that flattening them would "
                f"visit more than {allowed:,} entries, though it holds only {distinct:,} distinct "
                f"ones (a shared-reference bomb?): refusing",
                limit="flatten entries",
                requested=walked,
                allowed=allowed,
            )
        for child, value in reversed(children):
            budget.charge(len(name) + 1 + len(child), "flattened tensor names")
            stack.append((f"{name}.{child}" if name else child, value, depth + 1))
    return tensors, skipped


def short_name(name: str) -> str:
    return name if len(name) <= 200 else f"{name[:100]}...{name[-60:]}"


def drop_tied(tensors: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Keep one tensor per identical view of the same bytes: (kept tensors, removed -> kept).

    The kept name is the smallest in sort order, as upstream's convert.py does.
    """
    groups: dict[Any, list[str]] = {}
    for name, leaf in tensors.items():
        key = leaf.tie_key() if not isinstance(leaf, Unconvertible) else None
        if key is not None:
            groups.setdefault(key, []).append(name)
    removed: dict[str, str] = {}
    for names in groups.values():
        if len(names) > 1:
            kept = min(names)
            removed.update({n: kept for n in names if n != kept})
    return {n: t for n, t in tensors.items() if n not in removed}, removed
