"""What every reader returns: a tree of containers whose tensor leaves read their bytes lazily."""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..errors import CorruptCheckpoint
from ..format.dtypes import DType


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


@dataclass
class Checkpoint:
    """A loaded source: ``tree`` holds dicts/lists and tensor leaves."""

    kind: str  # "torch-zip", "torch-legacy", "npz", "npy"
    tree: Any
    format_tag: str | None  # the metadata "format" value written for this kind
    storage_bytes: Callable[[list[Any]], int]  # source bytes behind a set of leaves
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
