"""``pysafetensors inspect FILE``: sizes, counts per dtype, metadata, tensor table, dotted tree.

The numbers are :func:`pysafetensors.tools.summary.summarize`'s; this module renders them.
A GGUF file's summary adds its version, alignment and typed metadata (long arrays such as a
tokenizer's vocabulary shown as their length and first items; ``--json`` has them in full),
and its tensors' dims in GGUF's order beside PyTorch's shape.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
from collections.abc import Iterator

from ..tools.blocks import RepeatedBlock
from ..tools.summary import (
    ARRAY_ITEMS,
    MODELSPEC_PREFIX,
    GGUFMetadataEntry,
    GGUFSummary,
    GGUFTensorRow,
    Summary,
    TensorRow,
    gguf_value_text,
    summarize,
)
from ..tools.tree import natural_key, within_depth
from ._common import (
    disagreement_lines,
    emit,
    escape_text,
    escape_texts,
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
from ._options import INPUT_HELP


def _share(part: int, whole: int) -> str:
    """``46.9%`` of ``whole``; ``<0.1%`` for a sliver, never a misleading ``0.0%``."""
    if not whole:
        return "-"
    pct = 100 * part / whole
    return "<0.1%" if 0 < pct < 0.05 else f"{pct:.1f}%"


def _block_text(b: RepeatedBlock, total: int) -> str:
    copies = f"{fmt_int(b.copies)} copies, " if b.copies != b.count else ""
    return (f"{plural(b.tensors, 'tensor')} and {plural(b.parameters, 'param')} each; "
            f"{copies}{plural(b.total_parameters, 'param')} in all ({_share(b.total_parameters, total)})")


def _block_lines(result: Summary) -> list[str]:
    """The ``repeated blocks:`` section: each block (tools.blocks), and the numbered groups left
    out of it because they differ."""
    blocks = result.repeated_blocks or []
    if not blocks:
        return []
    out = ["repeated blocks:"]
    for b in blocks:
        out.append(f"  {b.label}: {_block_text(b, result.parameter_count)}")
        out.extend(f"    {d.path} is not in it: {d.reason}" for d in b.differing)
    return out


#: a node as _render_tree keeps it: (node, its position, depth, the length of "its path.", the
#: label to show it by, the block it stands for)
_Entry = tuple[int, int, int, int, str, "RepeatedBlock | None"]


def _render_tree(result: Summary, out: list[str], depth: int | None = None) -> None:
    """``result``'s tree (drawn from the groups its blocks were found in), one line per node,
    indented; ``depth``: no deeper than that many levels.  Lines are not escaped here.

    A block of ``result.repeated_blocks`` is shown once: its first member stands for all, as
    ``[0–5] × 6/`` (or, when the group holds nothing else, the group's own line as
    ``layer.[0–5] × 6/``); the other members are left out, and a numbered group not in the block
    says why.  Nodes are visited only where shown: the members left out are never walked.
    Siblings are shown in natural order: sorted here, the ones shown only, when the groups list
    them in the names' order (:func:`~pysafetensors.tools.tree.name_order_groups`).
    """
    if result._groups is None:
        return
    g, columns = result._groups
    nodes, end, labels = g.nodes, g.end, g.label
    names, dtypes, shapes, params = columns.name, columns.dtype, columns.shape, columns.parameters
    blocks = result.repeated_blocks or []
    by_group: dict[int, list[RepeatedBlock]] = {}
    for b in blocks:
        by_group.setdefault(b._group, []).append(b)
    firsts: dict[int, RepeatedBlock] = {}  # a block's first member -> the block
    others: set[int] = set()  # the other members: not shown
    differs: dict[int, tuple[RepeatedBlock, str]] = {}
    for b in blocks:
        firsts[b._members[0]] = b
        others.update(b._members[1:])
        differs.update((k, (b, d.reason)) for k, d in zip(b._differing_groups, b.differing))
    total = g.parameters[0]

    def children(k: int, at: int) -> Iterator[tuple[int, int]]:
        """Group ``k``'s children (marked at position ``at`` in nodes; the root at -1), with
        where each is: a group's subtree is jumped over."""
        pos, stop = at + 1, end[k]
        while pos < stop:
            n = nodes[pos]
            yield n, pos
            pos = end[-1 - n] if n < 0 else pos + 1

    def entry(n: int, at: int, level: int, cut: int) -> _Entry:
        """A stack entry for node ``n`` at ``at`` below a group whose path is ``cut`` - 1 long."""
        if n >= 0:
            return n, at, level, cut, names[n][cut:], None
        return n, at, level, cut + len(labels[-1 - n]) + 1, labels[-1 - n], firsts.get(-1 - n)

    def in_order(kids: list[_Entry]) -> list[_Entry]:
        """``kids`` in natural order of their labels, a tensor before a group of the same label
        (its name is a prefix of the group's names), as prefix_groups lists them."""
        if g.natural or len(kids) < 2:
            return kids
        return sorted(kids, key=lambda e: (natural_key(e[4]), e[0] < 0))

    # Iterative: names may nest deeply.  (node, its position, depth, the length of "its path.",
    # the label to show it by, the block it stands for)
    stack = in_order([entry(n, at, 1, 0) for n, at in children(0, -1)])
    stack.reverse()
    while stack:
        n, at, level, cut, label, block = stack.pop()
        label = label or '""'
        pad = "  " * level
        if n >= 0:
            out.append(f"{pad}{label}  {dtypes[n]} {list(shapes[n])}  {plural(params[n], 'param')}")
            continue
        k = -1 - n
        here = by_group.get(k, [])
        whole = here[0] if len(here) == 1 and here[0].whole_group else None
        if whole is not None:  # the group is its block: shown as it, the first member's children below
            out.append(f"{pad}{label}.{_ranges(whole)}/  {_block_text(whole, total)}")
            first = whole._members[0]
            n, at = next((c, pos) for c, pos in children(k, at) if c == -1 - first)
            k, cut = first, cut + len(labels[first]) + 1
        elif block is not None:
            out.append(f"{pad}{_ranges(block)}/  {_block_text(block, total)}")
        else:
            line = f"{pad}{label}/  {plural(g.parameters[k], 'param')}, {plural(g.tensors[k], 'tensor')}"
            if k in differs:
                other, reason = differs[k]
                line += f"  (not in {_ranges(other)}: {reason})"
            out.append(line)
        if depth is not None and level >= depth:
            continue
        kids = in_order([entry(c, pos, level + 1, cut) for c, pos in children(k, at) if -1 - c not in others])
        kids.reverse()
        stack.extend(kids)


def _ranges(b: RepeatedBlock) -> str:
    """``[0–5] × 6``: the block's label after its group's path."""
    return b.label[b.label.rindex("["):]


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


def _render_gguf(result: GGUFSummary, all_rows: list[TensorRow], meta: dict[str, GGUFMetadataEntry],
                 tensors: bool) -> list[str]:
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
        rows = [[name, dtype, str(r.shape), str(r.gguf_dims) if isinstance(r, GGUFTensorRow) else "",
                 f"[{r.data_offsets[0]}, {r.data_offsets[1]}]", fmt_int(r.nbytes)]
                for r, name, dtype in _escaped_rows(all_rows)]
        out.append("")
        out.append(table(rows, ["name", "type", "shape", "GGUF dims", "data_offsets", "bytes"], right=[5]))
    return out


def _escaped_rows(rows: list[TensorRow]) -> Iterator[tuple[TensorRow, str, str]]:
    """Each row with its name and dtype escaped for the terminal (the row itself as it is)."""
    return zip(rows, escape_texts(r.name for r in rows), escape_texts(r.dtype for r in rows))


def _trimmed(meta: dict[str, GGUFMetadataEntry]) -> dict[str, GGUFMetadataEntry]:
    # Text shows an array's first items only: the rest (a 128k-word vocabulary) is not looked at.
    return {k: dataclasses.replace(e, value=e.value[: ARRAY_ITEMS + 1]) if e.count is not None else e
            for k, e in meta.items()}


def render_inspect(result: Summary, fmt: str = "text", tensors: bool = False, depth: int | None = None,
                   tree: bool = False) -> str:
    """``inspect``'s output for ``result``; ``depth``: the tree no deeper than that many levels
    (text: as shown, a folded block being one level; JSON: levels of the tree).  The text shows
    the tree when ``result`` has one, or with ``tree`` (drawn from the summary's groups: a
    summary made with ``tree=False`` has them too)."""
    if fmt == "json":
        if depth is not None and result.tree is not None:
            result = dataclasses.replace(result, tree=within_depth(result.tree, depth))
        return render_json(result)
    gguf = result.gguf_part()
    if gguf is not None:
        meta = _trimmed(gguf.gguf_metadata)
        # Escaped here: everything but the rows, the tree and the metadata, each escaped as it
        # is printed (the rows and tree only when they are, and a column or line at a time).
        safe = terminal_safe(dataclasses.replace(gguf, gguf_metadata={}, tensors=[], tree=None))
        out = _render_gguf(safe, gguf.tensors, meta, tensors)
        _tree_lines(gguf, out, depth, tree)
        return "\n".join(out) + "\n"
    safe = terminal_safe(dataclasses.replace(result, tensors=[], tree=None))
    out = [f"file:        {safe.path}"]
    if safe.files:
        out.append(f"shards:      {len(safe.files)} ({', '.join(safe.files)})")
    out.extend(_count_lines(safe, "dtype"))
    out.extend(_block_lines(safe))
    out.extend(_metadata_lines(safe))
    if tensors:
        files = escape_texts(r.file or "" for r in result.tensors) if result.files else None
        rows = [[name, dtype, str(r.shape), f"[{r.data_offsets[0]}, {r.data_offsets[1]}]", fmt_int(r.nbytes)]
                for r, name, dtype in _escaped_rows(result.tensors)]
        if files is not None:
            for row, file in zip(rows, files):
                row.append(file)
        head = ["name", "dtype", "shape", "data_offsets", "bytes"] + (["file"] if result.files else [])
        out.append("")
        out.append(table(rows, head, right=[4]))
    _tree_lines(result, out, depth, tree)
    return "\n".join(out) + "\n"


def _tree_lines(result: Summary, out: list[str], depth: int | None, tree: bool) -> None:
    """The ``tree`` section of ``result`` (not escaped: its lines are escaped here, once made)."""
    if (result.tree is None and not tree) or result._groups is None:
        return
    out.append("")
    limit = f", {plural(depth, 'level')}" if depth is not None else ""
    out.append(f"tree ({plural(result._groups[0].parameters[0], 'param')}{limit}):")
    lines: list[str] = []
    _render_tree(result, lines, depth)
    out.extend(escape_texts(lines))


def _depth(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of levels (1 or more), got {text!r}")
    return value


EXAMPLES = """\
examples:
  pysafetensors inspect model.safetensors
  pysafetensors inspect model.safetensors --tree --depth 2
  pysafetensors inspect https://huggingface.co/ORG/MODEL/resolve/main/model.safetensors --tensors --json
"""


DESCRIPTION = ("Summarise a checkpoint from its header alone: file and header size, tensor count, parameters "
               "per dtype, metadata, repeated blocks; with --tensors or --tree, the tensors themselves.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help=INPUT_HELP)
    p.add_argument("--tensors", action="store_true", help="list every tensor (name, dtype, shape, offsets, bytes)")
    p.add_argument("--tree", action="store_true",
                   help="group tensors by dotted prefix with per-subtree counts; a repeated block shown once")
    p.add_argument("--depth", type=_depth, metavar="N",
                   help="with --tree (implied): show N levels of the tree, the groups below counted, not listed")
    p.add_argument("--filter", action="append", metavar="GLOB", help="only tensors whose name matches (repeatable)")


def run(args: argparse.Namespace) -> int:
    # A large header leaves a few hundred thousand young, acyclic objects (entries, columns,
    # groups) for the whole command: a collection would walk them all to free nothing, so the
    # collector stays off until the command is done (the library pauses it only call by call).
    enabled = gc.isenabled()
    gc.disable()
    try:
        tree = args.tree or args.depth is not None
        with open_input(args.file, args.remote, gguf=True) as ckpt:
            # The rows only where they are printed (--tensors, or --json, which has them all), and
            # the tree's node objects only for --json: the text draws it from the summary's groups.
            result = summarize(ckpt, args.filter, tree=tree and args.json, rows=args.tensors or args.json)
        fmt = "json" if args.json else "text"
        emit(render_inspect(result, fmt, tensors=args.tensors, depth=args.depth, tree=tree))
        return 0
    finally:
        if enabled:
            gc.enable()
