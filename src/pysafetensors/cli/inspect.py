"""``pysafetensors inspect FILE``: sizes, counts per dtype, metadata, tensor table, dotted tree."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._common import emit, fmt_bytes, fmt_count, fmt_int, matches, plural, render_json, table
from ._inputs import Input, open_input

MODELSPEC_PREFIX = "modelspec."


@dataclass
class TensorRow:
    name: str
    dtype: str
    shape: list[int]
    data_offsets: list[int]
    nbytes: int
    parameters: int
    file: str | None = None  # the shard holding it (sharded inputs only)


@dataclass
class TreeNode:
    name: str  # the dotted path of this subtree ("" for the root)
    parameters: int
    tensors: int
    nbytes: int
    children: list[TreeNode] = field(default_factory=list)
    dtype: str | None = None  # leaves only
    shape: list[int] | None = None


@dataclass
class InspectResult:
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
    total_tensor_count: int | None = None  # before --filter
    files: list[str] | None = None  # shards, for a sharded input
    tree: TreeNode | None = None


def _rows(inp: Input, patterns: Sequence[str] | None) -> list[TensorRow]:
    rows = []
    for t in inp.tensors:
        if matches(t.name, patterns):
            rows.append(
                TensorRow(t.name, t.dtype.code, list(t.shape), [t.begin, t.end], t.nbytes, t.nelements,
                          inp.file_of(t.name) if inp.sharded else None)
            )
    return rows


def build_tree(rows: Sequence[TensorRow]) -> TreeNode:
    """Group tensors by dotted prefix; every node carries its subtree's totals."""
    root = TreeNode("", 0, 0, 0)
    index: dict[str, TreeNode] = {"": root}
    for row in sorted(rows, key=lambda r: r.name):
        parts = row.name.split(".")
        node = root
        for depth in range(len(parts)):
            path = ".".join(parts[: depth + 1])
            node.parameters += row.parameters
            node.tensors += 1
            node.nbytes += row.nbytes
            child = index.get(path)
            if child is None:
                child = TreeNode(path, 0, 0, 0)
                index[path] = child
                node.children.append(child)
            node = child
        node.parameters += row.parameters
        node.tensors += 1
        node.nbytes += row.nbytes
        node.dtype, node.shape = row.dtype, row.shape
    return root


def compute_inspect(path: str, patterns: Sequence[str] | None = None, tree: bool = False) -> InspectResult:
    """Everything ``inspect`` shows about ``path``; counts cover the tensors ``patterns`` select."""
    with open_input(path) as inp:
        rows = _rows(inp, patterns)
        by_dtype: dict[str, int] = {}
        bytes_by: dict[str, int] = {}
        for r in rows:
            by_dtype[r.dtype] = by_dtype.get(r.dtype, 0) + r.parameters
            bytes_by[r.dtype] = bytes_by.get(r.dtype, 0) + r.nbytes
        metadata = inp.metadata
        return InspectResult(
            path=path,
            file_size=inp.file_size,
            header_size=inp.header_size,
            tensor_count=len(rows),
            parameter_count=sum(r.parameters for r in rows),
            parameters_by_dtype=dict(sorted(by_dtype.items())),
            bytes_by_dtype=dict(sorted(bytes_by.items())),
            metadata=metadata,
            modelspec={k: v for k, v in (metadata or {}).items() if k.startswith(MODELSPEC_PREFIX)},
            tensors=rows,
            filter=list(patterns) if patterns else None,
            total_tensor_count=len(inp.tensors),
            files=inp.file_names if inp.sharded else None,
            tree=build_tree(rows) if tree else None,
        )


def _render_tree(node: TreeNode, depth: int, out: list[str]) -> None:
    for child in node.children:
        label = child.name.rsplit(".", 1)[-1] if depth else child.name
        if child.children:
            out.append(f"{'  ' * depth}{label}/  {fmt_int(child.parameters)} params, {plural(child.tensors, 'tensor')}")
            _render_tree(child, depth + 1, out)
        else:
            out.append(f"{'  ' * depth}{label}  {child.dtype} {child.shape}  {fmt_int(child.parameters)} params")


def render_inspect(result: InspectResult, fmt: str = "text", tensors: bool = False) -> str:
    if fmt == "json":
        return render_json(result)
    out = [f"file:        {result.path}"]
    if result.files:
        out.append(f"shards:      {len(result.files)} ({', '.join(result.files)})")
    out.append(f"file size:   {fmt_bytes(result.file_size)}")
    out.append(f"header size: {fmt_bytes(result.header_size)}")
    count = fmt_int(result.tensor_count)
    if result.filter:
        count += f" of {fmt_int(result.total_tensor_count or 0)} (filter: {' '.join(result.filter)})"
    out.append(f"tensors:     {count}")
    out.append(f"parameters:  {fmt_count(result.parameter_count)}")
    if result.parameters_by_dtype:
        out.append("by dtype:")
        rows = [[d, fmt_int(p), fmt_int(result.bytes_by_dtype[d])] for d, p in result.parameters_by_dtype.items()]
        out.extend("  " + line for line in table(rows, ["dtype", "parameters", "bytes"], right=[1, 2]).splitlines())
    plain = {k: v for k, v in (result.metadata or {}).items() if not k.startswith(MODELSPEC_PREFIX)}
    if result.metadata is None:
        out.append("metadata:    (none)")
    else:
        out.append("metadata:" + ("    (empty)" if not result.metadata else ""))
        for k, v in plain.items():
            out.append(f"  {k}: {_short(v)}")
    if result.modelspec:
        out.append("modelspec:")
        for k, v in result.modelspec.items():
            out.append(f"  {k[len(MODELSPEC_PREFIX):]}: {_short(v)}")
    if tensors:
        rows = [[r.name, r.dtype, str(r.shape), f"[{r.data_offsets[0]}, {r.data_offsets[1]}]", fmt_int(r.nbytes)]
                + ([r.file or ""] if result.files else []) for r in result.tensors]
        head = ["name", "dtype", "shape", "data_offsets", "bytes"] + (["file"] if result.files else [])
        out.append("")
        out.append(table(rows, head, right=[4]))
    if result.tree is not None:
        out.append("")
        out.append(f"tree ({fmt_int(result.tree.parameters)} params):")
        lines: list[str] = []
        _render_tree(result.tree, 1, lines)
        out.extend(lines)
    return "\n".join(out) + "\n"


def _short(value: str, limit: int = 200) -> str:
    one = value.replace("\n", "\\n")
    return one if len(one) <= limit else one[:limit] + f"... ({len(value)} chars)"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("inspect", parents=[common_options()], help="sizes, parameter counts, metadata, tensors")
    p.add_argument("file", help="a .safetensors file, an index JSON, or a checkpoint directory")
    p.add_argument("--tensors", action="store_true", help="list every tensor (name, dtype, shape, offsets, bytes)")
    p.add_argument("--tree", action="store_true", help="group tensors by dotted prefix with per-subtree counts")
    p.add_argument("--filter", action="append", metavar="GLOB", help="only tensors whose name matches (repeatable)")


def run(args: argparse.Namespace) -> int:
    result = compute_inspect(args.file, args.filter, tree=args.tree)
    emit(render_inspect(result, "json" if args.json else "text", tensors=args.tensors))
    return 0
