"""Turn an unpickled tree into named tensors: pick a subtree, flatten with dots, drop tied copies."""

from __future__ import annotations

from typing import Any

from ..errors import ConversionError, CorruptCheckpoint
from .checkpoint import Unconvertible
from .torch_objects import TorchSize

MAX_DEPTH = 200
SINGLE_TENSOR_NAME = "tensor"  # the name a bare tensor (or a .npy array) is written under


def _is_leaf(obj: Any) -> bool:
    return hasattr(obj, "read") and hasattr(obj, "tie_key") or isinstance(obj, Unconvertible)


def _children(obj: Any) -> list[tuple[str, Any]] | None:
    if isinstance(obj, dict):
        # str and int keys name children; any other key (a tuple...) is kept visible by repr
        return [(k if isinstance(k, str) else str(k) if isinstance(k, int) else repr(k), v)
                for k, v in obj.items()]
    if isinstance(obj, (list, tuple)) and not isinstance(obj, TorchSize):
        return [(str(i), v) for i, v in enumerate(obj)]
    return None


def select(tree: Any, key: str) -> Any:
    """The subtree (or single tensor) at dotted ``key``.

    Dict keys may themselves contain dots, so at each level the longest key matching the front
    of the remaining path wins.
    """
    node, rest, walked = tree, key, []
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
        options = sorted(dict(_children(node) or []))[:10]
        raise ConversionError(
            f"--key {key!r}: no entry {rest!r} under {where}; it has {options}", key=key
        )
    return node


def is_leaf(obj: Any) -> bool:
    return _is_leaf(obj)


def flatten(tree: Any, prefix: str = "") -> tuple[dict[str, Any], list[str]]:
    """(name -> tensor leaf, names of skipped non-tensor leaves), in the tree's own order."""
    tensors: dict[str, Any] = {}
    skipped: list[str] = []
    stack: list[tuple[str, Any, int]] = [(prefix, tree, 0)]
    while stack:
        name, node, depth = stack.pop()
        if _is_leaf(node):
            final = name or SINGLE_TENSOR_NAME
            if final in tensors:
                raise ConversionError(f"two tensors flatten to the same name {final!r}", tensor=final)
            tensors[final] = node
            continue
        children = _children(node)
        if children is None:
            if name:
                skipped.append(name)
            continue
        if depth >= MAX_DEPTH:
            raise CorruptCheckpoint(f"containers nested deeper than {MAX_DEPTH} levels at {name!r} (a cycle?)")
        for child, value in reversed(children):
            stack.append((f"{name}.{child}" if name else child, value, depth + 1))
    return tensors, skipped


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
