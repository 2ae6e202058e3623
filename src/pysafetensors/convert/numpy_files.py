"""numpy ``.npy`` / ``.npz`` sources, read with numpy's own readers and ``allow_pickle=False``.

Headers are read first (dtype, shape) so the output can be planned and object arrays refused
before any array data is loaded; each array is loaded only when it is written or verified.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from .._adapters.numpy import dtype_of, little_endian_bytes
from ..errors import CorruptCheckpoint, UnsafePickle, UnsupportedDtype
from ..format.dtypes import DType
from .checkpoint import Checkpoint, Unconvertible


@dataclass(eq=False)
class ArrayRef:
    """One array of a .npy/.npz file, loaded on demand."""

    dtype: DType
    shape: tuple[int, ...]
    load: Callable[[], np.ndarray]
    fortran: bool

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.shape

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return self.dtype.nbytes(n)

    def tie_key(self) -> None:
        return None  # numpy files never share data between arrays

    def read(self) -> np.ndarray:
        return little_endian_bytes(self.load(), self.dtype)


def _read_header(fp: BinaryIO, label: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fp)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(fp)
    except (ValueError, EOFError, OSError, SyntaxError) as e:
        raise CorruptCheckpoint(f"{label}: not a valid .npy header: {e}") from e
    return dtype, tuple(shape), bool(fortran)


def _array_ref(dtype: np.dtype, shape: tuple[int, ...], fortran: bool, label: str,
               load: Callable[[], np.ndarray]) -> ArrayRef | Unconvertible:
    if dtype.hasobject:
        raise UnsafePickle(
            f"{label}: an object array (dtype {dtype}) can only be loaded by unpickling, which "
            "conversion never does",
            array=label,
        )
    try:
        our = dtype_of(np.empty(0, dtype=dtype), label)
    except UnsupportedDtype as e:
        message = str(e)
        return Unconvertible(message, lambda name: UnsupportedDtype(message, tensor=name, dtype=str(dtype)))
    return ArrayRef(our, shape, load, fortran)


def _checked_load(load: Callable[[], Any], label: str) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        try:
            return np.asarray(load())
        except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
            raise CorruptCheckpoint(f"{label}: cannot read array data (truncated?): {e}") from e

    return run


def load_npy(path: str, fileobj: BinaryIO, label: str) -> Checkpoint:
    """A single .npy array: memory-mapped (zero copy) unless it is empty."""
    dtype, shape, fortran = _read_header(fileobj, label)
    leaf = _array_ref(dtype, shape, fortran, label, _checked_load(
        lambda: np.load(path, mmap_mode="r", allow_pickle=False), label))
    return Checkpoint("npy", leaf, None, _array_bytes)


def load_npz(fileobj: BinaryIO, label: str) -> Checkpoint:
    """An .npz archive: one tree entry per member, keyed by its name without ``.npy``."""
    try:
        archive = np.load(fileobj, allow_pickle=False)
        members = zipfile.ZipFile(fileobj)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise CorruptCheckpoint(f"{label}: not a readable .npz archive (truncated?): {e}") from e
    tree: dict[str, Any] = {}
    for key in archive.files:
        member = key + ".npy" if key + ".npy" in members.namelist() else key
        where = f"{label}[{key!r}]"
        try:
            with members.open(member) as fp:
                dtype, shape, fortran = _read_header(fp, where)  # type: ignore[arg-type]
        except (zipfile.BadZipFile, EOFError, OSError) as e:
            raise CorruptCheckpoint(f"{where}: cannot read the member header: {e}") from e
        tree[key] = _array_ref(dtype, shape, fortran, where,
                               _checked_load(lambda key=key: archive[key], where))  # type: ignore[misc]
    return Checkpoint("npz", tree, None, _array_bytes, [archive.close, members.close])


def _array_bytes(leaves: list[Any]) -> int:
    return sum(leaf.nbytes for leaf in leaves if isinstance(leaf, ArrayRef))
