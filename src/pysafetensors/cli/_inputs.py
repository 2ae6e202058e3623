"""The one place the CLI opens its inputs, through :func:`pysafetensors.sharded.open_file`
(so through ``io.open_source``: mmap, or pread on network and FUSE filesystems).

An input is a local file, an ``http(s)://`` or fsspec URL (``memory://``, ``s3://``...), a
``*.safetensors.index.json`` (local or URL) or a local directory holding a checkpoint.  The
commands see one logical checkpoint (:class:`Input`).  Tensor bytes come as a zero-copy view
of mapped files, or as :class:`RangedBytes` over remote sources: slicing it reads just that
byte range, so chunked commands (stats, diff --values, id --tensors) never hold a whole
tensor and move each byte over the network once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidIndex, SafetensorError, TensorNotFound
from ..format.header import N_LEN, TensorInfo
from ..io.protocols import capabilities
from ..io.registry import url_scheme
from ..reader import SafeFile, alloc
from ..sharded import ShardedFile, is_index_name, open_file


class TensorBytes(Protocol):
    """What the commands need of a tensor's bytes: a length and byte-range slicing."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> Any: ...


class RangedBytes:
    """A tensor's bytes on a source without zero-copy views: ``[lo:hi]`` reads that range only
    (a failed read names the tensor: ``SafeFile.read_data``)."""

    def __init__(self, file: SafeFile, info: TensorInfo) -> None:
        self.file = file
        self.info = info
        self.length = info.nbytes

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, key: slice) -> memoryview:
        if not isinstance(key, slice):
            raise TypeError("RangedBytes supports byte-range slices only")
        start, stop, step = key.indices(self.length)
        if step != 1:
            raise ValueError("RangedBytes slices must be contiguous")
        buf = alloc(max(stop - start, 0))  # large chunks: an anonymous map, no zero-fill pass
        if len(buf):
            self.file.read_data(self.info.begin + start, buf, tensor=self.info.name)
        return buf


@dataclass
class Input:
    """One logical checkpoint: every tensor, its bytes, its metadata, however many files hold it."""

    path: str
    files: list[SafeFile]
    file_names: list[str]  # one per file (the shard names for a sharded input)
    metadata: dict[str, str] | None
    index_path: str | None = None
    sharded_file: ShardedFile | None = None
    _owner: dict[str, int] = field(default_factory=dict)  # tensor -> position in files

    def __post_init__(self) -> None:
        if not self._owner:
            for i, f in enumerate(self.files):
                for t in f.header.tensors:
                    self._owner[t.name] = i

    @property
    def sharded(self) -> bool:
        return self.index_path is not None

    @property
    def local(self) -> bool:
        """Whether the files are on this machine (paths, not URLs)."""
        return url_scheme(self.index_path or self.path) in (None, "file")

    @property
    def file_size(self) -> int:
        return sum(f.source.size for f in self.files)

    @property
    def header_size(self) -> int:
        return sum(f.header.header_size for f in self.files)

    @property
    def tensors(self) -> list[TensorInfo]:
        """Every tensor in file order (shard by shard; a shard's tensors the index maps elsewhere are skipped)."""
        return [t for i, f in enumerate(self.files) for t in f.header.tensors if self._owner.get(t.name) == i]

    def _file(self, name: str) -> SafeFile:
        try:
            return self.files[self._owner[name]]
        except KeyError:
            raise TensorNotFound(f"{self.path} does not contain tensor {name}", tensor=name) from None

    def info(self, name: str) -> TensorInfo:
        return self._file(name).info(name)

    def file_of(self, name: str) -> str:
        return self.file_names[self._owner[name]]

    def data(self, name: str) -> TensorBytes:
        """The tensor's bytes to slice in chunks: a view of a mapped file, else ranged reads."""
        f = self._file(name)
        if capabilities(f.source).view:
            return f.raw(name).data
        return RangedBytes(f, f.info(name))

    def read(self, name: str) -> memoryview:
        """The whole tensor's bytes (a view when mapped, else one read); for writers."""
        return self._file(name).raw(name).data

    def data_regions(self) -> list[tuple[SafeFile, int, int]]:
        """(file, absolute start, length) of each file's data region, in order."""
        return [(f, N_LEN + f.header.header_size, f.header.data_size) for f in self.files]

    def close(self) -> None:
        for f in self.files:
            f.close()
        if self.sharded_file is not None:
            self.sharded_file.close()

    def __enter__(self) -> Input:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _named(path: str, e: SafetensorError) -> SafetensorError:
    # Say which file: format errors name tensors and offsets, not the path.
    if path not in str(e):
        e.args = (f"{path}: {e}",)
    return e


def _open_sharded(path: str, sf: ShardedFile) -> Input:
    files: list[SafeFile] = []
    try:
        for shard in sf.shard_names:
            try:
                files.append(sf.shard(shard))
            except SafetensorError as e:
                raise _named(shard, e) from None
        owner: dict[str, int] = {}
        weight_map = sf.index.weight_map
        for i, (shard, f) in enumerate(zip(sf.shard_names, files)):
            for t in f.header.tensors:
                if weight_map.get(t.name) == shard:
                    owner[t.name] = i
        missing = sorted(set(weight_map) - set(owner))
        if missing:
            raise InvalidIndex(
                f"{sf.name}: tensor {missing[0]} is mapped to {weight_map[missing[0]]} but that "
                f"shard does not contain it ({len(missing)} such tensor(s))",
                tensor=missing[0],
            )
    except BaseException:
        sf.close()
        raise
    # Shards of one checkpoint carry the same header metadata (transformers writes
    # {"format": "pt"} in each); the first shard's stands for the whole, so a sharded
    # checkpoint and its merged file have the same metadata (and structural ID).
    metadata = files[0].metadata if files else None
    return Input(path, files, list(sf.shard_names), metadata, index_path=sf.name, sharded_file=sf, _owner=owner)


def is_sharded_path(path: str) -> bool:
    """Whether ``path`` names a sharded checkpoint (an index JSON, or a local directory)."""
    return is_index_name(path) or (url_scheme(path) is None and os.path.isdir(path))


def open_input(path: str, storage_options: Mapping[str, Any] | None = None) -> Input:
    """Open a file, URL, index JSON or checkpoint directory as one :class:`Input`."""
    path = os.fspath(path)
    try:
        opened = open_file(path, None, storage_options)  # the backend is chosen per file
    except SafetensorError as e:
        raise _named(path, e) from None
    if isinstance(opened, ShardedFile):
        return _open_sharded(path, opened)
    return Input(path, [opened], [os.path.basename((opened.name or path).rstrip("/"))], opened.metadata)
