"""Read the legacy (non-zip) ``torch.save`` format, ``_use_new_zipfile_serialization=False``.

Layout (torch/serialization.py ``_legacy_save``): five pickles back to back — magic number,
protocol version, sys_info, the object itself, the sorted list of storage keys — then, for each
key in that order, an 8-byte little-endian element count followed by the storage's bytes
(always little-endian).  Persistent ids are ``('storage', type, root_key, location, numel,
view_metadata)``, where view_metadata ``(view_key, offset, size)`` marks a storage view.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

import numpy as np

from ..errors import CorruptCheckpoint, UnsafePickle, UnsupportedDtype
from .checkpoint import Checkpoint, SourceBytes
from .limits import Budget, short_repr
from .torch_objects import ALLOWLIST, REFUSED, Storage, TorchDType, storage_bytes_of, storage_reference
from .unpickler import RestrictedUnpickler

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001


class _LegacyStorages:
    """persistent_load for the legacy format; byte offsets are filled in after the main pickle."""

    def __init__(self, data: SourceBytes, label: str) -> None:
        self._data = data
        self._label = label
        self.roots: dict[str, tuple[TorchDType, int]] = {}  # key -> (dtype, numel)
        self.offsets: dict[str, int] = {}  # key -> file offset of its bytes

    def _fetch(self, key: str, start: int, length: int) -> np.ndarray:
        """Bytes ``[start, start + length)`` of root storage ``key`` (``locate`` checked it lies in the file)."""
        return self._data.read(self.offsets[key] + start, length, f"storage {key!r}")

    def __call__(self, pid: Any) -> Storage:
        if isinstance(pid, tuple) and pid and pid[0] in ("module", b"module"):
            raise UnsafePickle(
                f"{self._label}: refusing a pickled nn.Module class reference {short_repr(pid[1:2])}; save a "
                "state_dict instead",
                global_name=short_repr(pid[1:2]),
            )
        _, stype, key, _location, numel, view = storage_reference(pid, 6, self._label)
        torch_dtype = stype.torch_dtype
        if torch_dtype.dtype is None:
            # Without an element size the storages after this one cannot be located.
            raise UnsupportedDtype(
                f"{self._label}: storage {key!r} holds torch.{torch_dtype.name}, which has no "
                "safetensors equivalent",
                dtype=torch_dtype.name,
            )
        item = torch_dtype.dtype.itemsize
        root_numel = self.roots.setdefault(key, (torch_dtype, numel))[1]
        byte_offset, nbytes = 0, root_numel * item
        if view is not None:
            if not (isinstance(view, tuple) and len(view) == 3 and all(isinstance(v, int) for v in view[1:])):
                raise CorruptCheckpoint(f"{self._label}: malformed storage view {short_repr(view)}")
            _, offset, size = view
            byte_offset, nbytes = offset * item, size * item
            if offset < 0 or size < 0 or offset + size > root_numel:
                raise CorruptCheckpoint(
                    f"{self._label}: storage view [{offset}, {offset + size}) lies outside storage "
                    f"{key!r} of {root_numel} elements",
                    storage=key,
                )
        return Storage(key, byte_offset, nbytes, root_numel * item, torch_dtype, "little",
                       lambda start, length: self._fetch(key, start, length))

    def locate(self, fileobj: BinaryIO, keys: Any) -> None:
        """Walk the storage records after the keys pickle, checking each count against its use."""
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise CorruptCheckpoint(f"{self._label}: the storage key list is malformed: {short_repr(keys)}")
        pos = fileobj.tell()
        for key in keys:
            if key not in self.roots:
                raise CorruptCheckpoint(f"{self._label}: storage {key!r} is listed but never used")
            torch_dtype, numel = self.roots[key]
            assert torch_dtype.dtype is not None
            (count,) = struct.unpack("<q", self._data.read(pos, 8, f"size of storage {key!r}").tobytes())
            if count != numel:
                raise CorruptCheckpoint(
                    f"{self._label}: storage {key!r} has {count} elements on disk, {numel} in the pickle",
                    storage=key,
                )
            self.offsets[key] = pos + 8
            pos += 8 + numel * torch_dtype.dtype.itemsize
            self._data.check(self.offsets[key], numel * torch_dtype.dtype.itemsize, f"storage {key!r}")
        missing = sorted(set(self.roots) - set(self.offsets))
        if missing:
            raise CorruptCheckpoint(f"{self._label}: storages {missing} are used but not in the file")


def load_torch_legacy(data: SourceBytes, fileobj: BinaryIO, label: str, budget: Budget) -> Checkpoint:
    """Unpickle a legacy checkpoint through the allowlist and locate each storage's bytes.

    ``fileobj`` reads through ``data`` (:meth:`SourceBytes.file`); the caller closes ``data``."""

    def plain(part: str) -> Any:  # the pickles around the tree hold plain values: nothing allowed
        return RestrictedUnpickler(fileobj, allowlist={}, where=f"{label} ({part})", budget=budget).load()

    fileobj.seek(0)
    magic = plain("magic number")
    if magic != MAGIC_NUMBER:
        raise CorruptCheckpoint(f"{label}: not a torch checkpoint (magic number {short_repr(magic)})")
    protocol = plain("protocol version")
    if protocol != PROTOCOL_VERSION:
        raise CorruptCheckpoint(f"{label}: unknown legacy protocol version {short_repr(protocol)}")
    plain("sys_info")
    storages = _LegacyStorages(data, label)
    tree = RestrictedUnpickler(
        fileobj, allowlist=ALLOWLIST, refused=REFUSED, persistent_load=storages, where=label, budget=budget
    ).load()
    keys = plain("storage keys")
    storages.locate(fileobj, keys)
    return Checkpoint("torch-legacy", tree, "pt", storage_bytes_of, budget)
