"""Parse a GGUF header from any byte source, bounded before every allocation.

The parser reads through a ``read(offset, length) -> bytes`` callable, so the same code serves
local files, HTTP Range requests and fsspec URLs, and it reads only the header (metadata and
tensor descriptions), never tensor data.  Every count and length in the file is checked against
the bytes that remain before anything is allocated or read for it: a 2^63-item tokenizer array
in a 1 KB file is refused at once, not after the process runs out of memory.

Metadata is held compactly: a numeric array as its own bytes (:class:`GGUFNumbers`), an array of
arrays as its bytes plus one offset per item (:class:`GGUFArrays`, each item parsed again when
asked for), so what parsing holds stays within a small multiple of the file's size.  Two caps
bound the work a crafted header can ask for per byte (each metadata key and each array nested
in an array costs a Python object or a loop step, however few bytes it takes in the file):
:data:`MAX_METADATA_KEYS` keys and :data:`MAX_NESTED_ARRAYS` arrays inside arrays; real files
have some dozens of keys and no nested arrays (llama.cpp refuses them).

Structural problems that stop parsing (wrong magic, a length past the end, an unknown value
type, a cap exceeded) raise :class:`~pysafetensors.errors.GGUFError`.  Problems of the layout the header
describes (misaligned or overlapping tensor data, unknown GGML types, duplicate names) are left
to :func:`pysafetensors.gguf.check.check_layout`, which lists every one.
"""

from __future__ import annotations

import struct
from array import array as _array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from math import prod
from typing import Any

from ..errors import GGUFError
from .types import (
    DEFAULT_ALIGNMENT,
    GGML_TYPES,
    MAGIC,
    SCALAR_FORMATS,
    SCALAR_SIZES,
    VERSIONS,
    GGMLType,
    ValueType,
    ggml_type_name,
)
from .values import GGUFArray, GGUFArrays, GGUFArrayValues, GGUFNumbers, array_values, plain_value, type_name

#: llama.cpp's GGML_MAX_DIMS: a tensor has at most four dimensions.
MAX_DIMS = 4
#: arrays of arrays nest at most this deep (llama.cpp reads none; gguf-py any).
MAX_ARRAY_DEPTH = 8
#: metadata keys a file may declare (real files have some dozens); checked before any key is read.
MAX_METADATA_KEYS = 65_536
#: arrays inside arrays, counted over the whole file at every depth (llama.cpp reads none).
MAX_NESTED_ARRAYS = 65_536
#: bytes asked for at a time; doubles while the header keeps going (remote reads stay few).
#: The first read stays inside the 100,001 bytes a remote source fetches when it is opened.
_FIRST_READ = 64 * 1024
_MAX_READ = 16 * 1024 * 1024

Reader = Callable[[int, int], bytes]
#: value type id -> (the type, its struct code, its size), for the numeric and boolean types
_NUMBER_TYPES = {int(t): (t, f, SCALAR_SIZES[t]) for t, f in SCALAR_FORMATS.items()}


@dataclass(frozen=True, slots=True)
class GGUFField:
    """One metadata key/value pair; ``offset`` is where the pair starts in the file."""

    key: str
    type: ValueType
    value: Any  # int, float, bool, str, or GGUFArray
    offset: int

    @property
    def type_name(self) -> str:
        """``uint32``, ``string``, ``array[string]``, ``array[array[int32]]``..."""
        return type_name(self.type, self.value)

    def plain(self) -> Any:
        """The value as plain Python (arrays as lists, nested arrays as lists of lists)."""
        return plain_value(self.value)


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor description: ``dims`` in GGUF's order (fastest-varying first)."""

    name: str
    dims: tuple[int, ...]
    type_id: int
    offset: int  # relative to the start of the data section
    info_offset: int  # where the description starts in the file

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape in PyTorch's order (GGUF's dims reversed)."""
        return tuple(reversed(self.dims))

    @property
    def n_elements(self) -> int:
        return prod(self.dims)

    @property
    def ggml_type(self) -> GGMLType | None:
        return GGML_TYPES.get(self.type_id)

    @property
    def type_name(self) -> str:
        """The lowercase GGML type name (``q4_k``), ``unknown_<n>`` for unlisted ids."""
        return ggml_type_name(self.type_id)

    @property
    def nbytes(self) -> int | None:
        """Bytes of data, or None when the type is unknown or the rows are not whole blocks."""
        t = self.ggml_type
        if t is None:
            return None
        n = self.n_elements
        if (self.dims[0] if self.dims else 1) % t.block_elements:
            return None
        return n // t.block_elements * t.block_bytes


@dataclass(frozen=True)
class GGUFHeader:
    """Everything before the tensor data: version, metadata, tensor descriptions, layout."""

    version: int
    fields: dict[str, GGUFField]
    tensors: tuple[GGUFTensorInfo, ...]
    alignment: int
    data_offset: int  # absolute offset of the data section
    file_size: int
    alignment_problem: str | None = field(default=None)
    #: (key, offset) of each metadata key met again after its first occurrence (the first value is kept)
    duplicate_keys: tuple[tuple[str, int], ...] = ()

    def value(self, key: str, default: Any = None) -> Any:
        f = self.fields.get(key)
        return default if f is None else f.value

    @property
    def architecture(self) -> str | None:
        arch = self.value("general.architecture")
        return arch if isinstance(arch, str) else None


def is_gguf(prefix: bytes) -> bool:
    """True when the first bytes of a file are GGUF's magic."""
    return prefix[:4] == MAGIC


class _Cursor:
    """Sequential reads over ``read`` with a growing window, bounded by the file size."""

    def __init__(self, read: Reader, size: int) -> None:
        self.read = read
        self.size = size
        self.pos = 0
        self.buf = b""
        self.base = 0
        self.chunk = _FIRST_READ
        #: while recording (:meth:`record`), the bytes read since, in the windows already left
        self.pieces: list[bytes] | None = None
        self.piece_from = 0

    @classmethod
    def over(cls, data: bytes) -> _Cursor:
        """A cursor over bytes already in memory: one window, never read again."""
        c = cls(_no_read, len(data))
        c.buf = data
        return c

    def record(self) -> None:
        """Keep every byte read from here on, until :meth:`recorded` (windows move on meanwhile)."""
        self.pieces = []
        self.piece_from = self.pos

    def recorded(self) -> bytes:
        """The bytes read since :meth:`record`, which it stops."""
        pieces, self.pieces = self.pieces or [], None
        tail = self.buf[self.piece_from - self.base : self.pos - self.base]
        return b"".join([*pieces, tail]) if pieces else bytes(tail)

    def fits(self, need: int, declared: str, code: str, **context: Any) -> None:
        """Refuse what the file ``declared`` (a count, a length) when the ``need`` bytes it takes
        at the least are more than remain: checked before anything that size is allocated."""
        if need > self.size - self.pos:
            raise GGUFError(f"{declared}, but only {self.size - self.pos} bytes remain in the file",
                            code=code, **context)

    def take(self, n: int, what: str) -> bytes:
        if n > self.size - self.pos:
            raise GGUFError(
                f"truncated GGUF file: {what} needs {n} bytes at offset {self.pos}, "
                f"only {self.size - self.pos} remain",
                code="truncated",
                offset=self.pos,
                wanted=n,
            )
        start = self.pos - self.base
        if start + n > len(self.buf):
            want = min(max(n, self.chunk), self.size - self.pos)
            data = self.read(self.pos, want)
            if len(data) < n:
                raise GGUFError(
                    f"truncated GGUF file: {what} needs {n} bytes at offset {self.pos}, the source gave {len(data)}",
                    code="truncated",
                    offset=self.pos,
                    wanted=n,
                )
            if self.pieces is not None:  # recording: keep what this window held since it began
                self.pieces.append(self.buf[self.piece_from - self.base : self.pos - self.base])
                self.piece_from = self.pos
            self.buf, self.base, start = data, self.pos, 0
            self.chunk = min(self.chunk * 2, _MAX_READ)
        self.pos += n
        return self.buf[start : start + n]

    def skip(self, n: int, what: str) -> None:
        if self.pos + n <= self.base + len(self.buf):
            self.pos += n
        else:
            self.take(n, what)  # checks the length and moves the window on

    def unpack(self, fmt: str, what: str) -> Any:
        raw = self.take(struct.calcsize(fmt), what)
        return struct.unpack(fmt, raw)


def _no_read(offset: int, length: int) -> bytes:
    return b""  # a cursor over memory has nothing more to read: its take() reports it as truncated


class _Parser:
    def __init__(self, read: Reader, size: int) -> None:
        self.c = _Cursor(read, size)
        self.version = 0
        self.nested = 0  # arrays inside arrays met so far (MAX_NESTED_ARRAYS)

    @classmethod
    def over(cls, data: bytes, version: int) -> _Parser:
        """A parser of a piece of a file of ``version`` already in memory (a nested array's item)."""
        p = cls(_no_read, 0)
        p.c = _Cursor.over(data)
        p.version = version
        return p

    # --- primitives -------------------------------------------------------------------------
    @property
    def wide(self) -> bool:
        """Version 1 stores counts and lengths as u32; 2 and 3 as u64."""
        return self.version >= 2

    def count(self, what: str) -> int:
        fmt = "<Q" if self.wide else "<I"
        return int(self.c.unpack(fmt, what)[0])

    def string(self, what: str) -> str:
        start = self.c.pos
        n = self.count(f"length of {what}")
        self.c.fits(n, f"{what}: string length {n} at offset {start}", "string_too_long", offset=start, length=n)
        return self._decode(self.c.take(n, what), what, start)

    def _decode(self, raw: bytes, what: str, start: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise GGUFError(f"{what}: invalid UTF-8 at offset {start + (8 if self.wide else 4) + e.start}",
                            code="invalid_utf8", offset=start) from None

    def strings(self, n: int, key: str) -> list[str]:
        """``n`` strings in a row (a tokenizer's vocabulary): the ones inside the read window are
        cut out of it in a tight loop; one that crosses the window's end goes through
        :meth:`string`, which checks it and moves the window on."""
        c = self.c
        width = 8 if self.wide else 4
        length_at = struct.Struct("<Q" if self.wide else "<I").unpack_from
        out: list[str] = []
        append = out.append
        what = f"item of array {key!r}"
        while len(out) < n:
            buf, base = c.buf, c.base
            p, end = c.pos - base, len(buf)
            left = n - len(out)
            try:
                while left and p + width <= end:
                    (length,) = length_at(buf, p)
                    q = p + width + length
                    if q > end:
                        break
                    append(buf[p + width : q].decode("utf-8"))
                    p = q
                    left -= 1
            except UnicodeDecodeError:
                c.pos = base + p
                append(self.string(what))  # raises, naming the offset
            c.pos = base + p
            if left:
                append(self.string(what))
        return out

    def value_type(self, what: str) -> ValueType:
        start = self.c.pos
        raw = int(self.c.unpack("<I", what)[0])
        try:
            return ValueType(raw)
        except ValueError:
            raise GGUFError(f"{what}: unknown GGUF value type {raw} at offset {start}", code="unknown_value_type",
                            offset=start, value_type=raw) from None

    def min_size(self, t: ValueType) -> int:
        """The fewest bytes one value of type ``t`` can take (bounds array counts)."""
        if t is ValueType.STRING:
            return 8 if self.wide else 4
        if t is ValueType.ARRAY:
            return 4 + (8 if self.wide else 4)
        return SCALAR_SIZES[t]

    def value(self, t: ValueType, key: str, depth: int = 0) -> Any:
        if t is ValueType.STRING:
            return self.string(f"value of {key!r}")
        if t is ValueType.ARRAY:
            return self.array(key, depth + 1)
        return self.c.unpack("<" + SCALAR_FORMATS[t], f"value of {key!r}")[0]

    def _array_start(self, key: str, depth: int) -> tuple[ValueType, int]:
        """An array's item type and length, checked against the depth and count limits."""
        if depth > MAX_ARRAY_DEPTH:
            raise GGUFError(f"{key!r}: arrays nested more than {MAX_ARRAY_DEPTH} deep", code="nesting", key=key)
        item_type = self.value_type(f"item type of array {key!r}")
        start = self.c.pos
        n = self.count(f"length of array {key!r}")
        self._check_count(key, item_type, n, start)
        return item_type, n

    def array(self, key: str, depth: int) -> GGUFArray:
        item_type, n = self._array_start(key, depth)
        if item_type in SCALAR_FORMATS:
            size = SCALAR_SIZES[item_type]
            raw = self.c.take(n * size, f"array {key!r}")
            return GGUFArray(item_type, GGUFNumbers(bytes(raw), SCALAR_FORMATS[item_type]))
        if item_type is ValueType.STRING:
            return GGUFArray(item_type, self.strings(n, key))
        # An array of arrays: each item is checked as it would be parsed, but only its offset
        # is kept, beside the bytes of them all (GGUFArrays parses an item again when asked).
        c = self.c
        base = c.pos
        starts = _array("I" if c.size - c.pos < 2**32 else "Q")
        c.record()
        try:
            self._walk_arrays(n, key, depth + 1, base, starts)
        finally:
            raw = c.recorded()
        return GGUFArray(item_type, GGUFArrays(raw, starts, partial(_parse_items, self.version, key, depth + 1)))

    def _walk_arrays(self, n: int, key: str, depth: int, base: int, starts: _array[int]) -> None:
        """Check ``n`` arrays in a row (the items of an array of arrays, at ``depth``), noting
        where each starts (relative to ``base``).  Arrays of numbers inside the read window
        are stepped over in a tight loop; any other goes through :meth:`skip_array`."""
        c = self.c
        width = 8 if self.wide else 4
        head = struct.Struct("<IQ" if self.wide else "<II")
        if self.nested + n > MAX_NESTED_ARRAYS:
            self._too_many_arrays(key, self.nested + n)
        if depth > MAX_ARRAY_DEPTH and n:
            self.skip_array(key, depth)  # raises: _array_start refuses the depth before reading
        done = 0
        while done < n:
            buf, at = c.buf, c.base
            p, end = c.pos - at, len(buf)
            while done < n and p + 4 + width <= end:
                item_type, count = head.unpack_from(buf, p)
                number = _NUMBER_TYPES.get(item_type)
                q = p + 4 + width + count * number[2] if number is not None else end + 1
                if q > end:
                    break
                starts.append(at + p - base)
                p = q
                done += 1
                self.nested += 1
            c.pos = at + p
            if done < n:
                starts.append(c.pos - base)
                self.skip_array(key, depth)
                done += 1

    def skip_array(self, key: str, depth: int) -> None:
        """Check an array that is an item of an array (at ``depth``) as :meth:`array` would, keeping nothing."""
        if self.nested >= MAX_NESTED_ARRAYS:
            self._too_many_arrays(key, self.nested + 1)
        self.nested += 1
        item_type, n = self._array_start(key, depth)
        if item_type in SCALAR_FORMATS:
            self.c.skip(n * SCALAR_SIZES[item_type], f"array {key!r}")
        elif item_type is ValueType.STRING:
            self.strings(n, key)  # checked (lengths, UTF-8) and dropped
        else:
            for _ in range(n):
                self.skip_array(key, depth + 1)

    def _too_many_arrays(self, key: str, total: int) -> None:
        raise GGUFError(
            f"array {key!r} at offset {self.c.pos} brings the arrays inside arrays to {total:,}, over the "
            f"{MAX_NESTED_ARRAYS:,} read from a GGUF file (llama.cpp reads none)",
            code="too_many_arrays", key=key, offset=self.c.pos, count=total, limit=MAX_NESTED_ARRAYS,
        )

    def _check_count(self, key: str, item_type: ValueType, n: int, start: int) -> None:
        need = n * self.min_size(item_type)
        self.c.fits(need, f"array {key!r} at offset {start} declares {n} items of {item_type.name.lower()}, "
                          f"at least {need} bytes", "array_too_long", key=key, offset=start, count=n)

    # --- sections ---------------------------------------------------------------------------
    def parse(self) -> GGUFHeader:
        c = self.c
        magic = c.take(4, "magic") if c.size >= 4 else c.read(0, c.size)
        if magic != MAGIC:
            raise GGUFError(f"not a GGUF file: magic {magic!r}, expected {MAGIC!r}", code="not_gguf", magic=magic)
        self.version = int(c.unpack("<I", "version")[0])
        if self.version not in VERSIONS:
            swapped = int.from_bytes(self.version.to_bytes(4, "little"), "big")
            hint = " (a big-endian GGUF file: only little-endian files are read)" if swapped in VERSIONS else ""
            raise GGUFError(f"unsupported GGUF version {self.version} (supported: 1, 2, 3){hint}",
                            code="unsupported_version", version=self.version)
        n_tensors = self.count("tensor count")
        n_kv = self.count("metadata count")
        if n_kv > MAX_METADATA_KEYS:
            raise GGUFError(
                f"metadata count {n_kv:,} is over the {MAX_METADATA_KEYS:,} keys read from a GGUF file "
                "(real files have some dozens)",
                code="too_many_keys", count=n_kv, limit=MAX_METADATA_KEYS,
            )
        kv_min = (8 if self.wide else 4) + 4 + 1  # key length, type, smallest value
        c.fits(n_kv * kv_min, f"metadata count {n_kv} cannot fit: at least {n_kv * kv_min} bytes", "count_too_large",
               count=n_kv)
        fields: dict[str, GGUFField] = {}
        duplicates: list[tuple[str, int]] = []
        for _ in range(n_kv):
            start = c.pos
            key = self.string("metadata key")
            t = self.value_type(f"type of {key!r}")
            value = self.value(t, key)
            if key in fields:
                duplicates.append((key, start))  # a layout problem (check_layout lists it); the first value stays
            else:
                fields[key] = GGUFField(key, t, value, start)
        info_min = (8 if self.wide else 4) + 4 + 4 + 8
        c.fits(n_tensors * info_min, f"tensor count {n_tensors} cannot fit: at least {n_tensors * info_min} bytes",
               "count_too_large", count=n_tensors)
        tensors = [self.tensor_info(i) for i in range(n_tensors)]
        alignment, problem = _alignment(fields)
        data_offset = -(-c.pos // alignment) * alignment
        return GGUFHeader(self.version, fields, tuple(tensors), alignment, data_offset, c.size, problem,
                          tuple(duplicates))

    def tensor_info(self, index: int) -> GGUFTensorInfo:
        c = self.c
        start = c.pos
        name = self.string(f"name of tensor #{index}")
        n_dims = int(c.unpack("<I", f"dimension count of {name!r}")[0])
        if n_dims > MAX_DIMS:
            raise GGUFError(f"tensor {name!r} has {n_dims} dimensions (at most {MAX_DIMS})", code="too_many_dims",
                            tensor=name, n_dims=n_dims)
        dim_fmt = "Q" if self.wide else "I"
        dims = tuple(int(d) for d in c.unpack(f"<{n_dims}{dim_fmt}", f"dimensions of {name!r}"))
        for d in dims:
            if d >= 2**63:  # llama.cpp reads dims as int64: a larger value is negative there
                raise GGUFError(f"tensor {name!r}: dimension {d} does not fit in int64", code="dim_overflow",
                                tensor=name, dims=dims)
        if prod(dims) >= 2**63:
            raise GGUFError(f"tensor {name!r}: element count of shape {list(dims)} overflows int64",
                            code="dim_overflow", tensor=name, dims=dims)
        type_id, offset = c.unpack("<IQ", f"type and offset of {name!r}")
        return GGUFTensorInfo(name, dims, int(type_id), int(offset), start)


def _parse_items(version: int, key: str, depth: int, raw: bytes, n: int) -> Iterator[GGUFArray]:
    """The first ``n`` items of an array of arrays in ``raw``, one after the other, from their
    bytes (checked when the file was parsed): one parser for them all."""
    parser = _Parser.over(raw, version)
    c = parser.c
    head = struct.Struct("<IQ" if version >= 2 else "<II")
    for _ in range(n):
        # An array of numbers (the common item) is cut out of the bytes directly; any other
        # item goes through the parser.
        p = c.pos
        number = _NUMBER_TYPES.get(head.unpack_from(raw, p)[0]) if p + head.size <= len(raw) else None
        if number is None:
            yield parser.array(key, depth)
            continue
        value_type, fmt, size = number
        start = p + head.size
        c.pos = end = start + head.unpack_from(raw, p)[1] * size
        yield GGUFArray(value_type, GGUFNumbers(raw[start:end], fmt))


def _alignment(fields: dict[str, GGUFField]) -> tuple[int, str | None]:
    f = fields.get("general.alignment")
    if f is None:
        return DEFAULT_ALIGNMENT, None
    if f.type is not ValueType.UINT32:
        return DEFAULT_ALIGNMENT, f"general.alignment has type {f.type.name.lower()}, expected uint32"
    a = int(f.value)
    if a == 0 or a & (a - 1):
        return DEFAULT_ALIGNMENT, f"general.alignment {a} is not a power of two"
    return a, None


def parse_gguf_header(read: Reader, size: int) -> GGUFHeader:
    """Parse the header of a GGUF file of ``size`` bytes, read through ``read(offset, n)``."""
    return _Parser(read, size).parse()


def parse_gguf_bytes(data: bytes) -> GGUFHeader:
    """Parse the header at the start of ``data`` (a whole file, or at least its header)."""
    view = memoryview(data)
    return parse_gguf_header(lambda off, n: bytes(view[off : off + n]), len(data))


__all__ = [
    "MAX_ARRAY_DEPTH",
    "MAX_DIMS",
    "MAX_METADATA_KEYS",
    "MAX_NESTED_ARRAYS",
    "GGUFArray",
    "GGUFArrayValues",
    "GGUFArrays",
    "GGUFField",
    "GGUFHeader",
    "GGUFNumbers",
    "GGUFTensorInfo",
    "array_values",
    "is_gguf",
    "parse_gguf_bytes",
    "parse_gguf_header",
    "plain_value",
    "type_name",
]
