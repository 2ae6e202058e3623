"""``pysafetensors inspect FILE``: sizes, counts per dtype, metadata, tensor table, dotted tree.

The numbers are :func:`pysafetensors.tools.summary.summarize`'s; this module renders them.
A GGUF file's summary adds its version, alignment and typed metadata (long arrays such as a
tokenizer's vocabulary shown as their length and first items; ``--json`` has them in full),
and its tensors' dims in GGUF's order beside PyTorch's shape.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ..tools.summary import (
    ARRAY_ITEMS,
    MODELSPEC_PREFIX,
    GGUFMetadataEntry,
    GGUFSummary,
    Summary,
    gguf_value_text,
    summarize,
)
from ..tools.tree import TreeNode
from ._common import (
    disagreement_lines,
    emit,
    escape_text,
    fmt_bytes,
    fmt_count,
    fmt_int,
    plural,
    render_json,
    short_text,
    table,
    terminal_safe,
)
from ._inputs import open_input


def _render_tree(root: TreeNode, out: list[str]) -> None:
    # Iterative: names may nest deeply.
    stack: list[tuple[TreeNode, int]] = [(c, 1) for c in reversed(root.children)]
    while stack:
        node, depth = stack.pop()
        label = node.label if node.label else '""'
        if node.is_tensor:
            out.append(f"{'  ' * depth}{label}  {node.dtype} {node.shape}  {plural(node.parameters, 'param')}")
        else:
            out.append(f"{'  ' * depth}{label}/  {plural(node.parameters, 'param')}, {plural(node.tensors, 'tensor')}")
            stack.extend((c, depth + 1) for c in reversed(node.children))


def _metadata_lines(result: Summary) -> list[str]:
    out = []
    plain = {k: v for k, v in (result.metadata or {}).items() if not k.startswith(MODELSPEC_PREFIX)}
    where = " (from the index)" if result.files else ""
    if result.metadata is None:
        out.append(f"metadata:    (none){where}")
    elif not result.metadata:
        out.append(f"metadata:    (empty){where}")
    elif plain:
        out.append(f"metadata:{where}")
        out.extend(f"  {k}: {short_text(v)}" for k, v in plain.items())
    if result.modelspec:  # its own card; when it holds every key, no empty "metadata:" heading above
        out.append("modelspec:" + ("" if plain else where))
        for k, v in result.modelspec.items():
            out.append(f"  {k[len(MODELSPEC_PREFIX):]}: {short_text(v)}")
    groups = result.shard_metadata or []
    if len(groups) == 1:
        out.append(f"shard metadata (the same in all {plural(len(groups[0].files), 'shard')}):"
                   + ("  (none)" if groups[0].metadata is None else ""))
        out.extend(f"  {k}: {short_text(v)}" for k, v in (groups[0].metadata or {}).items())
    elif groups:
        out.append("shard metadata (differs between shards):")
        for g in groups:
            out.append(f"  {', '.join(g.files)}:" + ("  (none)" if g.metadata is None else ""))
            out.extend(f"    {k}: {short_text(v)}" for k, v in (g.metadata or {}).items())
    out.extend(disagreement_lines(result.metadata_disagreements))
    return out


def _count_lines(result: Summary, kind: str) -> list[str]:
    """Sizes, tensor and parameter counts and the per-``kind`` table (GGUF's ``type``,
    safetensors' ``dtype``): the lines both formats show alike."""
    count = fmt_int(result.tensor_count)
    if result.filter:
        count += f" of {fmt_int(result.total_tensor_count or 0)} (filter: {' '.join(result.filter)})"
    out = [f"file size:   {fmt_bytes(result.file_size)}",
           f"header size: {fmt_bytes(result.header_size)}",
           f"tensors:     {count}",
           f"parameters:  {fmt_count(result.parameter_count)}"]
    if result.parameters_by_dtype:
        out.append(f"by {kind}:")
        rows = [[d, fmt_int(p), fmt_int(result.bytes_by_dtype[d])] for d, p in result.parameters_by_dtype.items()]
        out.extend("  " + line for line in table(rows, [kind, "parameters", "bytes"], right=[1, 2]).splitlines())
    return out


def _render_gguf(result: GGUFSummary, meta: dict[str, GGUFMetadataEntry], tensors: bool) -> list[str]:
    out = [f"file:        {result.path}",
           f"format:      GGUF version {result.gguf_version}, alignment {result.alignment}"]
    if result.files:
        out.append(f"split set:   {len(result.files)} files ({', '.join(result.files)})")
    out.extend(_count_lines(result, "type"))
    out.append(f"metadata:    {plural(len(meta), 'key')}")
    if meta:
        # Strings are shown JSON-quoted (control characters escaped by JSON); escape_text then
        # catches what JSON leaves as it is (C1 controls, bidi overrides).
        rows = [[escape_text(k), e.type, escape_text(gguf_value_text(e))] for k, e in meta.items()]
        out.extend("  " + line for line in table(rows, ["key", "type", "value"]).splitlines())
    if tensors:
        rows = [[r.name, r.dtype, str(r.shape), str(getattr(r, "gguf_dims", "")),
                 f"[{r.data_offsets[0]}, {r.data_offsets[1]}]", fmt_int(r.nbytes)] for r in result.tensors]
        out.append("")
        out.append(table(rows, ["name", "type", "shape", "GGUF dims", "data_offsets", "bytes"], right=[5]))
    return out


def _trimmed(meta: dict[str, GGUFMetadataEntry]) -> dict[str, GGUFMetadataEntry]:
    # Text shows an array's first items only: the rest (a 128k-word vocabulary) is not looked at.
    return {k: dataclasses.replace(e, value=e.value[: ARRAY_ITEMS + 1]) if e.count is not None else e
            for k, e in meta.items()}


def render_inspect(result: Summary, fmt: str = "text", tensors: bool = False) -> str:
    if fmt == "json":
        return render_json(result)
    if isinstance(result, GGUFSummary):
        meta = _trimmed(result.gguf_metadata)
        safe = terminal_safe(dataclasses.replace(result, gguf_metadata={}))
        out = _render_gguf(safe, meta, tensors)
        if safe.tree is not None:
            out.append("")
            out.append(f"tree ({plural(safe.tree.parameters, 'param')}):")
            _render_tree(safe.tree, out)
        return "\n".join(out) + "\n"
    result = terminal_safe(result)
    out = [f"file:        {result.path}"]
    if result.files:
        out.append(f"shards:      {len(result.files)} ({', '.join(result.files)})")
    out.extend(_count_lines(result, "dtype"))
    out.extend(_metadata_lines(result))
    if tensors:
        rows = [[r.name, r.dtype, str(r.shape), f"[{r.data_offsets[0]}, {r.data_offsets[1]}]", fmt_int(r.nbytes)]
                + ([r.file or ""] if result.files else []) for r in result.tensors]
        head = ["name", "dtype", "shape", "data_offsets", "bytes"] + (["file"] if result.files else [])
        out.append("")
        out.append(table(rows, head, right=[4]))
    if result.tree is not None:
        out.append("")
        out.append(f"tree ({plural(result.tree.parameters, 'param')}):")
        _render_tree(result.tree, out)
    return "\n".join(out) + "\n"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("inspect", parents=[common_options()], help="sizes, parameter counts, metadata, tensors")
    p.add_argument("file", help="a .safetensors or .gguf file, an index JSON, a checkpoint directory, a URL or a pipe")
    p.add_argument("--tensors", action="store_true", help="list every tensor (name, dtype, shape, offsets, bytes)")
    p.add_argument("--tree", action="store_true", help="group tensors by dotted prefix with per-subtree counts")
    p.add_argument("--filter", action="append", metavar="GLOB", help="only tensors whose name matches (repeatable)")


def run(args: argparse.Namespace) -> int:
    with open_input(args.file, gguf=True) as ckpt:
        result = summarize(ckpt, args.filter, tree=args.tree)
    emit(render_inspect(result, "json" if args.json else "text", tensors=args.tensors))
    return 0
