"""What every reader returns: a tree of containers whose tensor leaves read their bytes lazily."""

from __future__ import annotations

import mmap
import os
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import CorruptCheckpoint
from ..format.dtypes import DType
from .limits import Budget


class SourceTensor(Protocol):
    """A tensor leaf: header facts, a tie key, and its bytes (uint8, C order, little-endian)."""

    dtype: DType

    @property
    def out_shape(self) -> tuple[int, ...]: ...

    @property
    def nbytes(self) -> int: ...

    def tie_key(self) -> tuple[Any, ...] | None: ...

    def read(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Unconvertible:
    """A leaf that unpickled fine but cannot be written (a complex128 tensor...).

    It only fails the conversion when it is among the tensors selected for writing.
    """

    reason: str
    error: Callable[[str], Exception]


class Pending:
    """A tree node whose meaning is known only once unpickling is over (a numpy array, which
    BUILD fills in after it was created): :func:`settle` turns it into what it stands for."""

    def settled(self) -> Any:
        raise NotImplementedError


def settle(node: Any) -> Any:
    return node.settled() if isinstance(node, Pending) else node


@dataclass
class Checkpoint:
    """A loaded source: ``tree`` holds dicts/lists and tensor leaves.

    ``budget`` is what the source may still cost (see :mod:`.limits`); its ``source_size`` is
    the file's real size in bytes.
    """

    kind: str  # "torch-zip", "torch-legacy", "npz", "npy"
    tree: Any
    format_tag: str | None  # the metadata "format" value written for this kind
    storage_bytes: Callable[[list[Any]], int]  # source bytes behind a set of leaves
    budget: Budget
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        while self._closers:
            try:
                self._closers.pop()()
            except BufferError:
                pass  # arrays still view the map; it is unmapped when they are collected


class MappedFile:
    """A read-only map of a whole file, handing out uint8 views (bounds-checked)."""

    def __init__(self, fileobj: Any, label: str) -> None:
        self.label = label
        self.size = os.fstat(fileobj.fileno()).st_size
        self._map = mmap.mmap(fileobj.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None

    def view(self, offset: int, length: int, what: str) -> np.ndarray:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CorruptCheckpoint(
                f"{self.label}: {what} needs bytes [{offset}, {offset + length}) but the file has "
                f"{self.size} bytes (truncated?)",
                offset=offset,
                length=length,
            )
        if length == 0 or self._map is None:
            return np.empty(0, dtype=np.uint8)
        return np.frombuffer(self._map, dtype=np.uint8, count=length, offset=offset)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length


def zip_data_start(mapped: MappedFile, info: zipfile.ZipInfo, label: str) -> int:
    """Where a member's (possibly compressed) bytes begin, from its local header."""
    what = f"entry {info.filename!r}"
    header = mapped.view(info.header_offset, _LOCAL_HEADER.size, f"local header of {what}")
    sig, name_len, extra_len = _LOCAL_HEADER.unpack(header.tobytes())
    if sig != b"PK\x03\x04":
        raise CorruptCheckpoint(f"{label}: bad local header for {what} at byte {info.header_offset}")
    return int(info.header_offset) + _LOCAL_HEADER.size + name_len + extra_len


def check_member(mapped: MappedFile, info: zipfile.ZipInfo, label: str, budget: Budget) -> None:
    """Before a member is read: its bytes lie inside the real file, and what reading it
    allocates (its declared size, which inflating a compressed member produces) is within the
    budget.  A 1 MB deflated member can declare 1 GiB; that is refused here, not inflated."""
    mapped.view(zip_data_start(mapped, info, label), info.compress_size, f"entry {info.filename!r}")
    budget.charge(max(info.file_size, info.compress_size), f"reading archive entry {info.filename!r}")
