"""Every rule a safetensors header must satisfy, as one generator of problems.

``check_header`` yields each problem it finds, in the order upstream safetensors 0.8.0
(serde_json plus ``Metadata::validate``) meets them, so the first one is the error upstream
reports: ``parse_header`` raises it, ``validate`` lists them all.  After a problem the checks
go on where they still mean something (the next field, the next tensor, the layout of the
tensors that could be placed), so one pass reports everything that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import (
    HeaderError,
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
from ._frame import GGUF_MAGIC, HEADER_CAP, METADATA_KEY, N_LEN, U64_LIMIT, WS_BYTES, header_length
from .dtypes import BY_CODE, CODES, DType
from .json_compat import (
    Unparsed,
    decode_scalar,
    first_char,
    iter_members,
    syntax_reason,
    text_problem,
)

_I64_MIN = -(1 << 63)
_TENSOR_FIELDS = ("dtype", "shape", "data_offsets")
_VARIANTS = ", ".join(f"`{c}`" for c in CODES)

# A tensor entry as the rules leave it: (begin, end, position, name, dtype, shape).
Entry = tuple[int, int, int, str, DType, tuple[int, ...]]


@dataclass(frozen=True)
class HeaderProblem:
    """One broken rule: a stable ``code``, the ``error`` a reader raises for it, and where.

    ``warning`` marks what upstream accepts but a person may want to know (a tensor name
    given twice: the last entry wins); ``parse_header`` ignores warnings.
    """

    code: str
    error: HeaderError
    tensor: str | None = None
    data_offsets: list[Any] | None = None
    warning: bool = False

    def __post_init__(self) -> None:
        self.error.code = self.code  # so a caught error names its rule too

    @property
    def message(self) -> str:
        detail = self.error.detail
        return self.error.reason + (f" ({detail})" if detail else "")


def _in_words(head: str, tail: str, sep: str = "; ") -> dict[str, str]:
    """A problem's explanation in a user's words: ``detail`` for the exception (after upstream's
    reason, in its parentheses) and ``plain`` for the command line, which shows it alone."""
    return {"detail": f"{head}{sep}{tail}", "plain": f"{head} ({tail})"}


def _known_kind(head: bytes) -> str | None:
    """What a file beginning with ``head`` (its first 8 bytes) is, when it is a format people
    mistake for safetensors (or text), for the message; None when nothing is recognised."""
    if head[:4] == GGUF_MAGIC:
        return "it begins with GGUF's magic: a GGUF file, which pysafetensors inspect, diff and convert read"
    if head[:4] == b"PK\x03\x04":
        return "it is a zip archive, as PyTorch's .pt/.bin files are: pysafetensors convert reads those"
    if head[:1] == b"\x80" and 2 <= head[1] <= 5:
        return "it begins like a pickle, as older PyTorch files do: pysafetensors convert reads those"
    if all(32 <= c < 127 or c in b"\t\n\r" for c in head):
        text = head.decode("ascii").encode("unicode_escape").decode("ascii")
        return f'it begins with the text "{text}", not a header length'
    return None


def check_header_length(prefix: bytes | bytearray | memoryview, file_size: int) -> HeaderProblem | None:
    """The rule for the 8-byte length prefix of a file of ``file_size`` bytes, or None.

    Upstream's reason opens the message; the detail says in plain words what the file seems to
    be (a text file is "not a safetensors file", a download cut short is "truncated").
    """
    return None if header_length(prefix, file_size) is not None else length_problem(prefix, file_size)


def length_problem(prefix: bytes | bytearray | memoryview, file_size: int) -> HeaderProblem:
    """The rule a length prefix breaks, for one ``header_length`` refuses."""
    if file_size < N_LEN or len(prefix) < N_LEN:
        why = "it is empty" if file_size == 0 else \
            f"it has {file_size} byte{'s' if file_size != 1 else ''}, fewer than the 8 of a header length"
        return HeaderProblem("header_too_small", HeaderTooSmall.make(
            "header too small", **_in_words("not a safetensors file", why, ": ")))
    n = int.from_bytes(prefix[:N_LEN], "little")
    if n > HEADER_CAP:
        kind = _known_kind(bytes(prefix[:N_LEN]))
        if kind is None and n + N_LEN <= file_size:  # it holds a header that long: safetensors over the cap
            words = _in_words(f"header too large: {n:,} bytes", f"the limit safetensors readers accept is {HEADER_CAP:,}")
        else:
            kind = kind or (f"its first 8 bytes, read as a header length, declare {n:,} bytes: more than the "
                            f"{HEADER_CAP:,} allowed, and than the file holds")
            words = _in_words("not a safetensors file", kind, ": ")
        return HeaderProblem("header_too_large", HeaderTooLarge.make("header too large", header_size=n, **words))
    # The one rule left: the file is shorter than the header it declares.
    kind = _known_kind(bytes(prefix[:N_LEN]))
    if kind is not None:
        words = _in_words("not a safetensors file", kind, ": ")
    else:
        words = _in_words(f"truncated: the header alone needs {n + N_LEN:,} bytes",
                          f"its length prefix declares {n:,}; the file has {file_size:,}")
    return HeaderProblem("invalid_header_length", InvalidHeaderLength.make(
        "invalid header length", header_size=n, **words))


def check_header(header: bytes | bytearray | memoryview, file_size: int) -> Iterator[HeaderProblem]:
    """Every problem with the N header bytes of a file of ``file_size`` bytes, in upstream's order.

    Nothing is yielded for a header upstream accepts (warnings aside).  Work and memory are
    bounded by the header's size: see json_compat for how the JSON is read.
    """
    yield from check(header, file_size)


def check(
    header: bytes | bytearray | memoryview, file_size: int, text: str | None = None
) -> Generator[HeaderProblem, None, tuple[list[Entry], dict[str, str] | None]]:
    """``check_header``, returning the tensors (sorted by offset) and the metadata at the end.

    ``text`` is the header decoded, when the caller has it already.
    """
    n = len(header)
    raw = header if isinstance(header, (bytes, bytearray)) else bytes(header)
    at = WS_BYTES.match(raw).end()  # type: ignore[union-attr]
    if text is None and raw[at : at + 1] == b"[" and raw.isascii():
        # An array at the top (valid UTF-8: it is ASCII), refused without decoding or reading it.
        yield _json("invalid_json", "invalid type: sequence, expected struct HashMetadata")
        return [], None
    if text is None:
        try:
            text = str(raw, "utf-8")
        except UnicodeDecodeError as e:  # worded as Rust's Utf8Error (Python finds the same bytes)
            if e.reason == "unexpected end of data":
                what = f"incomplete utf-8 byte sequence from index {e.start}"
            else:
                what = f"invalid utf-8 sequence of {e.end - e.start} bytes from index {e.start}"
            yield HeaderProblem("invalid_utf8", InvalidHeaderUtf8.make(f"invalid UTF-8 in header: {what}"))
            text = str(raw, "utf-8", "replace")  # the rest can still be checked
    opener, start = first_char(text)
    if opener == "[":  # refused before an array of any size is built
        yield _json("invalid_json", "invalid type: sequence, expected struct HashMetadata")
        return [], None
    reason = text_problem(text, raw)
    if reason is not None:
        yield _json("invalid_json", reason)
        return [], None
    if opener != "{":
        yield _json("invalid_json", _top_level_reason(text, opener, start))
        return [], None

    metadata: dict[str, str] | None = None
    seen_metadata = False
    placed: dict[str, Entry] = {}
    first_position: dict[str, int] = {}
    try:
        for position, (name, value) in enumerate(iter_members(text, start)):
            if name == METADATA_KEY:
                if seen_metadata:
                    yield _json("duplicate_metadata", f"duplicate field `{METADATA_KEY}`")
                    continue
                seen_metadata = True
                metadata = yield from _metadata(value)
                continue
            if name in first_position:
                yield HeaderProblem("duplicate_tensor", InvalidHeaderJson.make(
                    f"tensor `{name}` appears twice; the last entry wins", tensor=name), name, warning=True)
                placed.pop(name, None)
            entry = yield from _entry(name, value)
            if entry is not None:
                begin, end, dtype, shape = entry
                placed[name] = (begin, end, first_position.setdefault(name, position), name, dtype, shape)
            else:
                first_position.setdefault(name, position)
    except RecursionError:
        yield _json("invalid_json", "recursion limit exceeded")
        return [], None
    except ValueError as e:  # json's syntax errors and serde's number rules
        yield _json("invalid_json", syntax_reason(e, text))
        return [], None
    entries = sorted(placed.values())
    yield from _layout(entries, n, file_size)
    return entries, metadata


# --- the JSON level ---------------------------------------------------------------------


def _json(code: str, reason: str, detail: str | None = None, tensor: str | None = None,
          offsets: list[Any] | None = None) -> HeaderProblem:
    error = InvalidHeaderJson.make(f"invalid JSON in header: {reason}", detail, tensor=tensor)
    return HeaderProblem(code, error, tensor, offsets)


def _unexpected(value: Any) -> str:
    """A JSON value described the way serde's error messages describe it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        if value >= U64_LIMIT or value < _I64_MIN:
            value = float(value)  # serde reads integers past 64 bits as floats
        else:
            return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {json.dumps(value, ensure_ascii=False)}"
    if isinstance(value, Unparsed):
        return value.kind
    return "sequence" if isinstance(value, list) else "map"


def _top_level_reason(text: str, opener: str, start: int) -> str:
    if not opener:
        return "EOF while parsing a value"
    try:
        value = decode_scalar(text, start)
    except ValueError as e:
        return syntax_reason(e, text)
    return f"invalid type: {_unexpected(value)}, expected struct HashMetadata"


def _usize_reason(value: Any) -> str | None:
    """Why ``value`` is not a usize in serde's words, or None when it is one."""
    if type(value) is int:
        if 0 <= value < U64_LIMIT:
            return None
        if _I64_MIN <= value < 0:
            return f"invalid value: integer `{value}`, expected usize"
    return f"invalid type: {_unexpected(value)}, expected usize"


def _metadata(value: Any) -> Generator[HeaderProblem, None, dict[str, str] | None]:
    if value is None:
        return None
    if type(value) is not tuple:
        yield _json("invalid_metadata", f"invalid type: {_unexpected(value)}, expected a map", METADATA_KEY)
        return None
    ok = True
    for key, v in value:  # every value, also those a repeated key replaces
        if type(v) is not str:
            ok = False
            yield _json("invalid_metadata", f"invalid type: {_unexpected(v)}, expected a string",
                        f"{METADATA_KEY}[{key!r}]")
    return dict(value) if ok else None


def _plain(value: Any) -> Any:
    """A parsed value as plain JSON data, for a problem's data_offsets (JSON output)."""
    if type(value) is list:
        return [_plain(v) for v in value]
    return value if not isinstance(value, (tuple, Unparsed)) else None


def _entry(name: str, value: Any) -> Generator[HeaderProblem, None, tuple[int, int, DType, tuple[int, ...]] | None]:
    """A tensor entry's problems, in serde's order; returns (begin, end, dtype, shape) when placed.

    serde reads the fields in document order (an array holds them in struct order), each
    value as it meets it, and reports a repeated field when it meets the repeat.
    """
    where = f"tensor `{name}`"
    if type(value) is list:
        pairs: Any = list(zip(_TENSOR_FIELDS, value))
        offsets_list = _plain(value[2]) if len(value) > 2 and type(value[2]) is list else None
    elif type(value) is tuple:
        pairs = value
        offsets_list = _offsets_of(value)
    else:
        if isinstance(value, Unparsed) and value.first is not None:  # an array with a bad first item
            why = f"invalid type: {_unexpected(value.first)}, expected string or map"
        else:
            why = f"invalid type: {_unexpected(value)}, expected struct TensorInfo"
        yield _json("invalid_entry", why, where, name)
        return None

    seen: set[str] = set()
    dtype = shape = offsets = None
    reason: str | None
    for field, v in pairs:
        if field not in _TENSOR_FIELDS:
            continue  # unknown fields are ignored (their JSON was checked as a whole)
        if field in seen:
            yield _json("invalid_entry", f"duplicate field `{field}`", where, name, offsets_list)
            return None
        seen.add(field)
        if field == "dtype":
            dtype, reason = _dtype(v)
            code = "unknown_dtype"
        elif field == "shape":
            shape, reason = _shape(v)
            code = "invalid_shape"
        else:
            offsets, reason = _offsets(v)
            code = "invalid_offsets"
        if reason is not None:
            yield _json(code, reason, f"{where}, {field}", name, offsets_list)
    if type(value) is list and len(value) != 3:
        expected = "struct TensorInfo with 3 elements" if len(value) < 3 else "3 elements in sequence"
        yield _json("invalid_entry", f"invalid length {len(value)}, expected {expected}", where, name, offsets_list)
    for field in _TENSOR_FIELDS:
        if field not in seen and type(value) is tuple:
            yield _json("missing_field", f"missing field `{field}`", where, name, offsets_list)
    if offsets is None:
        return None
    # Placed even when the dtype or shape is broken: the layout of the others still means
    # something (only ever after a problem, so it cannot change a verdict).
    return offsets[0], offsets[1], dtype, shape  # type: ignore[return-value]


def _offsets_of(pairs: tuple[tuple[str, Any], ...]) -> list[Any] | None:
    raw = [_plain(v) for k, v in pairs if k == "data_offsets"]
    return raw[-1] if raw and type(raw[-1]) is list else None


def _dtype(value: Any) -> tuple[DType | None, str | None]:
    if type(value) is str:
        dtype = BY_CODE.get(value)
        return (dtype, None) if dtype else (None, f"unknown variant `{value}`, expected one of {_VARIANTS}")
    if type(value) is tuple:  # serde reads a unit variant written as a one-key map: {"F32": null}
        if len(value) != 1:
            return None, "invalid value: map, expected map with a single key"
        code, unit = value[0]
        dtype = BY_CODE.get(code)
        if dtype is None:
            return None, f"unknown variant `{code}`, expected one of {_VARIANTS}"
        if unit is not None:
            return None, f"invalid type: {_unexpected(unit)}, expected unit"
        return dtype, None
    return None, f"invalid type: {_unexpected(value)}, expected string or map"


def _shape(value: Any) -> tuple[tuple[int, ...] | None, str | None]:
    if type(value) is not list:
        return None, f"invalid type: {_unexpected(value)}, expected a sequence"
    for d in value:
        reason = _usize_reason(d)
        if reason is not None:
            return None, reason
    return tuple(value), None


def _offsets(value: Any) -> tuple[tuple[int, int] | None, str | None]:
    if type(value) is not list:
        return None, f"invalid type: {_unexpected(value)}, expected a tuple of size 2"
    for i in range(2):
        if len(value) <= i:
            return None, f"invalid length {i}, expected a tuple of size 2"
        reason = _usize_reason(value[i])
        if reason is not None:
            return None, reason
    if len(value) > 2:
        return None, f"invalid length {len(value)}, expected 2 elements in sequence"
    return (value[0], value[1]), None


# --- the layout level -------------------------------------------------------------------


def _layout(entries: list[Entry], n: int, file_size: int) -> Iterator[HeaderProblem]:
    """Offsets contiguous from 0, sizes matching shape x dtype, the file exactly covered.

    Upstream walks the tensors sorted by offset and stops at the first problem; this walk
    is the same until then and afterwards keeps going, so a hole is reported once (not as a
    problem for every tensor after it).
    """
    expected = 0
    for begin, end, _, name, dtype, shape in entries:
        offsets = [begin, end]
        if end < begin or begin != expected:
            if end < begin:
                code, why = "invalid_offset", f"data_offsets [{begin}, {end}] end before they begin"
            elif begin > expected:
                code, why = "hole", (f"data_offsets [{begin}, {end}] begin at {begin}, leaving bytes "
                                     f"{expected}..{begin} of the data region unused")
            else:
                code, why = "overlap", (f"data_offsets [{begin}, {end}] begin at {begin}, inside the "
                                        f"previous tensor, which ends at {expected}")
            yield HeaderProblem(code, InvalidOffset.make(
                f"invalid offset for tensor `{name}`", why, tensor=name, data_offsets=(begin, end)), name, offsets)
            if end < begin:
                continue
        expected = max(expected, end)
        if dtype is None or shape is None:
            continue
        problem = _size_problem(name, dtype, shape, begin, end)
        if problem is not None:
            yield problem
    if expected + N_LEN + n != file_size:
        want = expected + N_LEN + n
        sizes = f"expected {want:,} bytes, the file has {file_size:,}"
        if file_size < want:
            words = _in_words(f"truncated: {want - file_size:,} bytes of tensor data missing", sizes)
        else:
            words = _in_words(f"{file_size - want:,} bytes after the last tensor", sizes)
        yield HeaderProblem("size_mismatch_file", IncompleteBuffer.make(
            "incomplete metadata, file not fully covered", data_end=expected, **words))


def _size_problem(name: str, dtype: DType, shape: tuple[int, ...], begin: int, end: int) -> HeaderProblem | None:
    offsets = [begin, end]
    nelements = 1
    for d in shape:
        nelements *= d
        if nelements >= U64_LIMIT:
            break
    nbits = nelements * dtype.bits
    if nelements >= U64_LIMIT or nbits >= U64_LIMIT:
        return HeaderProblem("overflow", ValidationOverflow.make(
            "overflow computing buffer size from shape and/or element type",
            f"tensor `{name}`: {dtype.code} {list(shape)}", tensor=name), name, offsets)
    if nbits % 8:
        return HeaderProblem("misaligned_subbyte", MisalignedSubByte.make(
            "The slice is slicing for subbytes dtypes, and the slice does not end up at a "
            "byte boundary, this is invalid.",
            f"tensor `{name}`: {nelements} x {dtype.code} is {nbits} bits, not whole bytes",
            tensor=name), name, offsets)
    if end - begin != nbits // 8:
        return HeaderProblem("size_mismatch", TensorSizeMismatch.make(
            "invalid shape, data type, or offset for tensor",
            f"tensor `{name}`: {dtype.code} {list(shape)} needs {nbits // 8} bytes, "
            f"data_offsets [{begin}, {end}] hold {end - begin}",
            tensor=name), name, offsets)
    return None
