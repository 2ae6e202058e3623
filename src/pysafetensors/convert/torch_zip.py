"""Read a ``torch.save`` zip checkpoint: ``<archive>/data.pkl`` plus one entry per storage.

Storage entries are stored uncompressed (torch aligns them to 64 bytes), so a tensor's bytes
are read straight out of the file (:class:`~.checkpoint.SourceBytes`: a view of its map on a
local disk, a positional read on a network filesystem); a compressed entry (a re-zipped
checkpoint) is decompressed into memory instead, once.  Every entry is checked against the file's
real size when it is first named, and what reading it allocates (its declared inflated size)
is charged to the source's budget then, before any byte is inflated or any output written.
"""

from __future__ import annotations

import zipfile
from typing import Any, BinaryIO

import numpy as np

from ..errors import CorruptCheckpoint, UnsupportedCheckpoint
from .checkpoint import Checkpoint, SourceBytes, check_member, zip_data_start
from .limits import Budget, short_repr
from .torch_objects import ALLOWLIST, REFUSED, Storage, storage_bytes_of, storage_reference
from .unpickler import RestrictedUnpickler


def _find_pickle(names: list[str], label: str) -> str:
    if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        raise UnsupportedCheckpoint(f"{label}: a TorchScript archive (torch.jit.save), not a torch.save checkpoint")
    found = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(found) == 1:
        return found[0]
    if not found:
        raise CorruptCheckpoint(f"{label}: zip archive has no <archive>/data.pkl; not a torch.save checkpoint")
    raise CorruptCheckpoint(f"{label}: zip archive has several data.pkl entries: {found}")


class _ZipStorages:
    """persistent_load for the zip format: ('storage', type, key, location, numel) -> Storage."""

    def __init__(self, zf: zipfile.ZipFile, data: SourceBytes, prefix: str, byteorder: str, label: str,
                 budget: Budget) -> None:
        self._zf = zf
        self._data = data
        self._prefix = prefix
        self._byteorder = byteorder
        self._label = label
        self._budget = budget
        self._cache: dict[str, Storage] = {}

    def _inflated(self, info: zipfile.ZipInfo) -> np.ndarray:
        try:
            return np.frombuffer(self._zf.read(info), dtype=np.uint8)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:  # zlib.error is an Exception
            raise CorruptCheckpoint(f"{self._label}: cannot read entry {info.filename!r}: {e}") from e

    def __call__(self, pid: Any) -> Storage:
        _, stype, key, _location, numel = storage_reference(pid, 5, self._label)
        if key in self._cache:
            return self._cache[key]
        entry = f"{self._prefix}/data/{key}"
        try:
            info = self._zf.getinfo(entry)
        except KeyError:
            raise CorruptCheckpoint(f"{self._label}: storage {key!r} has no archive entry {entry!r}") from None
        dtype = stype.torch_dtype.dtype
        nbytes = numel * dtype.itemsize if dtype is not None else info.file_size
        if info.file_size < nbytes:
            raise CorruptCheckpoint(
                f"{self._label}: storage {key!r} declares {numel} elements ({nbytes} bytes) but "
                f"{entry!r} holds {info.file_size} bytes",
                storage=key,
            )
        what = f"entry {info.filename!r}"
        if info.compress_type == zipfile.ZIP_STORED:
            start = zip_data_start(self._data, info, self._label)
            self._data.check(start, info.file_size, what)  # inside the real file; nothing read yet

            def fetch(offset: int, length: int) -> np.ndarray:
                return self._data.read(start + offset, length, what)
        else:
            check_member(self._data, info, self._label, self._budget)
            inflated: list[np.ndarray] = []  # charged to the budget once, so inflated once

            def fetch(offset: int, length: int) -> np.ndarray:
                if not inflated:
                    inflated.append(self._inflated(info)[:nbytes])
                return inflated[0][offset : offset + length]

        storage = Storage(key, 0, nbytes, nbytes, stype.torch_dtype, self._byteorder, fetch)
        self._cache[key] = storage
        return storage


def load_torch_zip(data: SourceBytes, fileobj: BinaryIO, label: str, budget: Budget) -> Checkpoint:
    """Unpickle a zip checkpoint's tree through the allowlist; storages stay on disk until read.

    ``fileobj`` reads through ``data`` (:meth:`SourceBytes.file`); the caller closes ``data``."""
    try:
        zf = zipfile.ZipFile(fileobj)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
        raise CorruptCheckpoint(f"{label}: not a readable zip archive (truncated?): {e}") from e
    try:
        pkl = _find_pickle(zf.namelist(), label)
        prefix = pkl.rsplit("/", 1)[0]
        byteorder = "little"
        if f"{prefix}/byteorder" in zf.namelist():
            raw = _read(zf, data, f"{prefix}/byteorder", label, budget)
            byteorder = raw.decode("ascii", "replace").strip()
            if byteorder not in ("little", "big"):
                raise CorruptCheckpoint(f"{label}: unknown byteorder {short_repr(byteorder)}")
        storages = _ZipStorages(zf, data, prefix, byteorder, label, budget)
        tree = RestrictedUnpickler(
            _read(zf, data, pkl, label, budget), allowlist=ALLOWLIST, refused=REFUSED,
            persistent_load=storages, where=f"{label}:{pkl}", budget=budget,
        ).load()
    except BaseException:
        zf.close()
        raise
    return Checkpoint("torch-zip", tree, "pt", storage_bytes_of, budget, [zf.close])


def _read(zf: zipfile.ZipFile, data: SourceBytes, name: str, label: str, budget: Budget) -> bytes:
    check_member(data, zf.getinfo(name), label, budget)
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
        raise CorruptCheckpoint(f"{label}: cannot read archive entry {name!r} (truncated?): {e}") from e
