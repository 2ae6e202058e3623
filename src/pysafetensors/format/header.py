"""Parse and encode the safetensors header; every format rule lives here.

The rules and the order they are checked in follow upstream safetensors 0.8.0 (serde_json
plus ``Metadata::validate``), so a file is accepted here exactly when upstream accepts it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
from .dtypes import BY_CODE, CODES, DType

HEADER_CAP = 100_000_000
N_LEN = 8
_U64 = 1 << 64
METADATA_KEY = "__metadata__"


@dataclass(frozen=True)
class TensorInfo:
    """One header entry: where a tensor's bytes are and how to read them."""

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
        n = 1
        for d in self.shape:
            n *= d
        return n


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


class _Object(dict):  # type: ignore[type-arg]
    """A JSON object that remembers keys that appeared more than once, and the values the
    later occurrences replaced (serde validates those too before the last one wins)."""

    duplicates: list[str]
    shadowed: list[tuple[str, Any]]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    obj.shadowed = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
            obj.shadowed.append((key, obj[key]))
        obj[key] = value
    return obj


# serde_json refuses JSON nested deeper than this many arrays/objects, even in ignored fields.
_MAX_DEPTH = 127


def _check_depth(value: Any, depth: int) -> None:
    """Raise when ``value`` (a JSON value at nesting ``depth``) nests past serde's limit."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > _MAX_DEPTH:
                raise _json_error("recursion limit exceeded")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"expected value, found {name}")


def _parse_int(text: str) -> Any:
    # serde_json reads "-0" as the float -0.0, which is not a valid usize.
    return -0.0 if text == "-0" else int(text)


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
        for key, extra in raw.items():
            if key not in ("dtype", "shape", "data_offsets"):
                _check_depth(extra, 3)  # ignored, but serde still parses it
    else:
        raise _json_error(f"invalid type: {_unexpected(raw)}, expected struct TensorInfo (tensor `{name}`)")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in fields:
            raise _json_error(f"missing field `{field}` (tensor `{name}`)")
    code = fields["dtype"]
    if isinstance(code, dict) and len(code) == 1 and next(iter(code.values())) is None:
        code = next(iter(code))  # serde's externally tagged form of a unit variant: {"F32": null}
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
        text = bytes(header).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidHeaderUtf8.make(
            f"invalid UTF-8 in header: invalid utf-8 sequence of 1 bytes from index {e.start}"
        ) from None
    try:
        raw = json.loads(
            text, object_pairs_hook=_pairs_hook, parse_constant=_reject_constant, parse_int=_parse_int
        )
    except RecursionError:
        raise _json_error("recursion limit exceeded") from None
    except ValueError as e:
        raise _json_error(str(e)) from None
    if not isinstance(raw, dict):
        raise _json_error(f"invalid type: {_unexpected(raw)}, expected struct HashMetadata")
    if METADATA_KEY in getattr(raw, "duplicates", ()):
        raise _json_error(f"duplicate field `{METADATA_KEY}`")

    # Values a later duplicate key replaced must still be valid (serde checks each as it parses).
    for name, shadowed in getattr(raw, "shadowed", ()):
        _check_str(name, "tensor name")
        _tensor_entry(name, shadowed)

    metadata: dict[str, str] | None = None
    entries: list[tuple[int, int, int, str, DType, tuple[int, ...]]] = []
    for position, (name, value) in enumerate(raw.items()):
        _check_str(name, "tensor name")
        if name == METADATA_KEY:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise _json_error(f"invalid type: {_unexpected(value)}, expected a map ({METADATA_KEY})")
            for k, v in getattr(value, "shadowed", ()):
                _check_str(v, f"{METADATA_KEY}[{k!r}]")
            metadata = {
                _check_str(k, f"{METADATA_KEY} key"): _check_str(v, f"{METADATA_KEY}[{k!r}]")
                for k, v in value.items()
            }
            continue
        dtype, shape, begin, end = _tensor_entry(name, value)
        entries.append((begin, end, position, name, dtype, shape))

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
