"""The one place the CLI opens its inputs: a file, a sharded index JSON, or a checkpoint directory.

TODO(merge): switch ``_open_single`` to ``pysafetensors.io.registry.open_source`` (URLs, fsspec)
and ``_open_sharded`` to ``pysafetensors.sharded`` once those land; the commands only use the
``Input`` interface below, so nothing else changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import SafetensorError, TensorNotFound
from ..format.header import N_LEN, TensorInfo
from ..io.sources import open_source
from ..reader import SafeFile
from ._shards import ShardIndexError, find_index, read_index


@dataclass
class Input:
    """One logical checkpoint: every tensor, its bytes, its metadata, however many files hold it."""

    path: str
    files: list[SafeFile]
    file_names: list[str]  # one per file (the shard names for a sharded input)
    metadata: dict[str, str] | None
    index_path: str | None = None
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
    def file_size(self) -> int:
        return sum(f.source.size for f in self.files)

    @property
    def header_size(self) -> int:
        return sum(f.header.header_size for f in self.files)

    @property
    def tensors(self) -> list[TensorInfo]:
        """Every tensor in file order (shard by shard; a shard's tensors the index maps elsewhere are skipped)."""
        return [t for i, f in enumerate(self.files) for t in f.header.tensors if self._owner.get(t.name) == i]

    def info(self, name: str) -> TensorInfo:
        try:
            return self.files[self._owner[name]].info(name)
        except KeyError:
            raise TensorNotFound(f"{self.path} does not contain tensor {name}", tensor=name) from None

    def file_of(self, name: str) -> str:
        return self.file_names[self._owner[name]]

    def data(self, name: str) -> memoryview:
        """The tensor's bytes (a zero-copy view of the mapped file); slice it to read in chunks."""
        return self.files[self._owner[name]].raw(name).data

    def data_regions(self) -> list[tuple[SafeFile, int, int]]:
        """(file, absolute start, length) of each file's data region, in order."""
        return [(f, N_LEN + f.header.header_size, f.header.data_size) for f in self.files]

    def close(self) -> None:
        for f in self.files:
            f.close()

    def __enter__(self) -> Input:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_single(path: str) -> SafeFile:
    try:
        return SafeFile(open_source(path))
    except SafetensorError as e:
        # Say which file: format errors name tensors and offsets, not the path.
        e.args = (f"{path}: {e}",)
        raise


def _open_sharded(path: str) -> Input:
    index = read_index(path)
    files: list[SafeFile] = []
    try:
        for shard in index.shards:
            shard_path = os.path.join(index.directory, shard)
            if not os.path.isfile(shard_path):
                raise ShardIndexError(f"{index.path}: shard {shard} listed in the index is missing")
            files.append(_open_single(shard_path))
        owner: dict[str, int] = {}
        for i, (shard, f) in enumerate(zip(index.shards, files)):
            for t in f.header.tensors:
                if index.weight_map.get(t.name) == shard:
                    owner[t.name] = i
        missing = sorted(set(index.weight_map) - set(owner))
        if missing:
            raise ShardIndexError(
                f"{index.path}: tensor {missing[0]} is mapped to {index.weight_map[missing[0]]} but that "
                f"shard does not contain it ({len(missing)} such tensor(s))",
                tensor=missing[0],
            )
    except BaseException:
        for f in files:
            f.close()
        raise
    # Shards of one checkpoint carry the same metadata (transformers writes {"format": "pt"} in
    # each); the first shard's stands for the whole.
    metadata = files[0].metadata if files else None
    return Input(path, files, index.shards, metadata, index_path=index.path, _owner=owner)


def is_sharded_path(path: str) -> bool:
    """Whether ``path`` names a sharded checkpoint (an index JSON or a directory)."""
    return os.path.isdir(path) or path.endswith(".json")


def open_input(path: str) -> Input:
    """Open a local .safetensors file, an index JSON, or a directory holding a sharded checkpoint."""
    path = os.fspath(path)
    if os.path.isdir(path):
        single = os.path.join(path, "model.safetensors")
        if find_index(path) is None and os.path.isfile(single):
            path = single
        else:
            return _open_sharded(path)
    elif path.endswith(".json"):
        return _open_sharded(path)
    f = _open_single(path)
    return Input(path, [f], [os.path.basename(path)], f.metadata)
