"""Parse a GGUF header from any byte source, bounded before every allocation.

The parser reads through a ``read(offset, length) -> bytes`` callable, so the same code serves
local files, HTTP Range requests and fsspec URLs, and it reads only the header (metadata and
tensor descriptions), never tensor data.  Every count and length in the file is checked against
the bytes that remain before anything is allocated or read for it: a 2^63-item tokenizer array
in a 1 KB file is refused at once, not after the process runs out of memory.

Structural problems that stop parsing (wrong magic, a length past the end, an unknown value
type) raise :class:`~pysafetensors.errors.GGUFError`.  Problems of the layout the header
describes (misaligned or overlapping tensor data, unknown GGML types, duplicate names) are left
to :func:`pysafetensors.gguf.check.check_layout`, which lists every one.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any, overload

from ..errors import GGUFError
from .types import (
    DEFAULT_ALIGNMENT,
    GGML_TYPES,
    MAGIC,
    SCALAR_FORMATS,
    SCALAR_SIZES,
    VALUE_TYPE_NAMES,
    VERSIONS,
    GGMLType,
    ValueType,
    ggml_type_name,
)

#: llama.cpp's GGML_MAX_DIMS: a tensor has at most four dimensions.
MAX_DIMS = 4
#: arrays of arrays nest at most this deep (llama.cpp reads none; gguf-py any).
MAX_ARRAY_DEPTH = 8
#: bytes asked for at a time; doubles while the header keeps going (remote reads stay few).
#: The first read stays inside the 100,001 bytes a remote source fetches when it is opened.
_FIRST_READ = 64 * 1024
_MAX_READ = 16 * 1024 * 1024

Reader = Callable[[int, int], bytes]


class GGUFNumbers(Sequence[Any]):
    """The items of a numeric or boolean metadata array, kept as the file's little-endian bytes.

    A Python int or float per item would take some 18 times the bytes the file spends on it (a
    tokenizer's scores, a crafted 10 MB ``uint8`` array); here the items cost their own size.
    It reads like a read-only list: an index gives the value (``int``, ``float`` widened from
    float32, ``bool``), a slice a list, iteration the values one at a time, ``==`` compares
    with any sequence item by item; :meth:`tolist` gives them all as Python values.
    """

    __slots__ = ("_raw", "_size", "_view", "format")

    def __init__(self, raw: bytes, fmt: str) -> None:
        self._raw = raw
        self.format = fmt  # a struct code without byte order: "B", "i", "f", "?"...
        self._size = struct.calcsize("<" + fmt)
        # A typed view where the machine reads GGUF's byte order and sizes natively (every
        # little-endian platform); elsewhere items are unpacked one by one.
        native = sys.byteorder == "little" and struct.calcsize(fmt) == self._size
        self._view: memoryview | None = memoryview(raw).cast(fmt) if native else None  # type: ignore[call-overload]

    @property
    def nbytes(self) -> int:
        return len(self._raw)

    def __len__(self) -> int:
        return len(self._raw) // self._size

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            if self._view is not None:
                return self._view[index].tolist()
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("GGUF array index out of range")
        if self._view is not None:
            return self._view[i]
        return struct.unpack_from("<" + self.format, self._raw, i * self._size)[0]

    def __iter__(self) -> Iterator[Any]:
        if self._view is not None:
            return iter(self._view)
        return (v for (v,) in struct.iter_unpack("<" + self.format, self._raw))

    def tolist(self) -> list[Any]:
        return self._view.tolist() if self._view is not None else list(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes, bytearray)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable-list semantics: like the list it stands for

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self[:8]))
        return f"GGUFNumbers([{shown}{', ...' if len(self) > 8 else ''}], format={self.format!r}, len={len(self)})"


@dataclass(frozen=True)
class GGUFArray:
    """A metadata array: the type of its items and the items.

    Numbers and booleans are a :class:`GGUFNumbers` (compact), strings a list of str, nested
    arrays a list of GGUFArrays.
    """

    item_type: ValueType
    items: Sequence[Any]

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
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


def type_name(value_type: ValueType, value: Any = None) -> str:
    """A value type as text; an array's names its items' type (a nested array's, its first item's)."""
    if value_type is ValueType.ARRAY and isinstance(value, GGUFArray):
        first = value.items[0] if value.item_type is ValueType.ARRAY and value.items else None
        return f"array[{type_name(value.item_type, first)}]"
    return VALUE_TYPE_NAMES[value_type]


def plain_value(value: Any) -> Any:
    """A metadata value as plain Python: GGUFArrays become lists (recursively).  A numeric
    array then takes a Python object per item: the tools keep :class:`GGUFNumbers` instead."""
    if isinstance(value, GGUFArray):
        if value.item_type is ValueType.ARRAY:
            return [plain_value(v) for v in value.items]
        items = value.items
        return items.tolist() if isinstance(items, GGUFNumbers) else list(items)
    return value


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

    def remaining(self) -> int:
        return self.size - self.pos

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
            self.buf, self.base, start = data, self.pos, 0
            self.chunk = min(self.chunk * 2, _MAX_READ)
        self.pos += n
        return self.buf[start : start + n]

    def unpack(self, fmt: str, what: str) -> Any:
        raw = self.take(struct.calcsize(fmt), what)
        return struct.unpack(fmt, raw)


class _Parser:
    def __init__(self, read: Reader, size: int) -> None:
        self.c = _Cursor(read, size)
        self.version = 0

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
        if n > self.c.remaining():
            raise GGUFError(
                f"{what}: string length {n} at offset {start} runs past the end of the file "
                f"({self.c.remaining()} bytes remain)",
                code="string_too_long",
                offset=start,
                length=n,
            )
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

    def array(self, key: str, depth: int) -> GGUFArray:
        if depth > MAX_ARRAY_DEPTH:
            raise GGUFError(f"{key!r}: arrays nested more than {MAX_ARRAY_DEPTH} deep", code="nesting", key=key)
        item_type = self.value_type(f"item type of array {key!r}")
        start = self.c.pos
        n = self.count(f"length of array {key!r}")
        need = n * self.min_size(item_type)
        if need > self.c.remaining():
            raise GGUFError(
                f"array {key!r} at offset {start} declares {n} items of {item_type.name.lower()}, "
                f"at least {need} bytes, but only {self.c.remaining()} bytes remain in the file",
                code="array_too_long",
                key=key,
                offset=start,
                count=n,
            )
        if item_type in SCALAR_FORMATS:
            size = SCALAR_SIZES[item_type]
            raw = self.c.take(n * size, f"array {key!r}")
            return GGUFArray(item_type, GGUFNumbers(bytes(raw), SCALAR_FORMATS[item_type]))
        if item_type is ValueType.STRING:
            return GGUFArray(item_type, self.strings(n, key))
        return GGUFArray(item_type, [self.value(item_type, key, depth) for _ in range(n)])

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
        kv_min = (8 if self.wide else 4) + 4 + 1  # key length, type, smallest value
        if n_kv * kv_min > c.remaining():
            raise GGUFError(
                f"metadata count {n_kv} cannot fit in the {c.remaining()} bytes that remain",
                code="count_too_large", count=n_kv,
            )
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
        if n_tensors * info_min > c.remaining():
            raise GGUFError(
                f"tensor count {n_tensors} cannot fit in the {c.remaining()} bytes that remain",
                code="count_too_large", count=n_tensors,
            )
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
    "MAX_DIMS",
    "GGUFArray",
    "GGUFField",
    "GGUFHeader",
    "GGUFNumbers",
    "GGUFTensorInfo",
    "is_gguf",
    "parse_gguf_bytes",
    "parse_gguf_header",
    "plain_value",
    "type_name",
]
