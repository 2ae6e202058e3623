"""tools.tree: every tensor is exactly one leaf, and every group's totals are its leaves' sums."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from pysafetensors.tools.tree import MAX_DEPTH, TreeNode, build_tree


@dataclass
class Row:
    name: str
    dtype: str
    shape: list[int]
    parameters: int
    nbytes: int


def _rows(names: list[str]) -> list[Row]:
    return [Row(n, "F32", [i + 1], i + 1, 4 * (i + 1)) for i, n in enumerate(names)]


def _groups(node: TreeNode) -> list[TreeNode]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if not n.is_tensor:
            out.append(n)
            stack.extend(n.children)
    return out


def _check(rows: list[Row]) -> TreeNode:
    root = build_tree(rows)
    leaves = list(root.leaves())
    assert sorted(leaf.name for leaf in leaves) == sorted(r.name for r in rows)  # each once
    assert sum(leaf.tensors for leaf in leaves) == len(rows) == root.tensors
    assert root.parameters == sum(r.parameters for r in rows)
    assert root.nbytes == sum(r.nbytes for r in rows)
    for group in _groups(root):
        below = list(group.leaves())
        assert group.tensors == len(below)
        assert group.parameters == sum(leaf.parameters for leaf in below)
        assert group.nbytes == sum(leaf.nbytes for leaf in below)
        assert all(not c.children for c in group.children if c.is_tensor)
        for c in group.children:  # every child is named by its group's path, a dot, and its label
            assert c.name == (f"{group.name}.{c.label}" if group is not root else c.label)
        labels = [c.label for c in group.children if not c.is_tensor]
        assert len(labels) == len(set(labels))  # one group per path
    return root


@given(st.sets(st.text(alphabet="ab.", max_size=6), max_size=25))
def test_every_tensor_is_one_leaf(names: set[str]) -> None:
    _check(_rows(sorted(names)))


def test_the_names_that_broke_the_old_tree() -> None:
    rows = _rows(["a", "a.b", ".x", "", "x.", "a..b"])
    root = _check(rows)
    top = [(c.label, c.is_tensor) for c in root.children]
    # The empty name and the group of ".x" both have the label "": one leaf, one group.
    assert top.count(("", True)) == 1 and top.count(("", False)) == 1
    assert ("a", True) in top and ("a", False) in top  # tensor a beside group a


def test_deep_names_are_capped_not_recursed() -> None:
    name = ".".join(["l"] * 10_000)
    root = _check(_rows([name, "l.x"]))
    depth, node = 0, root
    while node.children and not node.is_tensor:
        node = next(c for c in node.children if c.name == name or name.startswith(c.name + "."))
        depth += 1
    assert depth == MAX_DEPTH and node.name == name and node.label.count(".") == 10_000 - MAX_DEPTH


def test_inspect_tree_lists_every_tensor_once(tmp_path: Path) -> None:
    from cli.conftest import run_cli

    from pysafetensors.numpy import save_file

    path = tmp_path / "t.safetensors"
    names = ["a", "a.b", ".x", "", "x."]
    save_file({n: np.zeros(i + 1, np.float32) for i, n in enumerate(names)}, str(path))
    r = run_cli("inspect", path, "--tree")
    lines = r.out.split("tree (15 params):\n")[1].splitlines()
    assert [ln.strip() for ln in lines] == [
        '""  F32 [4]  4 params',
        '""/  3 params, 1 tensor',
        "x  F32 [3]  3 params",
        "a  F32 [1]  1 param",
        "a/  2 params, 1 tensor",
        "b  F32 [2]  2 params",
        "x/  5 params, 1 tensor",
        '""  F32 [5]  5 params',
    ]
    tree = json.loads(run_cli("inspect", path, "--tree", "--json").out)["tree"]
    leaves, stack = [], [tree]
    while stack:
        node = stack.pop()
        stack.extend(node["children"])
        if node["dtype"] is not None:
            leaves.append(node["name"])
    assert sorted(leaves) == sorted(names) and tree["tensors"] == 5 and tree["parameters"] == 15
    deep = tmp_path / "deep.safetensors"
    save_file({".".join(["l"] * 5000): np.zeros(1, np.float32)}, str(deep))
    assert run_cli("inspect", deep, "--tree", "--json").code == 0


def test_tree_from_tensor_infos_equals_tree_from_rows(tmp_path: Path) -> None:
    from pysafetensors.tools.checkpoint import open_checkpoint
    from pysafetensors.tools.summary import tensor_rows

    path = tmp_path / "m.safetensors"
    from pysafetensors.numpy import save_file

    save_file({"a.b": np.zeros((2, 3), np.float32), "a": np.zeros((), np.int8), "c.d.e": np.zeros(5)}, str(path))
    with open_checkpoint(path) as ckpt:
        assert build_tree(ckpt.tensors).to_dict() == build_tree(tensor_rows(ckpt)).to_dict()
        assert build_tree(ckpt.tensors).parameters == 6 + 1 + 5
