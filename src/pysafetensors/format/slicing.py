"""Turn an index expression (ints, slices with steps, one ``...``) into byte ranges.

Semantics follow upstream's non-torch slicing: negative ints wrap, steps must be >= 1, and
an index or bound outside the dimension is an error rather than a clamp.  ``clamp=True``
gives Python/torch slice semantics (bounds clamp) for the torch face.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from math import prod
from typing import Any

from ..errors import MisalignedSubByte, SliceError, SliceIndexTypeError
from .dtypes import DType

_ELLIPSIS_ERROR = "Only one ellipsis (...) is allowed in slice index"


@dataclass(frozen=True)
class SlicePlan:
    """A normalised index: per-dim (start, count, step, keep) and the result shape."""

    source_shape: tuple[int, ...]
    dims: tuple[tuple[int, int, int, bool], ...]  # start, count, step, keep-axis
    shape: tuple[int, ...]
    bits: int

    @property
    def nelements(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.nelements * self.bits // 8

    def numpy_index(self) -> tuple[Any, ...]:
        """The same selection as a tuple of ints and slices, for a full-tensor view."""
        out: list[Any] = []
        for start, count, step, keep in self.dims:
            out.append(slice(start, start + count * step, step) if keep else start)
        return tuple(out)

    def element_ranges(self) -> Iterator[tuple[int, int]]:
        """(first element, element count) runs in result order, adjacent runs merged."""
        if self.nelements == 0:
            return
        shape = self.source_shape
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        # k: last axis that is not a full, step-1 range; everything after it is contiguous.
        k = len(shape) - 1
        while k >= 0:
            start, count, step, _ = self.dims[k]
            if not (start == 0 and count == shape[k] and step == 1):
                break
            k -= 1
        if k < 0:
            yield (0, self.nelements)
            return
        inner = strides[k]
        start_k, count_k, step_k, _ = self.dims[k]
        if step_k == 1:
            runs = [(start_k * inner, count_k * inner)]
        else:
            runs = [((start_k + j * step_k) * inner, inner) for j in range(count_k)]
        outer = [range(s, s + c * st, st) for s, c, st, _ in self.dims[:k]]
        pending: tuple[int, int] | None = None
        for idx in itertools.product(*outer):
            base = sum(i * strides[a] for a, i in enumerate(idx))
            for off, length in runs:
                begin = base + off
                if pending is not None and pending[0] + pending[1] == begin:
                    pending = (pending[0], pending[1] + length)
                    continue
                if pending is not None:
                    yield pending
                pending = (begin, length)
        if pending is not None:
            yield pending

    def byte_ranges(self, name: str = "") -> Iterator[tuple[int, int]]:
        """(begin, end) byte ranges relative to the tensor start, in result order."""
        bits = self.bits
        for first, count in self.element_ranges():
            b0, b1 = first * bits, (first + count) * bits
            if b0 % 8 or b1 % 8:
                raise MisalignedSubByte(
                    "The slice is slicing for subbytes dtypes, and the slice does not end up at "
                    f"a byte boundary, this is invalid. (tensor {name!r}, elements "
                    f"{first}..{first + count} of {bits}-bit values)",
                    tensor=name,
                )
            yield b0 // 8, b1 // 8


def _fmt_item(item: Any) -> str:
    if item is Ellipsis:
        return "..."
    if isinstance(item, slice):
        text = f"{'' if item.start is None else item.start}:{'' if item.stop is None else item.stop}"
        return text + (f":{item.step}" if item.step is not None and item.step != 1 else "")
    return repr(item)


def format_index(index: Any) -> str:
    items = index if isinstance(index, tuple) else (index,)
    return "[" + ", ".join(_fmt_item(i) for i in items) + "]"


def _as_int(value: Any) -> int | None:
    if isinstance(value, int):  # bool included: upstream reads True/False as 1/0
        return value
    try:
        import operator

        return operator.index(value)
    except TypeError:
        return None


def is_full_index(index: Any, ndim: int) -> bool:
    """Whether ``index`` selects a whole ``ndim``-dim tensor as it is: ``...``, ``:`` (on at
    least one dim), ``()``, or a tuple of at most ``ndim`` plain ``:`` and at most one ``...``.

    What every framework's slicing (``plan_slice``, clamped or not) turns into the tensor
    itself, so a caller may read the whole tensor instead of planning a slice.
    """
    if index is Ellipsis:
        return True
    if type(index) is slice:
        return ndim > 0 and index.start is None and index.stop is None and index.step is None
    if type(index) is not tuple:
        return False
    ellipses = 0
    for item in index:
        if item is Ellipsis:
            ellipses += 1
        elif type(item) is not slice or item.start is not None or item.stop is not None or item.step is not None:
            return False
    return ellipses <= 1 and len(index) - ellipses <= ndim


def plan_slice(shape: tuple[int, ...], dtype: DType, index: Any, *, clamp: bool = False, name: str = "") -> SlicePlan:
    """Normalise ``index`` against ``shape``; raise SliceError with upstream wording."""
    if isinstance(index, list):
        if index:
            raise SliceError("Non empty lists are not implemented", tensor=name)
        index = slice(0, 0)  # an empty index list selects nothing along axis 0 (as numpy)
    items = index if isinstance(index, tuple) else (index,)
    # Upstream's order: the ellipsis count, then each item in turn, then the item count, then bounds.
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise SliceError(_ELLIPSIS_ERROR, tensor=name)
    at = items.index(Ellipsis) if Ellipsis in items else None
    resolved = list(items)  # negative ints resolved: upstream's messages show them so
    for pos, item in enumerate(items):
        if isinstance(item, slice):
            for part in (item.start, item.stop, item.step):
                if part is not None and _as_int(part) is None:
                    raise SliceIndexTypeError(
                        f"'{type(part).__name__}' object cannot be interpreted as an integer", tensor=name
                    )
            step = 1 if item.step is None else _as_int(item.step)
            if step is None or step < 1:
                raise SliceError(f"Slice step must be a positive integer, got {item.step}", tensor=name)
        elif item is not Ellipsis:
            i = _as_int(item)
            if i is None:
                raise SliceError(
                    f"Unsupported slice index at position {pos}: expected slice, int, or ellipsis",
                    tensor=name,
                )
            if i < 0:  # upstream resolves negative ints here, against the axis the item lands on
                axis = pos if at is None or pos < at else len(shape) - (len(items) - pos)
                size = shape[axis] if 0 <= axis < len(shape) else 0
                if i + size < 0:
                    raise SliceError(f"Invalid index {i} for dimension {axis} of size {size}", tensor=name)
                resolved[pos] = i + size
    explicit = [i for i in items if i is not Ellipsis]
    # Messages show the index as upstream does: negatives resolved, the ellipsis expanded.
    if at is not None:
        resolved[at : at + 1] = [slice(None)] * max(0, len(shape) - len(explicit))
    where = f"Error during slicing {format_index(tuple(resolved))} with shape {list(shape)}"
    if len(explicit) > len(shape):
        raise SliceError(f"{where}: more slicing indexes than dimensions in tensor", tensor=name)
    if at is not None:
        fill = (slice(None),) * (len(shape) - len(explicit))
        full = tuple(items[:at]) + fill + tuple(items[at + 1 :])
    else:
        full = tuple(explicit) + (slice(None),) * (len(shape) - len(explicit))

    dims: list[tuple[int, int, int, bool]] = [(0, 0, 1, True)] * len(shape)
    # Bounds are checked last axis first, so the error names the axis upstream names.
    for axis in reversed(range(len(shape))):
        item, size = full[axis], shape[axis]
        if isinstance(item, slice):
            step = 1 if item.step is None else _as_int(item.step)
            assert step is not None and step >= 1
            if clamp:
                start, stop, _ = slice(item.start, item.stop, 1).indices(size)
            else:
                start = _bound(item.start, 0, size, axis, where, name)
                stop = _bound(item.stop, size, size, axis, where, name)
                # Upstream names the start when it is past the end, else the last index asked.
                if start > size or (start == size and stop > start):
                    raise _out_of_range(where, start, axis, size, name)
                if stop > size:
                    raise _out_of_range(where, stop - 1, axis, size, name)
            count = max(0, -(-(stop - start) // step))
            dims[axis] = (start, count, step, True)
        else:
            i = _as_int(item)
            assert i is not None
            if i < 0:
                if i + size < 0:
                    raise SliceError(f"Invalid index {i} for dimension {axis} of size {size}", tensor=name)
                i += size
            if i >= size:
                raise SliceError(
                    f"{where}: index {i} out of bounds for tensor dimension #{axis} of size {size}",
                    tensor=name,
                )
            dims[axis] = (i, 1, 1, False)
    out_shape = tuple(count for _, count, _, keep in dims if keep)
    return SlicePlan(tuple(shape), tuple(dims), out_shape, dtype.bits)


def _out_of_range(where: str, index: int, axis: int, size: int, name: str) -> SliceError:
    return SliceError(
        f"{where}: index {index} out of bounds for tensor dimension #{axis} of size {size}", tensor=name
    )


def _bound(value: Any, default: int, size: int, axis: int, where: str, name: str) -> int:
    """A slice bound as an offset in ``[0, inf)``; negative bounds wrap once, as in Python."""
    if value is None:
        return default
    v = _as_int(value)
    if v is None:
        raise SliceError(f"{where}: slice bounds must be integers, got {value!r}", tensor=name)
    if v < 0:
        if v + size < 0:
            raise _out_of_range(where, v, axis, size, name)
        v += size
    return v
