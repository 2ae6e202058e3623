"""Read and edit ``__metadata__``: the ``metadata`` command's library functions.

Reading (:func:`read_metadata`) follows the checkpoint's metadata rule: a sharded checkpoint's
metadata is its index's, with the shard headers' own and any disagreement reported beside it.

Writing (:func:`edit_metadata`) changes only ``__metadata__``; tensor entries and offsets stay.

* In place when the new header fits the existing header space (padded with spaces to the same
  length, so the data offset does not move) AND every byte that changes lies in one page: one
  ``pwrite`` inside a single page followed by ``fsync``.  A write inside one page reaches the
  page cache whole, so the file is old or new, never torn, on any kill or crash short of a
  power cut that tears a sector.
* Otherwise (header grows, the change spans pages, ``output``, ``in_place=False``): a streamed
  rewrite into a temp file beside the target, fsync, rename; the original is untouched until
  the rename, and the new file keeps the old one's permission bits.

Which file is written (one rule for both ways of writing, decided before anything is written):

* A read-only target (no write permission bit, or not writable by this user) is refused
  unless ``force``; forced, it is rewritten (replaced by rename, keeping its read-only mode),
  never opened for writing.
* A symbolic link (a Hugging Face cache entry links to a shared blob) is refused unless
  ``links`` says how: ``"follow"`` edits the file the link points to, as if it had been named
  (every link to it sees the change); ``"replace"`` writes the edited copy as a regular file in
  the link's place, leaving the linked file untouched.
* A file with several hard links is treated the same way: ``"follow"`` edits the shared file,
  in place only (a rewrite would detach this name from the others, so it is refused);
  ``"replace"`` gives this name its own edited copy.
* A pipe (``/dev/stdin``, a FIFO) or other stream has no file to edit: refused without ``output``.
* ``output`` is always a rewrite to that path (an existing read-only ``output`` needs ``force``),
  or to a store URL (``s3://...``, ``output_storage_options`` for its filesystem): streamed
  there and published only when complete (``io.targets.open_sink``).
"""

from __future__ import annotations

import json
import mmap
import os
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidMetadata, MetadataKeyNotFound, ProtectedTarget
from ..format.header import N_LEN, Header, encode_header
from ..format.json_compat import KeyedObject
from ..io.redact import redact_url
from ..io.registry import url_scheme
from ..io.regular import is_stream, open_regular
from ..io.targets import open_sink
from ._base import JsonResult, Progress, no_progress
from .checkpoint import Checkpoint, MetadataDisagreement, ShardMetadata, is_sharded_path, open_checkpoint

_COPY_CHUNK = 64 << 20

Links = Literal["follow", "replace"]


@dataclass
class MetadataResult(JsonResult):
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
    target: str | None = None  # the file written (a link's target with links="follow")
    shard_metadata: list[ShardMetadata] | None = None  # get on a sharded checkpoint
    metadata_disagreements: list[MetadataDisagreement] | None = None


def parse_assignments(pairs: list[str], option: str | None = None) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}`` (the value may contain ``=``; the key may not be empty
    or given twice)."""
    out: dict[str, str] = {}
    where = f"{option} " if option else ""
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidMetadata(f"{where}expected KEY=VALUE, got {pair!r}")
        if key in out:
            raise InvalidMetadata(f"{where}key {key!r} is given twice ({out[key]!r} and {value!r})", key=key)
        out[key] = value
    return out


def load_json_metadata(path: str) -> dict[str, str]:
    """A JSON object of string values, each key once; anything else is refused with a clear message."""

    with open(path, "rb") as f:
        raw = f.read()
    try:
        obj = json.loads(raw.decode("utf-8"), object_pairs_hook=KeyedObject.of)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise InvalidMetadata(f"{path}: not valid JSON: {e}") from None
    if isinstance(obj, KeyedObject) and obj.duplicate is not None:
        k, first, second = obj.duplicate
        raise InvalidMetadata(
            f"{path}: key {k!r} appears twice ({json.dumps(first)} and {json.dumps(second)}); "
            "JSON readers disagree on which one wins, so give it once",
            key=k,
        )
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


def read_metadata(ckpt: Checkpoint | str, key: str | None = None, storage_options: Any = None) -> MetadataResult:
    """The checkpoint's metadata (or one key's value: MetadataKeyNotFound when absent)."""
    if isinstance(ckpt, (str, os.PathLike)):
        with open_checkpoint(ckpt, storage_options) as opened:
            return read_metadata(opened, key)
    meta = ckpt.metadata
    if key is not None and key not in (meta or {}):
        raise MetadataKeyNotFound(f"{ckpt.path}: no metadata key {key!r}", key=key)
    return MetadataResult(
        ckpt.path, "get", meta, key=key, value=(meta or {}).get(key) if key is not None else None,
        shard_metadata=ckpt.shard_metadata(), metadata_disagreements=ckpt.metadata_disagreements(),
    )


# --- where to write ---------------------------------------------------------------------


@dataclass
class _Target:
    path: str  # the file to write
    in_place: Literal["allowed", "never", "required"]


def _read_only(path: str, st: os.stat_result) -> bool:
    return not (st.st_mode & 0o222) or not os.access(path, os.W_OK)


def _resolve_target(path: str, output: str | None, force: bool, links: Links | None) -> _Target:
    if output is not None:
        if os.path.isfile(output) and _read_only(output, os.stat(output)) and not force:
            raise ProtectedTarget(f"{output} is read-only; pass --force to replace it", path=output)
        return _Target(output, "never")
    target = path
    if os.path.islink(path):
        real = os.path.realpath(path)
        if links is None:
            raise ProtectedTarget(
                f"{path} is a symbolic link to {real} (a Hugging Face cache entry links to a shared blob); "
                f"pass --no-follow to replace the link with an edited copy ({real} untouched), or --follow to "
                f"edit {real} itself (every link to it sees the change)",
                path=path,
            )
        if links == "replace":
            return _Target(path, "never")  # the rename replaces the link, not what it points to
        target = real
    st = os.stat(target)
    hard_linked = st.st_nlink > 1
    if hard_linked and links is None:
        raise ProtectedTarget(
            f"{target} has {st.st_nlink} hard links; pass --no-follow to give this name its own edited copy, "
            "or --follow to edit the shared file in place (every name sees the change)",
            path=target,
        )
    if hard_linked and links == "replace":
        return _Target(target, "never")
    if _read_only(target, st):
        if not force:
            raise ProtectedTarget(
                f"{target} is read-only; pass --force to replace it with an edited copy (it stays read-only)",
                path=target,
            )
        if hard_linked:
            raise ProtectedTarget(
                f"{target} is read-only and has {st.st_nlink} hard links: replacing it would detach this name "
                "from the others; pass --no-follow to do that",
                path=target,
            )
        return _Target(target, "never")
    return _Target(target, "required" if hard_linked else "allowed")


# --- writing ------------------------------------------------------------------------------


def _new_header_bytes(header: Header, metadata: dict[str, str] | None) -> bytes:
    entries = [(t.name, t.dtype.code, list(t.shape), t.begin, t.end) for t in header.tensors]
    return encode_header(entries, metadata)


def _changed_span(old: bytes, new: bytes) -> tuple[int, int] | None:
    """First and last+1 index where ``new`` (space padded) differs from ``old``; None if equal."""
    import numpy as np

    padded = new + b" " * (len(old) - len(new))
    diff = np.flatnonzero(np.frombuffer(old, np.uint8) != np.frombuffer(padded, np.uint8))
    return (int(diff[0]), int(diff[-1]) + 1) if diff.size else None


def _fits_in_place(old: bytes, new: bytes) -> bool:
    if len(new) > len(old):
        return False
    span = _changed_span(old, new)
    if span is None:
        return True
    return (N_LEN + span[0]) // mmap.PAGESIZE == (N_LEN + span[1] - 1) // mmap.PAGESIZE


def _write_in_place(path: str, old: bytes, new: bytes) -> None:
    span = _changed_span(old, new)
    if span is None:
        return
    lo, hi = span
    padded = new + b" " * (len(old) - len(new))
    fd = open_regular(path, write=True)
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


def _rewrite(
    source: Any, dst: str, new: bytes, data_start: int, data_size: int, progress: Progress, storage_options: Any = None
) -> None:
    with open_sink(dst, durable=True, storage_options=storage_options) as sink, progress(data_size, "rewriting") as bar:
        sink.reserve(N_LEN + len(new) + data_size)
        sink.write([len(new).to_bytes(N_LEN, "little"), new])
        buf = memoryview(bytearray(min(_COPY_CHUNK, max(data_size, 1))))
        for off in range(0, data_size, _COPY_CHUNK):
            n = min(_COPY_CHUNK, data_size - off)
            source.read_into(data_start + off, buf[:n])
            sink.write([buf[:n]])
            bar.update(n)


def edit_metadata(
    path: str,
    action: Literal["set", "unset", "strip"],
    assignments: dict[str, str] | None = None,
    keys: list[str] | None = None,
    *,
    output: str | None = None,
    dry_run: bool = False,
    in_place: bool = True,
    force: bool = False,
    links: Links | None = None,
    progress: Progress = no_progress,
    storage_options: Any = None,
    output_storage_options: Any = None,
) -> MetadataResult:
    """Edit the metadata of one file (see the module docstring for where and how it writes).

    Writes nothing when nothing changes or with ``dry_run``.  ``unset`` of a key the file lacks
    raises MetadataKeyNotFound before anything is written.
    """
    path = os.fspath(path)
    shown = redact_url(path)
    if action not in ("set", "unset", "strip"):
        raise ValueError(f"unknown metadata action {action!r}")
    sharded = (f"{shown}: metadata edits work on one .safetensors file; edit a sharded checkpoint "
               "shard by shard (and its index's \"metadata\" by hand)")
    if is_sharded_path(path):
        raise InvalidMetadata(sharded)
    if output is None and url_scheme(path) is not None:
        raise InvalidMetadata(f"{shown}: a URL cannot be edited in place; write the result with --output FILE or URL")
    if output is None and is_stream(path):  # /dev/stdin is a link to the pipe: say so, not "a symbolic link"
        raise InvalidMetadata(f"{shown} is a pipe (or another stream), not a file: it cannot be edited in place; "
                              "write the result with --output FILE or URL")
    with open_checkpoint(path, storage_options) as ckpt:
        if ckpt.sharded:  # a URL prefix holding an index (is_sharded_path cannot tell without listing it)
            raise InvalidMetadata(sharded)
        f = ckpt.files[0]
        header = f.header
        old = bytearray(header.header_size)
        f.source.read_into(N_LEN, memoryview(old))
        before = header.metadata
        if action == "set":
            after: dict[str, str] | None = {**(before or {}), **(assignments or {})}
        elif action == "unset":
            missing = [k for k in keys or [] if k not in (before or {})]
            if missing:
                raise MetadataKeyNotFound(f"{shown}: no metadata key {missing[0]!r} to unset", key=missing[0])
            after = {k: v for k, v in (before or {}).items() if k not in set(keys or [])}
        else:
            after = None
        r = MetadataResult(
            shown, action, after, before=before, dry_run=dry_run, output=redact_url(output) if output else output
        )
        r.changed = after != before or output is not None
        if not r.changed:
            return r
        target = _resolve_target(path, output, force, links)
        new = _new_header_bytes(header, after)
        fits = target.in_place != "never" and in_place and _fits_in_place(bytes(old), new)
        if target.in_place == "required" and not fits:
            raise ProtectedTarget(
                f"{target.path} has several hard links and this edit cannot be made in place (a rewrite would "
                "detach this name from the others); pass --no-follow to give this name its own edited copy",
                path=target.path,
            )
        r.mode = "in-place" if fits else "rewrite"
        r.target = redact_url(target.path)
        if dry_run:
            return r
        if not fits:
            _rewrite(f.source, target.path, new, header.data_start, header.data_size, progress, output_storage_options)
            return r
    _write_in_place(target.path, bytes(old), new)  # after the checkpoint (and its map) is closed
    return r
