"""Plan where each tensor goes in a file: upstream's order, offsets and header padding."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import InvalidMetadata, MisalignedSubByte, SerializeError
from .dtypes import DType
from .header import METADATA_KEY, N_LEN, encode_header


@dataclass(frozen=True)
class LayoutEntry:
    name: str
    dtype: DType
    shape: tuple[int, ...]
    begin: int  # offset in the data region
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


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


def plan_layout(
    specs: Iterable[tuple[str, DType, Sequence[int]]],
    metadata: Mapping[str, str] | None = None,
    alignment: int = 8,
) -> WriteLayout:
    """Order tensors as upstream does (dtype rank descending, then name) and place them.

    ``alignment`` pads the header so the data region starts at a multiple of it; the
    default 8 gives files byte-identical to upstream's.
    """
    if alignment < 8 or alignment % 8:
        raise SerializeError(f"alignment must be a positive multiple of 8, got {alignment}")
    meta = check_metadata(metadata)
    items = []
    seen: set[str] = set()
    for name, dtype, shape in specs:
        if not isinstance(name, str):
            raise InvalidMetadata(f"tensor names must be str, got {type(name).__name__}: {name!r}")
        if name == METADATA_KEY:
            raise InvalidMetadata(f"{METADATA_KEY!r} is reserved and cannot name a tensor")
        if name in seen:
            raise SerializeError(f"tensor name {name!r} appears twice", tensor=name)
        seen.add(name)
        shape_t = tuple(int(d) for d in shape)
        if any(d < 0 for d in shape_t):
            raise SerializeError(f"tensor {name!r} has a negative dimension: {list(shape_t)}", tensor=name)
        n = 1
        for d in shape_t:
            n *= d
        if (n * dtype.bits) % 8:
            raise MisalignedSubByte(
                f"tensor {name!r}: {n} x {dtype.code} is {n * dtype.bits} bits, not a whole "
                "number of bytes",
                tensor=name,
            )
        items.append((name, dtype, shape_t, n * dtype.bits // 8))
    items.sort(key=lambda it: (-it[1].rank, it[0]))
    entries = []
    offset = 0
    for name, dtype, shape_t, nbytes in items:
        entries.append(LayoutEntry(name, dtype, shape_t, offset, offset + nbytes))
        offset += nbytes
    header = encode_header(
        [(e.name, e.dtype.code, list(e.shape), e.begin, e.end) for e in entries], meta, alignment
    )
    return WriteLayout(tuple(entries), header)
