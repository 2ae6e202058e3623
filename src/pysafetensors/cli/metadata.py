"""``pysafetensors metadata FILE get|set|unset|strip``: read and edit ``__metadata__``.

Reading and editing are :mod:`pysafetensors.tools.metadata`'s (its docstring gives where and
how an edit writes: in place or rewrite, read-only targets, symbolic and hard links); this
module parses arguments and renders.  Exit codes: 0 ok, 1 ``get KEY`` of a missing key,
2 an error (``unset`` of a missing key included).
"""

from __future__ import annotations

import argparse

from ..errors import MetadataKeyNotFound
from ..tools.metadata import MetadataResult, edit_metadata, load_json_metadata, parse_assignments, read_metadata
from ._common import disagreement_lines, emit, progress_factory, render_json, terminal_safe
from ._inputs import open_input

__all__ = ["add_arguments", "load_json_metadata", "parse_assignments", "render_metadata", "run"]


def render_metadata(r: MetadataResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    r = terminal_safe(r)
    if r.action == "get":
        if r.key is not None:
            return (r.value or "") + "\n"
        if r.metadata is None:
            text = "(no metadata)\n"
        else:
            text = "".join(f"{k}: {v}\n" for k, v in r.metadata.items()) or "(empty metadata)\n"
        return text + "".join(line + "\n" for line in disagreement_lines(r.metadata_disagreements))
    if not r.changed:
        return f"{r.path}: metadata unchanged, nothing written\n"
    verb = "would write" if r.dry_run else "wrote"
    where = r.output or r.path
    if r.target and r.target != where:
        where = f"{r.target} (through {where})"
    lines = [f"{verb} {where} ({r.mode})"]
    before, after = r.before or {}, r.metadata or {}
    lines += [f"+ {k}: {after[k]}" for k in after if k not in before]
    lines += [f"~ {k}: {before[k]} -> {after[k]}" for k in after if k in before and before[k] != after[k]]
    lines += [f"- {k}" for k in before if k not in after]
    return "\n".join(lines) + "\n"


EXAMPLES = """\
examples:
  pysafetensors metadata model.safetensors get
  pysafetensors metadata model.safetensors set format=pt license=mit
  pysafetensors metadata model.safetensors strip --output clean.safetensors
"""
GET_EXAMPLES = """\
examples:
  pysafetensors metadata model.safetensors get
  pysafetensors metadata model.safetensors get modelspec.title --json
"""
SET_EXAMPLES = """\
examples:
  pysafetensors metadata model.safetensors set format=pt
  pysafetensors metadata model.safetensors set --from-json card.json --dry-run
  pysafetensors metadata https://host/m.safetensors set license=mit --output m.safetensors
"""
UNSET_EXAMPLES = """\
examples:
  pysafetensors metadata model.safetensors unset ss_tag_frequency
  pysafetensors metadata model.safetensors unset a b --output edited.safetensors
"""
STRIP_EXAMPLES = """\
examples:
  pysafetensors metadata model.safetensors strip
  pysafetensors metadata model.safetensors strip --output s3://bucket/clean.safetensors --dry-run
"""


DESCRIPTION = ("Read or edit the string-to-string __metadata__ of a checkpoint.  Edits rewrite only the header "
               "when it fits (in place), else the whole file via a temporary file and a rename.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ._options import command_parser

    p.add_argument("file", help="a .safetensors file, an index JSON, a checkpoint directory, a URL or a pipe "
                                "(URLs and pipes: get, or an edit with --output)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(p))
    g = command_parser(actions, "get", help="print all metadata, or one key's value",
                       description="Print all metadata, or one key's value (exit 1 when the key is absent).",
                       epilog=GET_EXAMPLES)
    g.add_argument("key", nargs="?", help="the key to print (default: every key)")
    writers = argparse.ArgumentParser(add_help=False)
    writers.add_argument("--dry-run", action="store_true", help="show what would change, write nothing")
    writers.add_argument("--output", help="write the result to this path (or store URL, s3://...) instead of editing FILE")
    writers.add_argument("--no-in-place", action="store_true", help="always rewrite via temp file + rename")
    writers.add_argument("--force", action="store_true", help="replace a read-only FILE with an edited copy")
    links = writers.add_mutually_exclusive_group()
    links.add_argument("--follow", dest="links", action="store_const", const="follow",
                       help="FILE is a link: edit the file it points to (every link sees the change)")
    links.add_argument("--no-follow", dest="links", action="store_const", const="replace",
                       help="FILE is a link: replace the link with an edited copy (the linked file is untouched)")
    s = command_parser(actions, "set", help="set KEY=VALUE pairs (values are strings)", parents=[writers],
                       description="Set KEY=VALUE pairs (values are strings), given on the command line or "
                                   "as a JSON object with --from-json.",
                       epilog=SET_EXAMPLES)
    s.add_argument("pairs", nargs="*", metavar="KEY=VALUE", help="an entry to set (repeatable)")
    s.add_argument("--from-json", metavar="F", help="a JSON object of string values to merge in")
    u = command_parser(actions, "unset", help="remove keys", parents=[writers],
                       description="Remove keys from __metadata__ (a missing key is an error, exit 2).",
                       epilog=UNSET_EXAMPLES)
    u.add_argument("keys", nargs="+", metavar="KEY", help="a key to remove")
    command_parser(actions, "strip", help="remove __metadata__ entirely", parents=[writers],
                   description="Remove __metadata__ entirely.", epilog=STRIP_EXAMPLES)


def run(args: argparse.Namespace) -> int:
    if args.action == "get":
        try:
            with open_input(args.file, args.remote) as ckpt:
                r = read_metadata(ckpt, args.key)
        except MetadataKeyNotFound as e:
            from ._options import report_error

            return report_error(e, args.debug, finding=True, secrets=args.remote.secrets())
        emit(render_metadata(r, "json" if args.json else "text"))
        return 0
    assignments: dict[str, str] = {}
    keys: list[str] | None = None
    if args.action == "set":
        if args.from_json:
            assignments.update(load_json_metadata(args.from_json))
        assignments.update(parse_assignments(args.pairs))
        if not assignments:
            from ._options import UsageError

            raise UsageError("pysafetensors metadata set: error: give KEY=VALUE pairs or --from-json F (see --help)")
    elif args.action == "unset":
        keys = args.keys
    r = edit_metadata(
        args.file, args.action, assignments, keys,
        output=args.output, dry_run=args.dry_run, in_place=not args.no_in_place, force=args.force,
        links=args.links, progress=progress_factory(args), storage_options=args.remote.for_path(args.file) or None,
        output_storage_options=(args.remote.for_path(args.output) or None) if args.output else None,
    )
    emit(render_metadata(r, "json" if args.json else "text"))
    return 0
