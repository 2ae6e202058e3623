"""Validate a safetensors file or a sharded checkpoint, reporting every problem, not just the first.

A file's header goes through ``format.validate_header``: the rule set ``parse_header`` raises
the first problem of (``check_header``), so ``validate`` and the reader cannot disagree on a
verdict, and the header is parsed once (a well-formed one by the reader's fast path).
A sharded checkpoint is checked shard by shard, then against its index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import HeaderError, SourceError
from ..format.header import Header, validate_header
from ..format.index import check_shard
from ..gguf.check import validate_gguf
from ..gguf.reader import source_reader
from ..gguf.split import PartOpener, check_split_set, split_count
from ..io.locate import find_in_directory, is_index_name, is_sharded_path, locate
from ..io.protocols import ByteSource
from ..reader import read_header_bytes
from ..sharded import open_index


@dataclass
class Problem:
    code: str  # a stable machine-readable kind, e.g. "invalid_offset"
    message: str
    tensor: str | None = None
    data_offsets: list[Any] | None = None
    file: str | None = None  # the shard, for a sharded checkpoint


@dataclass
class ValidateResult:
    path: str
    valid: bool
    file_size: int
    header_size: int | None = None
    tensor_count: int | None = None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    files: list[str] | None = None  # the shards checked, for a sharded checkpoint
    _header: Header | None = field(default=None, repr=False)  # the parsed header when valid (not rendered)


def validate(path: str, storage_options: Mapping[str, Any] | None = None, *,
             max_input_size: int | None = None) -> ValidateResult:
    """Validate a safetensors or GGUF file, or a sharded checkpoint (index JSON or directory)
    shard by shard.  ``storage_options`` go to remote sources (for HTTP: ``timeout``...);
    ``max_input_size`` caps what is copied of a stream.

    Raises OSError only when the input cannot be read at all, and SafetensorError for an
    index that cannot be checked (bad JSON, unsafe shard names).
    """
    if is_sharded_path(path):
        return validate_sharded(path, storage_options)
    return validate_file(path, storage_options, max_input_size=max_input_size)


def _validate_gguf(path: str, source: ByteSource, open_part: PartOpener | None = None) -> ValidateResult:
    """A GGUF file (its magic first): :func:`pysafetensors.gguf.check.validate_gguf`'s problems;
    a file of a split set checks the whole set (:func:`pysafetensors.gguf.split.check_split_set`)."""
    found = validate_gguf(source_reader(source), source.size)
    r = ValidateResult(path, found.valid, source.size)
    if found.header is not None:
        r.header_size = found.header.data_offset
        r.tensor_count = len(found.header.tensors)
        if split_count(found.header) > 1:
            checked = check_split_set(source.name or path, found.header, source.size, open_part)
            r.files, r.file_size, r.tensor_count = checked.files, checked.size, checked.tensors
            r.problems = [Problem(p.code, p.message, p.tensor, file=f) for f, p in checked.problems]
            r.valid = not r.problems
            return r
    r.problems = [Problem(p.code, p.message, p.tensor) for p in found.problems]
    return r


def validate_file(path: str, storage_options: Mapping[str, Any] | None = None, *,
                  max_input_size: int | None = None) -> ValidateResult:
    """Validate one file: a local path or a URL (only its header is read), or a pipe
    (``/dev/stdin``, copied up to what its header declares, at most ``max_input_size`` bytes, as
    every tool reads one: :func:`pysafetensors.io.locate.locate`); a GGUF file (by its magic) is
    checked by :func:`pysafetensors.gguf.check.validate_gguf`."""
    try:
        found = locate(path, storage_options, max_input_size=max_input_size)
    except SourceError as e:
        if e.code != "header_too_small":
            raise
        # A FIFO or device that ended before 8 bytes: the problem a file as short has, in words
        # that say what the input is.
        short = ValidateResult(path, False, e.size or 0)
        short.problems.append(Problem("header_too_small", str(e).removeprefix(f"{path}: ")))
        return short
    if found.index:
        return validate_sharded(found.location, storage_options)
    source = found.take_source()
    try:
        size = source.size
        if found.format == "gguf":
            return _validate_gguf(path, source, found.sibling_opener())
        r = ValidateResult(path, True, size)
        try:
            header = read_header_bytes(source)
        except HeaderError as e:  # the length prefix: nothing after it can be checked
            r.header_size = e.header_size
            r.problems.append(Problem(e.code or type(e).__name__, _message(e)))
            r.valid = False
            return r
    finally:
        source.close()
    r.header_size = len(header)
    problems, r._header = validate_header(header, size)  # the rules parse_header raises the first of
    for p in problems:
        (r.warnings if p.warning else r.problems).append(Problem(p.code, p.message, p.tensor, p.data_offsets))
    if r._header is not None:
        r.tensor_count = len(r._header.tensors)
    r.valid = not r.problems
    return r


def _message(e: HeaderError) -> str:
    return e.reason + (f" ({e.detail})" if e.detail else "")


def validate_sharded(path: str, storage_options: Mapping[str, Any] | None = None) -> ValidateResult:
    if not is_index_name(path):
        path = find_in_directory(path)
        if not is_index_name(path):  # a directory holding one plain file
            return validate_file(path, storage_options)
    # Bad JSON and unsafe shard names are errors (exit 2): there is nothing to check.
    sharded = open_index(path, storage_options=storage_options)
    index = sharded.index
    r = ValidateResult(path, True, 0, files=index.shards)
    seen: dict[str, str] = {}
    missing: list[tuple[str, str]] = []  # (tensor, shard) mapped there but absent, for the shards that parsed
    total = 0
    for shard in index.shards:
        try:
            sub = validate_file(sharded.locate(shard), storage_options)
        except FileNotFoundError:
            r.problems.append(Problem("missing_shard", "shard listed in the index does not exist", file=shard))
            continue
        r.file_size += sub.file_size
        for p in sub.problems + sub.warnings:
            p.file = shard
        r.problems += sub.problems
        r.warnings += sub.warnings
        if not sub.valid or sub._header is None:
            continue
        check = check_shard(index, shard, (t.name for t in sub._header.tensors), sub._header.metadata)
        if check.mixed:
            r.problems.append(Problem("checkpoint_mismatch", check.describe_mixed(path), file=shard))
        missing += [(name, shard) for name in check.missing]
        ignored = set(check.ignored)
        for t in sub._header.tensors:
            total += t.nbytes
            if t.name in seen:
                r.problems.append(Problem("duplicate_tensor", f"also in {seen[t.name]}", t.name, file=shard))
            seen[t.name] = shard
            if t.name in ignored:
                r.problems.append(Problem("unmapped_tensor", "tensor is in this shard but the index maps it to "
                                          f"{index.weight_map.get(t.name)!r}", t.name, file=shard))
    for name, shard in sorted(missing):
        r.problems.append(Problem("missing_tensor", "the index maps this tensor here but the shard lacks it",
                                  name, file=shard))
    declared = index.metadata.get("total_size")
    if declared is not None and declared != total and not r.problems:
        r.warnings.append(Problem("total_size", f"index says total_size {declared}, the tensors hold {total} bytes"))
    r.tensor_count = len(seen)
    r.valid = not r.problems
    return r
