"""Parse and encode the safetensors header; every format rule lives here.

The rules and the order they are checked in follow upstream safetensors 0.8.0 (serde_json
plus ``Metadata::validate``), so a file is accepted here exactly when upstream accepts it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Any, NamedTuple

from ..errors import (
    HeaderTooLarge,
    HeaderTooSmall,
    IncompleteBuffer,
    InvalidHeaderJson,
    InvalidHeaderLength,
    InvalidHeaderUtf8,
    InvalidOffset,
    MisalignedSubByte,
    TensorSizeMismatch,
    ValidationOverflow,
)
from ._gcpause import paused_gc
from .dtypes import BY_CODE, CODES, DType
from .json_compat import SURROGATE_ESCAPE, JsonObject, decode_header_json, has_lone_surrogate

HEADER_CAP = 100_000_000
N_LEN = 8
_U64 = 1 << 64
METADATA_KEY = "__metadata__"


class TensorInfo(NamedTuple):
    """One header entry: where a tensor's bytes are and how to read them.

    A NamedTuple (immutable) rather than a dataclass: the fast header path builds one per
    tensor with ``tuple.__new__``, which is what makes 100,000-tensor headers cheap to open.
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    begin: int  # offset in the data region
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def nelements(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class Header:
    """A validated header.  ``tensors`` is in file order (by data offset)."""

    tensors: tuple[TensorInfo, ...]
    metadata: dict[str, str] | None
    header_size: int  # N, the JSON length including padding

    @property
    def data_start(self) -> int:
        """Absolute file offset of the data region."""
        return N_LEN + self.header_size

    @property
    def data_size(self) -> int:
        return self.tensors[-1].end if self.tensors else 0

    def by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}


# --- parsing ------------------------------------------------------------------------------


def parse_header_length(prefix: bytes, file_size: int) -> int:
    """Validate the 8-byte length prefix against the file size and return N."""
    if file_size < N_LEN or len(prefix) < N_LEN:
        raise HeaderTooSmall.make(
            "header too small", f"file is {file_size} bytes, the length prefix alone needs 8"
        )
    n = int.from_bytes(prefix[:N_LEN], "little")
    if n > HEADER_CAP:
        raise HeaderTooLarge.make(
            "header too large", f"declared {n} bytes, the cap is {HEADER_CAP}", header_size=n
        )
    if n + N_LEN > file_size:
        raise InvalidHeaderLength.make(
            "invalid header length",
            f"header declares {n} bytes, needing {n + N_LEN}, but the file has {file_size}",
            header_size=n,
        )
    return n


def _json_error(msg: str) -> InvalidHeaderJson:
    return InvalidHeaderJson.make(f"invalid JSON in header: {msg}")  # type: ignore[return-value]


def _unexpected(value: Any) -> str:
    """A JSON value described the way serde_json's error messages describe it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {json.dumps(value, ensure_ascii=False)}"
    return "sequence" if isinstance(value, list) else "map"


def _usize(value: Any, what: str, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= _U64:
        value = float(value)  # serde_json reads integers past u64 as floats
    if isinstance(value, bool) or not isinstance(value, int):
        raise _json_error(f"invalid type: {_unexpected(value)}, expected usize (tensor `{name}`, {what})")
    if value < 0:
        raise _json_error(f"invalid value: integer `{value}`, expected usize (tensor `{name}`, {what})")
    return value


def _tensor_entry(name: str, raw: Any) -> tuple[DType, tuple[int, ...], int, int]:
    if isinstance(raw, list):  # serde accepts a struct as a sequence of its fields
        if len(raw) != 3:
            raise _json_error(f"invalid length {len(raw)}, expected struct TensorInfo with 3 elements (tensor `{name}`)")
        fields = {"dtype": raw[0], "shape": raw[1], "data_offsets": raw[2]}
    elif isinstance(raw, dict):
        dup = next((k for k in getattr(raw, "duplicates", ()) if k in ("dtype", "shape", "data_offsets")), None)
        if dup:
            raise _json_error(f"duplicate field `{dup}` (tensor `{name}`)")
        fields = raw
    else:
        raise _json_error(f"invalid type: {_unexpected(raw)}, expected struct TensorInfo (tensor `{name}`)")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in fields:
            raise _json_error(f"missing field `{field}` (tensor `{name}`)")
    code = fields["dtype"]
    if isinstance(code, JsonObject) and len(code) == 1 and not code.duplicates:
        # serde accepts a unit enum variant written as a single-key map: {"F32": null}.
        variant, unit = next(iter(code.items()))
        if unit is not None:
            raise _json_error(f"invalid type: {unit!r}, expected unit (tensor `{name}`, dtype)")
        code = variant
    elif not isinstance(code, (str, dict)):
        raise _json_error(f"invalid type: {_unexpected(code)}, expected string or map (tensor `{name}`)")
    dtype = BY_CODE.get(code) if isinstance(code, str) else None
    if dtype is None:
        raise _json_error(
            f"unknown variant `{code}`, expected one of {', '.join(f'`{c}`' for c in CODES)} (tensor `{name}`)"
        )
    shape_raw = fields["shape"]
    if not isinstance(shape_raw, list):
        raise _json_error(f"invalid type: {_unexpected(shape_raw)}, expected a sequence (tensor `{name}`, shape)")
    shape = tuple(_usize(d, "shape", name) for d in shape_raw)
    offsets = fields["data_offsets"]
    if not isinstance(offsets, list):
        raise _json_error(f"invalid type: {_unexpected(offsets)}, expected a sequence (tensor `{name}`, data_offsets)")
    if len(offsets) != 2:
        raise _json_error(f"invalid length {len(offsets)}, expected 2 elements in sequence (tensor `{name}`, data_offsets)")
    begin = _usize(offsets[0], "data_offsets", name)
    end = _usize(offsets[1], "data_offsets", name)
    return dtype, shape, begin, end


def _check_str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _json_error(f"invalid type: {_unexpected(value)}, expected a string ({where})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _json_error(f"lone surrogate in hex escape ({where})") from None
    return value


def parse_header(header: bytes | bytearray | memoryview, file_size: int) -> Header:
    """Parse and validate the N header bytes of a file of ``file_size`` bytes."""
    n = len(header)
    try:
        text = str(header, "utf-8")  # no copy of a bytearray/memoryview first
    except UnicodeDecodeError as e:
        raise InvalidHeaderUtf8.make(
            f"invalid UTF-8 in header: invalid utf-8 sequence of 1 bytes from index {e.start}"
        ) from None
    # A big header allocates ~3 containers per tensor: generational GC passes over the
    # growing, cycle-free structure dominated parse time (2-3x), so pause it while parsing.
    with paused_gc():
        return _fast_header(text, n, file_size) or _careful_header(text, n, file_size)


def _careful_header(text: str, n: int, file_size: int) -> Header:
    """Hooked parse that reproduces upstream's error for every malformed header."""
    try:
        raw = decode_header_json(text)
    except RecursionError:
        raise _json_error("recursion limit exceeded") from None
    except ValueError as e:
        raise _json_error(str(e)) from None
    if not isinstance(raw, JsonObject):
        raise _json_error(f"invalid type: {_unexpected(raw)}, expected struct HashMetadata")
    if METADATA_KEY in raw.duplicates:
        raise _json_error(f"duplicate field `{METADATA_KEY}`")
    # serde_json rejects a lone surrogate anywhere, even in fields it then ignores.
    if SURROGATE_ESCAPE.search(text) and has_lone_surrogate(raw):
        raise _json_error("lone leading surrogate in hex escape")
    # A duplicate tensor name keeps its last entry (as serde's HashMap does), but serde still
    # deserializes the entries it replaces, so they must be well formed too.
    for name, replaced in zip(raw.duplicates, raw.replaced):
        _tensor_entry(name, replaced)

    metadata: dict[str, str] | None = None
    entries: list[tuple[int, int, int, str, DType, tuple[int, ...]]] = []
    for position, (name, value) in enumerate(raw.items()):
        _check_str(name, "tensor name")
        if name == METADATA_KEY:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise _json_error(f"invalid type: {_unexpected(value)}, expected a map ({METADATA_KEY})")
            metadata = {
                _check_str(k, f"{METADATA_KEY} key"): _check_str(v, f"{METADATA_KEY}[{k!r}]")
                for k, v in value.items()
            }
            for k, v in zip(getattr(value, "duplicates", ()), getattr(value, "replaced", ())):
                _check_str(v, f"{METADATA_KEY}[{k!r}]")
            continue
        dtype, shape, begin, end = _tensor_entry(name, value)
        entries.append((begin, end, position, name, dtype, shape))
    return _validate(entries, metadata, n, file_size)


_ABSENT = object()
_Entry = tuple[int, int, int, str, DType, tuple[int, ...]]


def _fast_header(text: str, n: int, file_size: int) -> Header | None:
    """The common, well-formed header: json's C scanner, no hooks, one tight loop.

    Returns None whenever anything is unusual (possible duplicate keys, ``-0``, NaN, escaped
    surrogates, a non-dict entry, a wrong type, entries not in offset order, any size or
    offset mismatch); the careful path then re-parses and reports the exact error.  The
    hooks cost ~5 Python calls per tensor, which dominated opening 100,000-tensor files.
    """
    # Each scan of an 8 MB header costs ~5 ms (single characters, ~0.3 ms), so only what the
    # structure checks below cannot see is looked for in the text: ``-0`` (json gives 0),
    # escaped surrogates, and bools (ints to Python, not to serde; a header spelling one
    # anywhere, even in a name, takes the careful path).  NaN and Infinity need no scan: a
    # float fails every type check below.
    may_be_negative = "-" in text
    if (may_be_negative and "-0" in text) or ("\\" in text and "\\u" in text):
        return None
    if "true" in text or "false" in text:
        return None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(raw) is not dict:
        return None
    metadata: dict[str, str] | None = None
    value = raw.pop(METADATA_KEY, _ABSENT)  # raw is ours: no copy of 100,000 pairs
    has_metadata_key = value is not _ABSENT
    if has_metadata_key and value is not None:
        if type(value) is not dict or not all(type(v) is str for v in value.values()):
            return None
        metadata = value
    tensors: list[TensorInfo] = []
    append = tensors.append
    get_dtype = BY_CODE.get
    make = tuple.__new__
    expected = 0
    try:
        for name, value in raw.items():
            # Exactly the three fields: extra fields may hold what serde rejects (deep
            # nesting, out-of-range numbers), which only the careful path checks.
            if type(value) is not dict or len(value) != 3:
                return None
            shape = value["shape"]  # a missing field: KeyError, below
            begin, end = value["data_offsets"]
            dtype = get_dtype(value["dtype"])  # an unhashable code: TypeError, below
            if dtype is None or type(shape) is not list or begin != expected or type(begin) is not int or type(end) is not int:
                return None
            if shape:
                # sum() raises on str/list/dict/None dims and is a float if any dim is one
                # (bools were excluded above), all in C: only exact ints reach math.prod (a
                # str would make prod repeat it).  More than 64 dims (never seen) could make
                # the product a huge int: the careful path stops early instead.  Negative
                # dims are only possible where the text has a "-".
                if type(sum(shape)) is not int or len(shape) > 64 or (may_be_negative and min(shape) < 0):
                    return None
                nelements = prod(shape)
                # A zero product may hide an overflowing product of the dims before the
                # first 0, which upstream rejects: leave those to the careful path.
                if nelements == 0 and prod(shape[: shape.index(0)]) >= _U64:
                    return None
                nbits = nelements * dtype.bits
            else:
                nbits = dtype.bits
            if nbits >= _U64 or nbits & 7 or end - begin != nbits >> 3 or end >= _U64:
                return None
            expected = end
            append(make(TensorInfo, (name, dtype, tuple(shape), begin, end)))
    except (KeyError, TypeError, ValueError):
        return None
    if expected + N_LEN + n != file_size:
        return None
    # Duplicate keys anywhere (top level, inside an entry, in the metadata) are invisible
    # after json.loads but each adds a member, and every member has exactly one colon
    # outside strings.  Count the colons the kept members account for (one each, plus any
    # inside names and metadata strings; codes and numbers have none): a mismatch means a
    # member was replaced, and the careful path reports what serde would.
    members = len(raw) + has_metadata_key + 3 * len(tensors) + (len(metadata) if metadata else 0)
    in_strings = "".join(raw).count(":")  # every key: the names (and "__metadata__")
    if metadata:
        in_strings += sum(k.count(":") + v.count(":") for k, v in metadata.items())
    if text.count(":") != members + in_strings:
        return None
    return Header(tuple(tensors), metadata, n)


def _validate(entries: list[_Entry], metadata: dict[str, str] | None, n: int, file_size: int) -> Header:
    """Offsets contiguous from 0, sizes matching shape x dtype, file exactly covered."""
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    tensors = []
    expected = 0
    for begin, end, _, name, dtype, shape in entries:
        if begin != expected or end < begin:
            raise InvalidOffset.make(
                f"invalid offset for tensor `{name}`",
                f"data_offsets [{begin}, {end}], expected to begin at {expected}",
                tensor=name,
                data_offsets=(begin, end),
            )
        expected = end
        nelements = 1
        for d in shape:
            nelements *= d
            if nelements >= _U64:
                raise _overflow(name, shape, dtype)
        nbits = nelements * dtype.bits
        if nbits >= _U64:
            raise _overflow(name, shape, dtype)
        if nbits % 8:
            raise MisalignedSubByte.make(
                "The slice is slicing for subbytes dtypes, and the slice does not end up at a "
                "byte boundary, this is invalid.",
                f"tensor `{name}`: {nelements} x {dtype.code} is {nbits} bits, not whole bytes",
                tensor=name,
            )
        if end - begin != nbits // 8:
            raise TensorSizeMismatch.make(
                "invalid shape, data type, or offset for tensor",
                f"tensor `{name}`: {dtype.code} {list(shape)} needs {nbits // 8} bytes, "
                f"data_offsets [{begin}, {end}] hold {end - begin}",
                tensor=name,
            )
        tensors.append(TensorInfo(name, dtype, shape, begin, end))

    if expected + N_LEN + n != file_size:
        raise IncompleteBuffer.make(
            "incomplete metadata, file not fully covered",
            f"tensors end at data offset {expected}, so the file should be {expected + N_LEN + n} "
            f"bytes, but it is {file_size}",
        )
    return Header(tuple(tensors), metadata, n)


def _overflow(name: str, shape: tuple[int, ...], dtype: DType) -> ValidationOverflow:
    return ValidationOverflow.make(  # type: ignore[return-value]
        "overflow computing buffer size from shape and/or element type",
        f"tensor `{name}`: {dtype.code} {list(shape)}",
        tensor=name,
    )


# --- encoding -----------------------------------------------------------------------------


def encode_header(
    entries: list[tuple[str, str, list[int], int, int]],
    metadata: Mapping[str, str] | None,
    alignment: int = 8,
) -> bytes:
    """Encode the header JSON, padded with spaces so the data region starts on ``alignment``.

    ``entries`` are (name, dtype code, shape, begin, end) in file order.  The JSON is compact
    with raw non-ASCII, ``__metadata__`` first, exactly as upstream writes it.
    """
    obj: dict[str, Any] = {}
    if metadata is not None:
        obj[METADATA_KEY] = dict(metadata)
    for name, code, shape, begin, end in entries:
        obj[name] = {"dtype": code, "shape": list(shape), "data_offsets": [begin, end]}
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    pad = (alignment - (N_LEN + len(body)) % alignment) % alignment
    return body + b" " * pad
