"""``pysafetensors validate FILE``: check every format rule and report every problem found.

A GGUF file (recognised by its magic) is checked by :func:`pysafetensors.gguf.check.validate_gguf`.

``format.header.parse_header`` stops at the first broken rule (it must: it is the reader).
This is a lenient second parse that keeps going, using the same constants, dtype table and
JSON hooks, so it reports all problems, each with the tensor and offsets involved.  The
verdict is kept identical to the strict parser: after the lenient pass the strict one runs
too, and if it rejects a file the lenient pass found nothing wrong with, its error is reported
(the tests check the two agree over a corpus of broken files).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import SafetensorError
from ..format.dtypes import BY_CODE, DType
from ..format.header import (
    HEADER_CAP,
    METADATA_KEY,
    N_LEN,
    Header,
    decode_header_json,  # shared with the strict parser so both read the JSON the same way
    has_lone_surrogate,
    parse_header,
)
from ..format.index import check_shard
from ..gguf.check import validate_gguf
from ..gguf.header import is_gguf
from ..io.redact import redact_url
from ..io.registry import open_source
from ..sharded import find_in_directory, is_index_name, open_index
from ._common import emit, plural, render_json, terminal_safe
from ._inputs import is_sharded_path, storage_options_for

_U64 = 1 << 64


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


def _is_usize(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _U64


class _Checker:
    def __init__(self, result: ValidateResult) -> None:
        self.r = result

    def problem(self, code: str, message: str, tensor: str | None = None, offsets: Any = None) -> None:
        self.r.problems.append(Problem(code, message, tensor, list(offsets) if offsets is not None else None))

    def metadata(self, value: Any) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            self.problem("invalid_metadata", f"{METADATA_KEY} must be an object of strings, found {_kind(value)}")
            return
        for k, v in value.items():
            if not isinstance(v, str):
                self.problem("invalid_metadata", f"{METADATA_KEY}[{k!r}] must be a string, found {_kind(v)}")
            elif has_lone_surrogate(v) or has_lone_surrogate(k):
                self.problem("invalid_metadata", f"{METADATA_KEY}[{k!r}] contains a lone surrogate escape")

    def entry(self, name: str, raw: Any) -> tuple[DType | None, list[int] | None, list[int] | None]:
        """Check one tensor entry; returns what is usable of (dtype, shape, offsets)."""
        if has_lone_surrogate(name):
            self.problem("invalid_name", "tensor name contains a lone surrogate escape", name)
        if isinstance(raw, list) and len(raw) == 3:
            raw = {"dtype": raw[0], "shape": raw[1], "data_offsets": raw[2]}
        if not isinstance(raw, dict):
            self.problem("invalid_entry", f"tensor entry must be an object, found {_kind(raw)}", name)
            return None, None, None
        for dup in getattr(raw, "duplicates", ()):
            if dup in ("dtype", "shape", "data_offsets"):
                self.problem("invalid_entry", f"field {dup!r} appears twice", name)
        missing = [f for f in ("dtype", "shape", "data_offsets") if f not in raw]
        for f in missing:
            self.problem("missing_field", f"missing field {f!r}", name)
        dtype = shape = offsets = None
        if "dtype" in raw:
            code = raw["dtype"]
            dtype = BY_CODE.get(code) if isinstance(code, str) else None
            if dtype is None:
                self.problem("unknown_dtype", f"unknown dtype {code!r} (codes are case-sensitive: {', '.join(BY_CODE)})", name)
        if "shape" in raw:
            s = raw["shape"]
            if not isinstance(s, list) or not all(_is_usize(d) for d in s):
                self.problem("invalid_shape", f"shape must be a list of non-negative integers, found {json.dumps(s)}", name)
            else:
                shape = s
        if "data_offsets" in raw:
            o = raw["data_offsets"]
            if not isinstance(o, list) or len(o) != 2 or not all(_is_usize(x) for x in o):
                self.problem("invalid_offsets", f"data_offsets must be 2 non-negative integers, found {json.dumps(o)}",
                             name, o if isinstance(o, list) else None)
            else:
                offsets = o
        return dtype, shape, offsets

    def size(self, name: str, dtype: DType, shape: list[int], offsets: list[int]) -> None:
        n = 1
        for d in shape:
            n *= d
        nbits = n * dtype.bits
        if n >= _U64 or nbits >= _U64:
            self.problem("overflow", f"{dtype.code} {shape}: element count x bits overflows 64 bits", name, offsets)
            return
        if nbits % 8:
            self.problem("misaligned_subbyte", f"{n} x {dtype.code} is {nbits} bits, not a whole number of bytes",
                         name, offsets)
            return
        if offsets[1] >= offsets[0] and offsets[1] - offsets[0] != nbits // 8:
            self.problem("size_mismatch", f"{dtype.code} {shape} needs {nbits // 8} bytes, data_offsets hold "
                         f"{offsets[1] - offsets[0]}", name, offsets)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def check_bytes(prefix_and_header: bytes, file_size: int, r: ValidateResult) -> None:
    """Run every check on the first 8+N bytes of a file of ``file_size`` bytes, filling ``r``."""
    c = _Checker(r)
    if file_size < N_LEN:
        c.problem("header_too_small", f"file is {file_size} bytes; the 8-byte header length alone does not fit")
        return
    n = int.from_bytes(prefix_and_header[:N_LEN], "little")
    r.header_size = n
    if n > HEADER_CAP:
        c.problem("header_too_large", f"header declares {n} bytes; the cap is {HEADER_CAP}")
        return
    if N_LEN + n > file_size:
        c.problem("invalid_header_length", f"header declares {n} bytes, needing {n + N_LEN}, but the file has {file_size}")
        return
    raw_header = prefix_and_header[N_LEN : N_LEN + n]
    try:
        text = raw_header.decode("utf-8")
    except UnicodeDecodeError as e:
        c.problem("invalid_utf8", f"header is not valid UTF-8 (byte {e.start} of the header)")
        text = raw_header.decode("utf-8", errors="replace")  # keep checking the rest
    try:
        obj = decode_header_json(text)
    except (ValueError, RecursionError) as e:
        c.problem("invalid_json", f"header is not valid JSON: {e}")
        return
    if not isinstance(obj, dict):
        c.problem("invalid_json", f"header must be a JSON object, found {_kind(obj)}")
        return
    for dup in getattr(obj, "duplicates", ()):
        if dup == METADATA_KEY:
            c.problem("duplicate_metadata", f"{METADATA_KEY} appears twice")
        else:  # the strict parser (like upstream) keeps the last entry; the first one's bytes become a hole
            r.warnings.append(Problem("duplicate_tensor", "tensor name appears twice; the last entry wins", dup))
    placed = []
    for position, (name, value) in enumerate(obj.items()):
        if name == METADATA_KEY:
            c.metadata(value)
            continue
        first_problem = len(r.problems)
        dtype, shape, offsets = c.entry(name, value)
        for p in r.problems[first_problem:]:  # every problem of an entry shows its offsets
            if p.data_offsets is None and isinstance(value, dict) and isinstance(value.get("data_offsets"), list):
                p.data_offsets = list(value["data_offsets"])
        if offsets is not None:
            if offsets[1] < offsets[0]:  # reported once here, kept out of the layout walk (no cascade)
                c.problem("invalid_offset", f"data_offsets end {offsets[1]} before they begin {offsets[0]}", name, offsets)
            else:
                placed.append((offsets[0], offsets[1], position, name))
        if dtype is not None and shape is not None and offsets is not None:
            c.size(name, dtype, shape, offsets)
    r.tensor_count = len(obj) - (METADATA_KEY in obj)
    placed.sort()
    expected = 0
    for begin, end, _, name in placed:
        if begin > expected:
            c.problem("hole", f"data_offsets begin at {begin}, leaving bytes {expected}..{begin} of the data region "
                      "unused (tensors must be contiguous from 0)", name, [begin, end])
        elif begin < expected:
            c.problem("overlap", f"data_offsets begin at {begin}, inside the previous tensor which ends at {expected}",
                      name, [begin, end])
        expected = max(expected, end)
    want = N_LEN + n + expected
    if want != file_size:
        what = "is missing bytes" if file_size < want else f"has {file_size - want} bytes after the last tensor"
        c.problem("size_mismatch_file", f"tensors end at data offset {expected}, so the file should be {want} bytes, "
                  f"but it is {file_size} ({what})")


def _read_head(source: Any) -> bytes:
    """The 8-byte length and (when it is plausible) the header: at most 8 + the cap."""
    size = source.size
    prefix = bytearray(min(N_LEN, size))
    if prefix:
        source.read_into(0, memoryview(prefix))
    n = int.from_bytes(prefix, "little") if len(prefix) == N_LEN else 0
    head = bytearray(n if n <= HEADER_CAP and N_LEN + n <= size else 0)
    if head:
        source.read_into(N_LEN, memoryview(head))
    return bytes(prefix + head)


def _validate_gguf(path: str, source: Any) -> ValidateResult:
    """A GGUF file (its magic first): :func:`pysafetensors.gguf.check.validate_gguf`'s problems."""
    def read(offset: int, n: int) -> bytes:
        buf = bytearray(n)
        source.read_into(offset, memoryview(buf))
        return bytes(buf)

    found = validate_gguf(read, source.size)
    r = ValidateResult(path, found.valid, source.size)
    if found.header is not None:
        r.header_size = found.header.data_offset
        r.tensor_count = len(found.header.tensors)
    r.problems = [Problem(p.code, p.message, p.tensor) for p in found.problems]
    return r


def _validate_file(path: str) -> ValidateResult:
    """Validate one file: a local path or a URL (only its header is read)."""
    source = open_source(path, "pread", storage_options_for(path))
    try:
        size = source.size
        head = _read_head(source)
        if is_gguf(head):
            return _validate_gguf(path, source)
    finally:
        source.close()
    r = ValidateResult(path, True, size)
    check_bytes(head, size, r)
    strict_error: SafetensorError | None = None
    if r.header_size is not None and r.header_size <= HEADER_CAP and N_LEN + r.header_size <= size:
        try:
            r._header = parse_header(head[N_LEN:], size)
        except SafetensorError as e:
            strict_error = e
    if strict_error is not None and not r.problems:
        r.problems.append(Problem("rejected", str(strict_error), getattr(strict_error, "tensor", None)))
    r.valid = not r.problems
    return r


def _validate_sharded(path: str) -> ValidateResult:
    if not is_index_name(path):
        path = find_in_directory(path)
        if not is_index_name(path):  # a directory holding one plain file
            return _validate_file(path)
    # Bad JSON and unsafe shard names are errors (exit 2): there is nothing to check.
    sharded = open_index(path, storage_options=storage_options_for(path))
    index = sharded.index
    r = ValidateResult(path, True, 0, files=index.shards)
    seen: dict[str, str] = {}
    missing: list[tuple[str, str]] = []  # (tensor, shard) mapped there but absent, for the shards that parsed
    total = 0
    for shard in index.shards:
        try:
            sub = _validate_file(sharded.locate(shard))
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


def compute_validate(path: str) -> ValidateResult:
    """Validate a file, or a sharded checkpoint (index JSON or directory) shard by shard.

    Raises OSError (exit 2) only when the input cannot be read at all.
    """
    if is_sharded_path(path):
        return _validate_sharded(path)
    return _validate_file(path)


def render_validate(r: ValidateResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    r = terminal_safe(r)
    out = []
    for kind, items in (("problem", r.problems), ("warning", r.warnings)):
        for p in items:
            where = (f" file {p.file}" if p.file else "") + (f" tensor {p.tensor!r}" if p.tensor is not None else "")
            offs = f" data_offsets {p.data_offsets}" if p.data_offsets is not None else ""
            out.append(f"{r.path}: {kind} [{p.code}]{where}{offs}: {p.message}")
    if r.valid:
        shards = f"{plural(len(r.files), 'shard')}, " if r.files else f"header {r.header_size or 0:,} bytes, "
        out.append(f"{r.path}: valid ({plural(r.tensor_count or 0, 'tensor')}, {shards}{r.file_size:,} bytes)")
    else:
        out.append(f"{r.path}: INVALID ({len(r.problems)} problem{'s' if len(r.problems) != 1 else ''})")
    return "\n".join(out) + "\n"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("validate", parents=[common_options()], help="check every format rule of a safetensors or GGUF file (exit 1 if invalid)")
    p.add_argument("file")


def run(args: argparse.Namespace) -> int:
    r = compute_validate(args.file)
    r.path = redact_url(r.path)  # a signed URL's query string or a password is never printed
    emit(render_validate(r, "json" if args.json else "text"))
    return 0 if r.valid else 1
