"""Plan where each tensor goes in a file: upstream's order, offsets and header padding."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import InvalidMetadata, InvalidShape, MisalignedSubByte, SerializeError
from .dtypes import DType
from .header import HEADER_CAP, METADATA_KEY, N_LEN, TensorInfo, encode_header

T = TypeVar("T")

# The largest file a save may plan: file offsets (off_t) are signed 64-bit.
MAX_FILE_SIZE = (1 << 63) - 1


# A planned tensor's place in the file: the record a parsed header gives for it (name, dtype,
# shape, begin and end in the data region), so a tensor's entry is defined once.
LayoutEntry = TensorInfo


@dataclass(frozen=True)
class WriteLayout:
    """Everything needed to write a file: the header bytes and each tensor's place."""

    entries: tuple[LayoutEntry, ...]
    header: bytes  # the padded JSON, without the 8-byte length prefix

    @property
    def prefix(self) -> bytes:
        """Length prefix plus header: the first ``data_start`` bytes of the file."""
        return len(self.header).to_bytes(N_LEN, "little") + self.header

    @property
    def data_start(self) -> int:
        return N_LEN + len(self.header)

    @property
    def total_size(self) -> int:
        return self.data_start + (self.entries[-1].end if self.entries else 0)


def check_metadata(metadata: object) -> dict[str, str] | None:
    """Validate metadata as str -> str (None allowed) and return a copy in the given order."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise InvalidMetadata(
            f"metadata must be a dict of str to str, got {type(metadata).__name__}"
        )
    out: dict[str, str] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidMetadata(
                f"metadata must map str to str; entry {key!r}: {value!r} has "
                f"{type(key).__name__} -> {type(value).__name__} (all values are strings: "
                "use json.dumps or str() for others)",
                key=key,
            )
        out[key] = value
    return out


def as_shape(shape: Any, name: str = "") -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative ints, or InvalidShape naming the tensor and the value.

    A shape is a sequence (list, tuple, torch.Size...) of integers: a str such as ``"12"`` is
    not taken as ``[1, 2]``, nor floats (``1.5``), numeric strings or bools as dimensions.
    Integer types other than int (numpy ints) are accepted through ``__index__``.
    """
    who = f"tensor {name!r}: " if name else ""
    if isinstance(shape, (str, bytes, bytearray, Mapping)) or not isinstance(shape, Iterable):
        raise InvalidShape(f"{who}shape must be a sequence of ints, got {type(shape).__name__} {shape!r}",
                           tensor=name, shape=shape)
    shape = tuple(shape)
    dims = []
    for d in shape:
        if isinstance(d, bool):
            raise InvalidShape(f"{who}shape {list(shape)!r} has a bool dimension {d!r}; dimensions are ints",
                               tensor=name, shape=shape)
        try:
            dims.append(operator.index(d))
        except TypeError:
            raise InvalidShape(
                f"{who}shape {list(shape)!r} has a dimension {d!r} of type {type(d).__name__}; dimensions are ints",
                tensor=name, shape=shape,
            ) from None
    if any(d < 0 for d in dims):
        raise InvalidShape(f"{who}shape {dims} has a negative dimension", tensor=name, shape=tuple(dims))
    return tuple(dims)


def checked_name(name: object) -> str:
    """``name`` if it may name a tensor: a str other than ``__metadata__``."""
    if not isinstance(name, str):
        raise InvalidMetadata(f"tensor names must be str, got {type(name).__name__}: {name!r}")
    if name == METADATA_KEY:
        raise InvalidMetadata(f"{METADATA_KEY!r} is reserved and cannot name a tensor")
    return name


def _spec_name(spec: tuple[str, DType, Sequence[int]]) -> str:
    return checked_name(spec[0])


def unique_by_name(items: Iterable[T], name_of: Callable[[T], str]) -> dict[str, T]:
    """``items`` keyed by name, in order; a name given twice is a SerializeError naming it."""
    out: dict[str, T] = {}
    for item in items:
        name = name_of(item)
        if name in out:
            raise SerializeError(f"tensor name {name!r} appears twice", tensor=name)
        out[name] = item
    return out


def check_alignment(alignment: Any) -> int:
    """``alignment`` if it is a multiple of 8 whose padding can still give a readable header."""
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 8 or alignment % 8:
        raise SerializeError(f"alignment must be a positive multiple of 8, got {alignment!r}", alignment=alignment)
    if alignment > HEADER_CAP:
        # The padding alone would take the header past the cap every reader enforces.
        raise SerializeError(
            f"alignment {alignment} is too large: the header padded to it would exceed the "
            f"{HEADER_CAP:,}-byte header limit readers accept",
            alignment=alignment,
        )
    return alignment


def plan_layout(
    specs: Iterable[tuple[str, DType, Sequence[int]]],
    metadata: Mapping[str, str] | None = None,
    alignment: int = 8,
    *,
    names_checked: bool = False,
) -> WriteLayout:
    """Order tensors as upstream does (dtype rank descending, then name) and place them.

    ``alignment`` pads the header so the data region starts at a multiple of it; the
    default 8 gives files byte-identical to upstream's.  ``names_checked``: the caller has
    already put every name through :func:`checked_name` and :func:`unique_by_name` (a sharded
    save checks the whole set once, then plans each shard), so they are not checked again.
    """
    check_alignment(alignment)
    meta = check_metadata(metadata)
    items = []
    for name, dtype, shape in specs if names_checked else unique_by_name(specs, _spec_name).values():
        shape_t = as_shape(shape, name)
        n = 1
        for d in shape_t:
            n *= d
        if (n * dtype.bits) % 8:
            raise MisalignedSubByte(
                reason="The slice is slicing for subbytes dtypes, and the slice does not end up at a byte "
                "boundary, this is invalid.",  # upstream's words (a 0-d float4_e2m1fn_x2 among others)
                detail=f"tensor {name!r}: {n} x {dtype.code} is {n * dtype.bits} bits, not a whole number of bytes",
                prefix="",
                tensor=name,
            )
        items.append((name, dtype, shape_t, n * dtype.bits // 8))
    items.sort(key=lambda it: (-it[1].rank, it[0]))
    entries = []
    offset = 0
    for name, dtype, shape_t, nbytes in items:
        if offset + nbytes > MAX_FILE_SIZE:
            raise SerializeError(
                f"tensor {name!r}: {dtype.code} {list(shape_t)} is {nbytes:,} bytes, which takes the file's "
                f"data past {MAX_FILE_SIZE:,} bytes, the largest file offset there is",
                tensor=name, nbytes=nbytes,
            )
        entries.append(LayoutEntry(name, dtype, shape_t, offset, offset + nbytes))
        offset += nbytes
    header = encode_header(
        [(e.name, e.dtype.code, list(e.shape), e.begin, e.end) for e in entries], meta, alignment
    )
    if len(header) > HEADER_CAP:
        raise SerializeError(
            f"the header would be {len(header):,} bytes, over the {HEADER_CAP:,}-byte limit readers "
            "accept (too many tensors, long names or large metadata)",
            header_size=len(header),
        )
    if N_LEN + len(header) + offset > MAX_FILE_SIZE:
        raise SerializeError(
            f"the file would be {N_LEN + len(header) + offset:,} bytes, past {MAX_FILE_SIZE:,}, "
            "the largest file offset there is",
            nbytes=offset,
        )
    return WriteLayout(tuple(entries), header)
