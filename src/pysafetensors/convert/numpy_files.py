"""numpy ``.npy`` / ``.npz`` sources, read with numpy's own readers and ``allow_pickle=False``.

Headers are read first (dtype, shape) so the output can be planned and object arrays refused
before any array data is loaded; each array is loaded only when it is written or verified.  A
.npy array's data is read through :class:`~.checkpoint.SourceBytes` (a view of the file's map on
a local disk, positional reads on a network filesystem), never with numpy's ``mmap_mode``.
Before anything is written, each header is checked against the bytes really there: a .npy
must hold the data its header declares, an .npz member's declared size must hold it, lie
inside the archive and fit the source's budget (numpy reads a member whole into memory).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from .._adapters.numpy import little_endian_bytes
from ..errors import CorruptCheckpoint, UnsafePickle
from .checkpoint import Checkpoint, SourceBytes, Unconvertible, check_member
from .limits import Budget
from .numpy_objects import NumpyLeaf, check_numpy_shape, our_dtype


@dataclass(eq=False)
class ArrayRef(NumpyLeaf):
    """One array of a .npy/.npz file, loaded on demand."""

    load: Callable[[], np.ndarray]
    fortran: bool

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return self.dtype.nbytes(n)

    def tie_key(self) -> None:
        return None  # numpy files never share data between arrays

    def read(self) -> np.ndarray:
        if not self.nbytes:
            # Nothing to load (and numpy need not build the shape to say so).
            return np.empty(0, dtype=np.uint8)
        return little_endian_bytes(self.load(), self.dtype)


def _read_header(fp: BinaryIO, label: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fp)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(fp)
    except (ValueError, EOFError, OSError, SyntaxError) as e:
        raise CorruptCheckpoint(f"{label}: not a valid .npy header: {e}") from e
    if not dtype.hasobject:
        check_numpy_shape(tuple(shape), dtype.itemsize, label)
    return dtype, tuple(shape), bool(fortran)


def _data_bytes(dtype: np.dtype, shape: tuple[int, ...]) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


def _check_holds(label: str, dtype: np.dtype, shape: tuple[int, ...], offset: int, available: int,
                 where: str) -> None:
    """The data the header declares is really there: else 'truncated', with both sizes."""
    needed = _data_bytes(dtype, shape)
    if needed > available:
        raise CorruptCheckpoint(
            f"{label}: truncated: the header declares {dtype} {list(shape)}, {needed:,} bytes of data "
            f"from byte {offset:,}, but {where} has only {available:,} bytes there",
            expected=needed,
            actual=available,
        )


def _array_ref(dtype: np.dtype, shape: tuple[int, ...], fortran: bool, label: str,
               load: Callable[[], np.ndarray]) -> ArrayRef | Unconvertible:
    if dtype.hasobject:
        raise UnsafePickle(
            f"{label}: an object array (dtype {dtype}) can only be loaded by unpickling, which "
            "conversion never does",
            array=label,
        )
    our = our_dtype(dtype, label)
    return our if isinstance(our, Unconvertible) else ArrayRef(our, shape, load, fortran)


def _checked_load(load: Callable[[], Any], label: str) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        try:
            return np.asarray(load())
        except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
            raise CorruptCheckpoint(f"{label}: cannot read array data (truncated?): {e}") from e

    return run


def load_npy(data: SourceBytes, fileobj: BinaryIO, label: str, budget: Budget) -> Checkpoint:
    """A single .npy array, its data read from the file when written (a view of a mapped file:
    zero copy).  ``fileobj`` reads through ``data``; the caller closes ``data``."""
    dtype, shape, fortran = _read_header(fileobj, label)
    offset = fileobj.tell()
    if not dtype.hasobject:
        _check_holds(label, dtype, shape, offset, max(0, data.size - offset), "the file")

    def load() -> np.ndarray:
        raw = data.read(offset, _data_bytes(dtype, shape), "the array data")
        array: np.ndarray = np.ndarray(shape, dtype=dtype, buffer=raw, order="F" if fortran else "C")
        return array

    leaf = _array_ref(dtype, shape, fortran, label, _checked_load(load, label))
    return Checkpoint("npy", leaf, None, _array_bytes, budget)


def load_npz(data: SourceBytes, fileobj: BinaryIO, label: str, budget: Budget) -> Checkpoint:
    """An .npz archive: one tree entry per member, keyed by its name without ``.npy``.

    numpy reads each member through ``fileobj`` (which reads through ``data``)."""
    try:
        archive = np.load(fileobj, allow_pickle=False)
        members = zipfile.ZipFile(fileobj)
    except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise CorruptCheckpoint(f"{label}: not a readable .npz archive (truncated?): {e}") from e
    closers = [archive.close, members.close]
    try:
        tree: dict[str, Any] = {}
        for key in archive.files:
            member = key + ".npy" if key + ".npy" in members.namelist() else key
            where = f"{label}[{key!r}]"
            info = members.getinfo(member)
            try:
                with members.open(member) as fp:
                    dtype, shape, fortran = _read_header(fp, where)  # type: ignore[arg-type]
                    header_end = fp.tell()
            except (zipfile.BadZipFile, EOFError, OSError) as e:
                raise CorruptCheckpoint(f"{where}: cannot read the member header: {e}") from e
            if not dtype.hasobject:
                _check_holds(where, dtype, shape, header_end, max(0, info.file_size - header_end),
                             "the archive member")
                # numpy reads a member whole into memory: within the file and the budget first.
                check_member(data, info, label, budget)
            tree[key] = _array_ref(dtype, shape, fortran, where,
                                   _checked_load(lambda key=key: archive[key], where))  # type: ignore[misc]
    except BaseException:
        for close in closers:
            close()
        raise
    return Checkpoint("npz", tree, None, _array_bytes, budget, closers)


def _array_bytes(leaves: list[Any]) -> int:
    return sum(leaf.nbytes for leaf in leaves if isinstance(leaf, ArrayRef))
