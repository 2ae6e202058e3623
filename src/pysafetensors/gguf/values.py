"""GGUF metadata values as parsing keeps them: compact, read like lists.

A numeric or boolean array is its own little-endian bytes (:class:`GGUFNumbers`); an array of
arrays is its bytes plus one offset per item (:class:`GGUFArrays`), each item parsed again from
them when asked for.  A Python object per item would take some 18 (numbers) to 40 (empty
arrays) times the bytes the file spends on it.  :func:`array_values` gives an array's items as
the tools show them, :func:`plain_value` as plain Python lists.
"""

from __future__ import annotations

import struct
import sys
from array import array as _array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, overload

from .types import ValueType


class _ReadOnlyList(Sequence[Any]):
    """What the compact array types share: list-like indexing (``_item`` gets a checked,
    non-negative index), ``==`` with any sequence item by item, and no hash (like the list
    each stands for)."""

    __slots__ = ()

    def _item(self, i: int) -> Any:
        raise NotImplementedError

    def _slice(self, index: slice) -> list[Any]:
        return [self._item(i) for i in range(*index.indices(len(self)))]

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self._slice(index)
        n = len(self)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("GGUF array index out of range")
        return self._item(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes, bytearray)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]


class GGUFNumbers(_ReadOnlyList):
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

    def _slice(self, index: slice) -> list[Any]:
        return self._view[index].tolist() if self._view is not None else super()._slice(index)

    def _item(self, i: int) -> Any:
        if self._view is not None:
            return self._view[i]
        return struct.unpack_from("<" + self.format, self._raw, i * self._size)[0]

    def __iter__(self) -> Iterator[Any]:
        if self._view is not None:
            return iter(self._view)
        return (v for (v,) in struct.iter_unpack("<" + self.format, self._raw))

    def tolist(self) -> list[Any]:
        return self._view.tolist() if self._view is not None else list(self)

    def __repr__(self) -> str:
        shown = ", ".join(map(repr, self[:8]))
        return f"GGUFNumbers([{shown}{', ...' if len(self) > 8 else ''}], format={self.format!r}, len={len(self)})"


@dataclass(frozen=True, slots=True)
class GGUFArray:
    """A metadata array: the type of its items and the items.

    Numbers and booleans are a :class:`GGUFNumbers` (compact), strings a list of str, nested
    arrays a :class:`GGUFArrays` (a sequence of GGUFArrays, made when read).
    """

    item_type: ValueType
    items: Sequence[Any]

    def __len__(self) -> int:
        return len(self.items)


class GGUFArrays(_ReadOnlyList):
    """The items of an array of arrays, kept as the file's bytes and one offset per item.

    A list of :class:`GGUFArray` objects takes some 40 times the 12 bytes an empty array takes
    in the file; here an item costs its bytes plus a 4-byte offset, and ``parse_items(data, n)``
    makes the ``n`` items ``data`` starts with again from them (they were checked when the file
    was read) each time they are asked for: one by index, all of them in one pass when iterated.
    It reads like a read-only list of GGUFArrays; ``==`` compares with any sequence item by item.
    """

    __slots__ = ("_parse_items", "_raw", "_starts")

    def __init__(self, raw: bytes, starts: _array[int],
                 parse_items: Callable[[bytes, int], Iterator[GGUFArray]]) -> None:
        self._raw = raw
        self._starts = starts  # where each item starts in ``raw``
        self._parse_items = parse_items

    @property
    def nbytes(self) -> int:
        return len(self._raw)

    def __len__(self) -> int:
        return len(self._starts)

    def _item(self, i: int) -> GGUFArray:
        start = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self) else len(self._raw)
        return next(self._parse_items(self._raw[start:end], 1))

    def __iter__(self) -> Iterator[GGUFArray]:
        return self._parse_items(self._raw, len(self))

    def __repr__(self) -> str:
        return f"GGUFArrays(len={len(self)}, nbytes={self.nbytes})"


class GGUFArrayValues(_ReadOnlyList):
    """An array of arrays as the tools show it: each item's :func:`array_values`, made when read."""

    __slots__ = ("_arrays",)

    def __init__(self, arrays: Sequence[GGUFArray]) -> None:
        self._arrays = arrays

    def __len__(self) -> int:
        return len(self._arrays)

    def _item(self, i: int) -> Any:
        return array_values(self._arrays[i])

    def __iter__(self) -> Iterator[Any]:
        return (array_values(a) for a in self._arrays)

    def __repr__(self) -> str:
        return f"GGUFArrayValues(len={len(self)})"


def joined_text(items: Iterable[Any], render: Callable[[Any], str], separator: str, step: int = 4096) -> str:
    """``separator.join(map(render, items))``, the items taken ``step`` at a time from one
    iterator (an array of arrays makes each item as it goes: one pass, a bounded number of
    them alive), their texts joined per step."""
    it = iter(items)
    parts: list[str] = []
    while True:
        part = list(map(render, islice(it, step)))
        if not part:
            return separator.join(parts)
        parts.append(separator.join(part))


def array_values(value: GGUFArray) -> Sequence[Any]:
    """An array's items as the tools hold them, without a Python object per number or per
    nested array: numbers and booleans a :class:`GGUFNumbers`, strings the list of str, arrays
    of arrays a :class:`GGUFArrayValues` (each item the same, made when read)."""
    if value.item_type is ValueType.ARRAY:
        return GGUFArrayValues(value.items)
    return value.items


def type_name(value_type: ValueType, value: Any = None) -> str:
    """A value type as text; an array's names its items' type (a nested array's, its first item's)."""
    if value_type is ValueType.ARRAY and isinstance(value, GGUFArray):
        first = value.items[0] if value.item_type is ValueType.ARRAY and value.items else None
        return f"array[{type_name(value.item_type, first)}]"
    return value_type.name.lower()


def plain_value(value: Any) -> Any:
    """A metadata value as plain Python: GGUFArrays become lists (recursively).  A numeric
    array then takes a Python object per item: the tools keep :class:`GGUFNumbers` instead."""
    if isinstance(value, GGUFArray):
        if value.item_type is ValueType.ARRAY:
            return [plain_value(v) for v in value.items]
        items = value.items
        return items.tolist() if isinstance(items, GGUFNumbers) else list(items)
    return value



__all__ = ["GGUFArray", "GGUFArrayValues", "GGUFArrays", "GGUFNumbers", "array_values", "joined_text", "plain_value",
           "type_name"]
