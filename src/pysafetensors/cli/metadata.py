"""``pysafetensors metadata FILE get|set|unset|strip``: read and edit ``__metadata__``.

Writing.  The tensor entries and their offsets are kept exactly; only ``__metadata__`` changes.
* In place when the new header fits the existing header space (padded with spaces to the same
  length, so the data offset does not move) AND every byte that changes lies in one page: the
  edit is then one ``pwrite`` inside a single page followed by ``fsync``.  Linux may split a
  multi-page write when the process is killed, but a write inside one page reaches the page
  cache whole, so the file is either old or new, never torn, on any kill or crash short of a
  power cut that tears a sector (the same guarantee every in-place header editor has).
* Otherwise (header grows, or the change spans pages, or ``--output``, or ``--no-in-place``):
  a streamed rewrite into a temp file beside the target, fsync, rename (AtomicFileSink); the
  original is untouched until the rename.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidMetadata
from ..format.header import N_LEN, Header, encode_header
from ..io.registry import open_source, url_scheme
from ..io.sinks import AtomicFileSink
from ..reader import read_header
from ._common import bar_enabled, emit, progress, render_json
from ._inputs import is_sharded_path

_COPY_CHUNK = 64 << 20


@dataclass
class MetadataResult:
    path: str
    action: str  # get / set / unset / strip
    metadata: dict[str, str] | None  # after the edit (get: as read)
    before: dict[str, str] | None = None
    changed: bool = False
    mode: str | None = None  # "in-place", "rewrite", or None when nothing was written
    output: str | None = None
    dry_run: bool = False
    key: str | None = None  # get KEY
    value: str | None = None


class KeyNotFound(Exception):
    """``get KEY`` for a key the file does not have (exit 1)."""


def parse_assignments(pairs: list[str], option: str | None = None) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}`` (the value may contain ``=``; the key may not be empty)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidMetadata(f"{option + ' ' if option else ''}expected KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def load_json_metadata(path: str) -> dict[str, str]:
    """A JSON object of string values; anything else is refused with a clear message."""
    with open(path, "rb") as f:
        try:
            obj = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InvalidMetadata(f"{path}: not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise InvalidMetadata(f"{path}: expected a JSON object of string values, found {type(obj).__name__}")
    bad = [k for k, v in obj.items() if not isinstance(v, str)]
    if bad:
        k = bad[0]
        raise InvalidMetadata(
            f"{path}: safetensors metadata values must be strings; {k!r} is {json.dumps(obj[k])} "
            f"({type(obj[k]).__name__}) - write it as a JSON string, e.g. \"{k}\": {json.dumps(json.dumps(obj[k]))}"
            + (f" ({len(bad)} non-string values in all)" if len(bad) > 1 else ""),
            key=k,
        )
    return obj


def _new_header_bytes(header: Header, metadata: dict[str, str] | None) -> bytes:
    entries = [(t.name, t.dtype.code, list(t.shape), t.begin, t.end) for t in header.tensors]
    return encode_header(entries, metadata)


def _fits_in_place(old: bytes, new: bytes) -> bool:
    if len(new) > len(old):
        return False
    padded = new + b" " * (len(old) - len(new))
    diff = [i for i in range(len(old)) if old[i] != padded[i]]
    if not diff:
        return True
    first, last = N_LEN + diff[0], N_LEN + diff[-1]
    return first // mmap.PAGESIZE == last // mmap.PAGESIZE


def _write_in_place(path: str, old: bytes, new: bytes) -> None:
    padded = new + b" " * (len(old) - len(new))
    diff = [i for i in range(len(old)) if old[i] != padded[i]]
    if not diff:
        return
    lo, hi = diff[0], diff[-1] + 1
    fd = os.open(path, os.O_RDWR)
    try:
        # Re-check under our descriptor that the header is still what we parsed.
        current = os.pread(fd, N_LEN + len(old), 0)
        if current != len(old).to_bytes(N_LEN, "little") + old:
            raise OSError(f"{path} changed while being edited; nothing written")
        if os.pwrite(fd, padded[lo:hi], N_LEN + lo) != hi - lo:
            raise OSError(f"{path}: short write editing the header")
        os.fsync(fd)
    finally:
        os.close(fd)


def _rewrite(src: str, dst: str, new: bytes, data_start: int, data_size: int, show_progress: bool) -> None:
    source = open_source(src, "pread")
    try:
        with AtomicFileSink(dst, durable=True) as sink, progress(data_size, "rewriting", show_progress) as bar:
            sink.reserve(N_LEN + len(new) + data_size)
            sink.write([len(new).to_bytes(N_LEN, "little"), new])
            buf = memoryview(bytearray(min(_COPY_CHUNK, max(data_size, 1))))
            for off in range(0, data_size, _COPY_CHUNK):
                n = min(_COPY_CHUNK, data_size - off)
                source.read_into(data_start + off, buf[:n])
                sink.write([buf[:n]])
                bar.update(n)
    finally:
        source.close()


def compute_metadata(
    path: str,
    action: str,
    assignments: dict[str, str] | None = None,
    keys: list[str] | None = None,
    output: str | None = None,
    dry_run: bool = False,
    in_place: bool = True,
    show_progress: bool = False,
) -> MetadataResult:
    """Read or edit the metadata of ``path``; writes nothing when nothing changes or ``dry_run``."""
    if is_sharded_path(path):
        raise InvalidMetadata(f"{path}: metadata works on one .safetensors file; edit a sharded checkpoint shard by shard")
    source = open_source(path, "pread")  # a local file or a URL (get, or set with --output)
    try:
        header = read_header(source)
        old_bytes = bytearray(header.header_size)
        source.read_into(N_LEN, memoryview(old_bytes))
    finally:
        source.close()
    before = header.metadata
    if action == "get":
        key = keys[0] if keys else None
        if key is not None and key not in (before or {}):
            raise KeyNotFound(f"{path}: no metadata key {key!r}")
        return MetadataResult(path, "get", before, key=key, value=(before or {}).get(key) if key else None)
    if action == "set":
        after: dict[str, str] | None = {**(before or {}), **(assignments or {})}
    elif action == "unset":
        after = {k: v for k, v in (before or {}).items() if k not in set(keys or [])}
        missing = [k for k in keys or [] if k not in (before or {})]
        if missing:
            raise KeyNotFound(f"{path}: no metadata key {missing[0]!r}")
    elif action == "strip":
        after = None
    else:
        raise ValueError(f"unknown metadata action {action!r}")
    if output is None and url_scheme(path) is not None:
        raise InvalidMetadata(f"{path}: a URL cannot be edited in place; write the result with --output FILE")
    r = MetadataResult(path, action, after, before=before, dry_run=dry_run, output=output)
    r.changed = after != before or output is not None
    if not r.changed:
        return r
    new = _new_header_bytes(header, after)
    target = output or path
    use_in_place = in_place and output is None and _fits_in_place(bytes(old_bytes), new)
    r.mode = "in-place" if use_in_place else "rewrite"
    if dry_run:
        return r
    if use_in_place:
        _write_in_place(path, bytes(old_bytes), new)
    else:
        _rewrite(path, target, new, header.data_start, header.data_size, show_progress)
    return r


def render_metadata(r: MetadataResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    if r.action == "get":
        if r.key is not None:
            return (r.value or "") + "\n"
        if r.metadata is None:
            return "(no metadata)\n"
        return "".join(f"{k}: {v}\n" for k, v in r.metadata.items()) or "(empty metadata)\n"
    if not r.changed:
        return f"{r.path}: metadata unchanged, nothing written\n"
    verb = "would write" if r.dry_run else "wrote"
    where = r.output or r.path
    lines = [f"{verb} {where} ({r.mode})"]
    before, after = r.before or {}, r.metadata or {}
    lines += [f"+ {k}: {after[k]}" for k in after if k not in before]
    lines += [f"~ {k}: {before[k]} -> {after[k]}" for k in after if k in before and before[k] != after[k]]
    lines += [f"- {k}" for k in before if k not in after]
    return "\n".join(lines) + "\n"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    common = common_options()
    p = subparsers.add_parser("metadata", parents=[common], help="get, set, unset or strip __metadata__")
    p.add_argument("file")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(p))
    g = actions.add_parser("get", parents=[common], help="print all metadata, or one key's value")
    g.add_argument("key", nargs="?")
    writers = argparse.ArgumentParser(add_help=False)
    writers.add_argument("--dry-run", action="store_true", help="show what would change, write nothing")
    writers.add_argument("-o", "--output", help="write the result to this path instead of editing FILE")
    writers.add_argument("--no-in-place", action="store_true", help="always rewrite via temp file + rename")
    s = actions.add_parser("set", parents=[common, writers], help="set KEY=VALUE pairs (values are strings)")
    s.add_argument("pairs", nargs="*", metavar="KEY=VALUE")
    s.add_argument("--from-json", metavar="F", help="a JSON object of string values to merge in")
    u = actions.add_parser("unset", parents=[common, writers], help="remove keys")
    u.add_argument("keys", nargs="+", metavar="KEY")
    actions.add_parser("strip", parents=[common, writers], help="remove __metadata__ entirely")


def run(args: argparse.Namespace) -> int:
    assignments: dict[str, str] = {}
    keys: list[str] | None = None
    if args.action == "set":
        if args.from_json:
            assignments.update(load_json_metadata(args.from_json))
        assignments.update(parse_assignments(args.pairs))
        if not assignments:
            from .main import UsageError

            raise UsageError("pysafetensors metadata set: error: give KEY=VALUE pairs or --from-json F (see --help)")
    elif args.action == "get":
        keys = [args.key] if args.key else None
    elif args.action == "unset":
        keys = args.keys
    try:
        r = compute_metadata(
            args.file, args.action, assignments, keys,
            output=getattr(args, "output", None), dry_run=getattr(args, "dry_run", False),
            in_place=not getattr(args, "no_in_place", False), show_progress=bar_enabled(args),
        )
    except KeyNotFound as e:
        import sys

        print(f"pysafetensors: {e}", file=sys.stderr)
        return 1
    emit(render_metadata(r, "json" if args.json else "text"))
    return 0
