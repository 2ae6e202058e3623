"""Sharded checkpoints: read an index (or a directory) as one logical file; write shards + index.

Reading: ``open_file`` accepts everything ``safe_open`` does.  A ``*.index.json`` (local, URL
or fsspec) or a local directory holding one becomes a :class:`ShardedFile`: names and
metadata come from the index, and each shard is opened only when one of its tensors is asked
for.  Writing: :func:`write_sharded` plans shards greedily in key order (huggingface_hub's
rule) and writes each shard, then the index, atomically.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

from .errors import FileClosed, InvalidIndex, SerializeError, TensorNotFound
from .format._gcpause import paused_gc
from .format.header import HEADER_CAP, TensorInfo
from .format.index import (
    DEFAULT_MAX_SHARD_SIZE,
    INDEX_SUFFIX,
    ShardIndex,
    encode_index,
    index_file_name,
    parse_index,
    plan_shards,
    shard_name_pattern,
    shard_names,
)
from .format.slicing import SlicePlan
from .io.registry import open_source, url_scheme
from .io.sinks import AtomicFileSink
from .reader import RawTensor, SafeFile
from .writer import WriteItem, write_file

# --- reading ------------------------------------------------------------------------------

INDEX_CAP = HEADER_CAP  # an index lists names like a header does; the same cap bounds memory


class ShardedFile:
    """Several shard files behind one index, read as one file (the SafeFile interface)."""

    def __init__(
        self,
        index: ShardIndex,
        open_shard: Callable[[str], SafeFile],
        name: str,
        locate: Callable[[str], str] | None = None,
    ) -> None:
        self.index = index
        self.name = name
        self._open_shard = open_shard
        # Where a shard lives (a path or URL next to the index), for tools that read it raw.
        self.locate: Callable[[str], str] = locate or (lambda shard: shard)
        self._shards: dict[str, SafeFile] = {}
        self._lock = threading.Lock()
        self._closed = False

    # --- index facts --------------------------------------------------------------------
    @property
    def metadata(self) -> dict[str, str] | None:
        """The index's metadata (``total_size`` and user entries) as strings; None when empty."""
        if not self.index.metadata:
            return None
        return {k: v if isinstance(v, str) else _to_str(v) for k, v in self.index.metadata.items()}

    @property
    def shard_names(self) -> list[str]:
        return self.index.shards

    def sorted_names(self) -> list[str]:
        """Tensor names, sorted, straight from the index (no shard is opened)."""
        self.check_open()
        return sorted(self.index.weight_map)

    def names(self) -> list[str]:
        """Names in file order: shard by shard, each in its data-offset order (opens every header)."""
        self.check_open()
        out: list[str] = []
        for shard in self.shard_names:
            wanted = set(self.index.tensors_in(shard))
            out.extend(n for n in self.shard(shard).names() if n in wanted)
        return out

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.index.weight_map

    def check_open(self) -> None:
        if self._closed:
            raise FileClosed("File is closed")

    # --- shards ---------------------------------------------------------------------------
    def shard(self, shard: str) -> SafeFile:
        """The SafeFile of one shard, opened on first use."""
        with self._lock:
            self.check_open()
            f = self._shards.get(shard)
            if f is None:
                f = self._shards[shard] = self._open_shard(shard)
            return f

    def file_of(self, name: str) -> SafeFile:
        self.check_open()
        shard = self.index.weight_map.get(name) if isinstance(name, str) else None
        if shard is None:
            raise TensorNotFound(f"File does not contain tensor {name}", tensor=name)
        f = self.shard(shard)
        if name not in f:
            raise InvalidIndex(
                f"{self.name}: the index puts tensor {name!r} in {shard}, which does not contain it",
                tensor=name,
                shard=shard,
            )
        return f

    # --- the SafeFile interface --------------------------------------------------------------
    def info(self, name: str) -> TensorInfo:
        return self.file_of(name).info(name)

    def raw(self, name: str) -> RawTensor:
        return self.file_of(name).raw(name)

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor:
        return self.file_of(name).raw_slice(name, plan)

    def raw_all(self, threads: int | None = None) -> Iterator[RawTensor]:
        """Every tensor listed in the index, shard by shard in file order."""
        self.check_open()
        for shard in self.shard_names:
            wanted = set(self.index.tensors_in(shard))
            f = self.shard(shard)
            missing = {n for n in wanted if n not in f}
            if missing:
                raise InvalidIndex(
                    f"{self.name}: the index puts {sorted(missing)} in {shard}, which does not contain them",
                    shard=shard,
                )
            for raw in f.raw_all(threads):
                if raw.name in wanted:
                    yield raw

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shards, self._shards = list(self._shards.values()), {}
        for f in shards:
            f.close()


def _to_str(v: Any) -> str:
    import json

    return json.dumps(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else str(v)


def is_index_name(obj: Any) -> bool:
    if isinstance(obj, os.PathLike):
        obj = os.fspath(obj)
    if not isinstance(obj, str):
        return False
    path = obj.split("?", 1)[0] if url_scheme(obj) else obj
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return base.endswith(".json") and ".safetensors.index" in base or base.endswith(INDEX_SUFFIX)


def find_in_directory(directory: str) -> str:
    """The file to load in a checkpoint directory: its index, or its only ``.safetensors`` file."""
    names = sorted(os.listdir(directory))
    indexes = [n for n in names if is_index_name(n)]
    if len(indexes) > 1:
        preferred = [n for n in indexes if n == index_file_name()]
        if not preferred:
            raise InvalidIndex(f"{directory}: several index files ({', '.join(indexes)}); open one of them")
        indexes = preferred
    if indexes:
        return os.path.join(directory, indexes[0])
    files = [n for n in names if n.endswith(".safetensors")]
    if len(files) == 1:
        return os.path.join(directory, files[0])
    if not files:
        raise FileNotFoundError(f"No such file or directory: {directory}: no *.safetensors.index.json or .safetensors file")
    raise InvalidIndex(f"{directory}: several .safetensors files and no index ({', '.join(files)}); open one of them")


def open_index(
    location: Any, backend: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> ShardedFile:
    """Open an index file (path or URL); shard files are resolved next to it and each opened
    through ``io.open_source`` with ``backend`` (None: chosen per shard)."""
    location = os.fspath(location) if isinstance(location, os.PathLike) else location
    src = open_source(location, backend, storage_options)
    try:
        if src.size > INDEX_CAP:
            raise InvalidIndex(
                f"{src.name}: index is {src.size} bytes, over the {INDEX_CAP}-byte cap",
                size=src.size,
            )
        data = bytearray(src.size)
        src.read_into(0, memoryview(data))
    finally:
        src.close()
    name = src.name
    index = parse_index(bytes(data), name)
    if url_scheme(location) and url_scheme(location) != "file":
        base = location.split("?", 1)[0].rsplit("/", 1)[0]

        def shard_location(shard: str) -> str:
            return f"{base}/{shard}"
    else:
        directory = os.path.dirname(os.path.abspath(location))

        def shard_location(shard: str) -> str:
            return os.path.join(directory, shard)

    def open_shard(shard: str) -> SafeFile:
        return SafeFile(open_source(shard_location(shard), backend, storage_options))

    return ShardedFile(index, open_shard, name, shard_location)


def open_file(
    obj: Any, backend: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> SafeFile | ShardedFile:
    """A SafeFile, or a ShardedFile for an index file or a local checkpoint directory."""
    path = os.fspath(obj) if isinstance(obj, os.PathLike) else obj
    if isinstance(path, str) and url_scheme(path) is None and os.path.isdir(path):
        path = find_in_directory(path)
    if is_index_name(path):
        return open_index(path, backend, storage_options)
    return SafeFile(open_source(path, backend, storage_options))


# --- writing ------------------------------------------------------------------------------


@paused_gc()
def write_sharded(
    items: Sequence[WriteItem],
    directory: str | os.PathLike[str],
    *,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    metadata: Mapping[str, str] | None = None,
    shard_metadata: Mapping[str, str] | None = None,
    storage_ids: Mapping[str, Hashable] | None = None,
    basename: str = "model",
    variant: str | None = None,
    durable: bool | None = None,
) -> str:
    """Write ``items`` as Hugging Face shards (+ index when more than one) into ``directory``.

    Every shard's header carries ``shard_metadata`` (default: ``metadata``); the index has
    ``{"total_size": ..., **metadata}``.
    Items with the same ``storage_ids`` value stay in one shard.  Stale shards of an earlier
    save with the same base name are removed afterwards.  Returns the index path, or the
    single file's path when everything fits in one shard.
    """
    directory = os.fspath(directory)
    if metadata is not None and "total_size" in metadata:
        raise SerializeError("metadata key 'total_size' is reserved for the index (sum of tensor bytes)")
    by_name = {}
    for item in items:
        if item.name in by_name:
            raise SerializeError(f"tensor name {item.name!r} appears twice", tensor=item.name)
        by_name[item.name] = item
    ids = storage_ids or {}
    sizes = {i.name: _nbytes(i) for i in by_name.values()}
    plan = plan_shards(((n, sizes[n], ids.get(n)) for n in by_name), max_shard_size)
    files = shard_names(len(plan), basename, variant)
    os.makedirs(directory, exist_ok=True)
    for shard_file, shard in zip(files, plan):
        write_file(
            [by_name[n] for n in shard],
            os.path.join(directory, shard_file),
            metadata if shard_metadata is None else shard_metadata,
            durable=durable,
        )
    index_path = os.path.join(directory, index_file_name(basename, variant))
    if len(plan) > 1:
        index = ShardIndex(
            weight_map={n: f for f, shard in zip(files, plan) for n in shard},
            metadata={**dict(metadata or {}), "total_size": sum(sizes.values())},
        )
        with AtomicFileSink(index_path, durable=durable) as sink:
            sink.write([encode_index(index).encode("utf-8")])
    _remove_stale(directory, set(files), basename, variant, keep_index=len(plan) > 1)
    return index_path if len(plan) > 1 else os.path.join(directory, files[0])


def _nbytes(item: WriteItem) -> int:
    return item.dtype.nbytes(math.prod(item.shape))


def _remove_stale(directory: str, written: set[str], basename: str, variant: str | None, keep_index: bool) -> None:
    # A directory is read as "its index, else its only file": leftovers of an earlier save
    # with another shard count would otherwise shadow or pollute this one.
    pattern = shard_name_pattern(basename, variant)
    stale = [n for n in os.listdir(directory) if pattern.match(n) and n not in written]
    if not keep_index:
        stale.append(index_file_name(basename, variant))
    else:
        stale.extend(n for n in shard_names(1, basename, variant) if n not in written)
    for n in stale:
        try:
            os.remove(os.path.join(directory, n))
        except FileNotFoundError:
            pass


__all__ = ["ShardedFile", "find_in_directory", "is_index_name", "open_file", "open_index", "write_sharded"]
