"""What every reader returns: a tree of containers whose tensor leaves read their bytes lazily."""

from __future__ import annotations

import io
import struct
import zipfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

import numpy as np

from ..errors import CorruptCheckpoint
from ..format.dtypes import DType
from ..io.protocols import ByteSource, ViewSource, capabilities
from .limits import Budget


class SourceTensor(ABC):
    """A tensor leaf: header facts, a tie key, and its bytes (uint8, C order, little-endian).
    Every reader's leaf class derives from it, so the tree walk tells leaves by type."""

    dtype: DType

    @property
    @abstractmethod
    def out_shape(self) -> tuple[int, ...]: ...

    @property
    @abstractmethod
    def nbytes(self) -> int: ...

    @abstractmethod
    def tie_key(self) -> tuple[Any, ...] | None: ...

    @abstractmethod
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


class SourceBytes:
    """The checkpoint file's bytes, through the source :func:`pysafetensors.io.open_source` chose
    for it: uint8 views where the source has them (a map: zero copy), else fresh buffers filled
    by positional reads.  Every range is checked against the file's real size first; arrays
    handed out are read-only.
    """

    def __init__(self, source: ByteSource, label: str) -> None:
        self.source = source
        self.label = label
        self.size = source.size
        self._views = cast(ViewSource, source) if capabilities(source).view else None

    def check(self, offset: int, length: int, what: str) -> None:
        """Raise CorruptCheckpoint unless ``[offset, offset + length)`` lies inside the file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CorruptCheckpoint(
                f"{self.label}: {what} needs bytes [{offset}, {offset + length}) but the file has "
                f"{self.size} bytes (truncated?)",
                offset=offset,
                length=length,
            )

    def read(self, offset: int, length: int, what: str) -> np.ndarray:
        """The bytes ``[offset, offset + length)`` as a read-only uint8 array (bounds-checked)."""
        self.check(offset, length, what)
        if length == 0:
            return np.empty(0, dtype=np.uint8)
        if self._views is not None:
            data = np.frombuffer(self._views.view(offset, length), dtype=np.uint8)
        else:
            data = np.empty(length, dtype=np.uint8)
            self.source.read_into(offset, data.data)
        data.flags.writeable = False
        return data

    def file(self) -> BinaryIO:
        """A buffered, seekable file object reading through the source (for zipfile, the
        unpickler and numpy's header readers), so they map nothing either."""
        return io.BufferedReader(_SourceReader(self.source), buffer_size=1 << 16)

    def close(self) -> None:
        self.source.close()  # a map still viewed by arrays is unmapped when they are collected


class _SourceReader(io.RawIOBase):
    """A ByteSource as a raw file object: each read is a positional read at its own offset."""

    def __init__(self, source: ByteSource) -> None:
        self._source = source
        self._pos = 0
        self.name = source.name

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._source.size}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence ({whence})")
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        n = max(0, min(len(view), self._source.size - self._pos))
        if n:
            self._source.read_into(self._pos, view[:n])
        self._pos += n
        return n


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length


def zip_data_start(data: SourceBytes, info: zipfile.ZipInfo, label: str) -> int:
    """Where a member's (possibly compressed) bytes begin, from its local header."""
    what = f"entry {info.filename!r}"
    header = data.read(info.header_offset, _LOCAL_HEADER.size, f"local header of {what}")
    sig, name_len, extra_len = _LOCAL_HEADER.unpack(header.tobytes())
    if sig != b"PK\x03\x04":
        raise CorruptCheckpoint(f"{label}: bad local header for {what} at byte {info.header_offset}")
    return int(info.header_offset + _LOCAL_HEADER.size + name_len + extra_len)


def check_member(data: SourceBytes, info: zipfile.ZipInfo, label: str, budget: Budget) -> None:
    """Before a member is read: its bytes lie inside the real file, and what reading it
    allocates (its declared size, which inflating a compressed member produces) is within the
    budget.  A 1 MB deflated member can declare 1 GiB; that is refused here, not inflated."""
    data.check(zip_data_start(data, info, label), info.compress_size, f"entry {info.filename!r}")
    budget.charge(max(info.file_size, info.compress_size), f"reading archive entry {info.filename!r}")
