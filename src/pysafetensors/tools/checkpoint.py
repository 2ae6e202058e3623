"""One logical checkpoint, however it is stored: the input every tool (and the CLI and viewer) reads.

An input is a local file, an ``http(s)://`` or fsspec URL (``memory://``, ``s3://``...), a
``*.safetensors.index.json`` (local or URL), a local directory holding a checkpoint, or a
local pipe/FIFO/character device (``/dev/stdin``), copied to a temporary file up to what its
header declares (:mod:`pysafetensors.io.spool`, the one stream policy).  :func:`open_checkpoint` opens it once as a
:class:`Checkpoint`, a thin wrapper over its one :class:`~pysafetensors.reader.TensorFile` (a
SafeFile, or a ShardedFile behind an index) whose files the tools read through
:class:`~pysafetensors.reader.CheckpointFiles`; with ``gguf=True`` a file that starts with
GGUF's magic (llama.cpp's format, any of the same inputs) opens as a
:class:`~pysafetensors.gguf.checkpoint.GGUFCheckpoint` instead, GGUF's TensorFile, which the
read tools (summary, tree, identity, diff, stats, values) take beside a Checkpoint: the front
the commands ask, so no command branches on the format.  Tools that write safetensors files
from a checkpoint (shard, merge, metadata edits) open without ``gguf`` and get a clear error for one.

The metadata rule (one rule for every tool): a checkpoint's ``metadata`` is the single file's
``__metadata__``, or for a sharded checkpoint the index's ``metadata`` (exactly what
``safe_open(index).metadata()`` returns).  Shard headers carry their own ``__metadata__``
(``{"format": "pt"}`` from transformers); :meth:`Checkpoint.shard_metadata` groups them and
:meth:`Checkpoint.metadata_disagreements` says where they disagree with each other or with
the index.  Writers that turn a checkpoint back into safetensors files (``shard``, ``merge``)
keep the first file's header metadata, :attr:`Checkpoint.header_metadata`.

Tensor bytes come as a zero-copy view of mapped files, or as :class:`RangedBytes` over remote
sources: slicing it reads just that byte range, so chunked tools never hold a whole tensor
and move each byte over the network once.  :func:`stream_tensors` reads runs of small
tensors that lie back to back with one request, so a remote input does not cost one request
per small tensor.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any, ClassVar, Literal, Protocol, overload, runtime_checkable

from ..errors import GGUFUnsupported, InvalidIndex, SafetensorError, SourceError, TensorNotFound
from ..format.dtypes import DType
from ..format.header import N_LEN, TensorInfo
from ..gguf.checkpoint import GGUFCheckpoint
from ..gguf.reader import GGUFTensor
from ..gguf.split import open_gguf
from ..io.locate import Located, is_sharded_path, locate
from ..io.protocols import capabilities
from ..io.redact import redact_url
from ..io.registry import url_scheme
from ..reader import RangedBytes, SafeFile, alloc
from ..sharded import ShardedFile, open_index
from ._chunks import read_ahead_bytes

# Tensors at most this far apart in a file still share one read-ahead request.
READ_AHEAD_GAP = 64 << 10


class TensorBytes(Protocol):
    """What the tools need of a tensor's bytes: a length and byte-range slicing."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> Any: ...


class ValueTensor(Protocol):
    """What the value tools (stats, diff, values) need of a tensor: a safetensors TensorInfo,
    or a GGUFTensor (``dtype``/``shape`` of its values)."""

    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> DType: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def nelements(self) -> int: ...
    @property
    def type(self) -> str: ...  # the stored type as the format spells it (F16, Q4_K...)
    @property
    def decoded(self) -> bool: ...  # values decoded from another stored form (GGUF), not the stored bytes


class TensorAccess(Protocol):
    """What a one-tensor computation (stats, histogram, heatmap, value diff) needs: the tensor's
    header entry and its bytes.  A :class:`Checkpoint` is one; so is the viewer's tensor held in
    memory after one read, which lets several computations share a single network read."""

    def info(self, name: str) -> ValueTensor: ...

    def data(self, name: str) -> TensorBytes: ...


@runtime_checkable
class ReadOnSlice(TensorBytes, Protocol):
    """Tensor bytes read (or decoded) only when sliced, not a view of memory: a remote tensor's
    :class:`RangedBytes`, a GGUF tensor's ``DecodedBytes``."""

    def held(self, cap: int) -> TensorBytes:
        """The bytes fetched into memory once when they are at most ``cap`` bytes, else as they are."""
        ...

    def resident(self) -> int:
        """Bytes of memory these bytes keep while they wait."""
        ...


def missing(path: str, name: str) -> TensorNotFound:
    """The error for a tensor the checkpoint shown as ``path`` does not hold."""
    return TensorNotFound(f"{path} does not contain tensor {name}", tensor=name)


def matches(name: str, patterns: Sequence[str] | None) -> bool:
    """Shell-glob match against any of ``patterns`` (None or empty: everything)."""
    return not patterns or any(fnmatchcase(name, p) for p in patterns)


@dataclass
class ShardMetadata:
    """Shards whose headers carry the same ``__metadata__``."""

    files: list[str]
    metadata: dict[str, str] | None


@dataclass
class MetadataDisagreement:
    """One metadata key on which shard headers differ from each other or from the index."""

    key: str
    index: str | None  # the index's value (None: the index lacks the key)
    shards: dict[str, str | None]  # shard -> its header's value (None: absent)


@dataclass
class Checkpoint:
    """One logical checkpoint: its one :class:`~pysafetensors.reader.TensorFile` (a SafeFile, or
    a ShardedFile behind an index) as the tools read it, with the files behind it
    (:class:`~pysafetensors.reader.CheckpointFiles`) and the names people know them by."""

    format: ClassVar[Literal["safetensors"]] = "safetensors"

    path: str  # as shown to people: a URL without credentials or query string
    file: SafeFile | ShardedFile
    file_names: list[str]  # one per file (the shard names for a sharded input)
    index_path: str | None = None

    @property
    def metadata(self) -> dict[str, str] | None:
        """The metadata rule: the file's, or the index's."""
        return self.file.metadata

    @cached_property
    def files(self) -> list[SafeFile]:
        """The files behind it (``file.parts()``: they stay open until ``close``)."""
        return self.file.parts()

    @property
    def sharded(self) -> bool:
        return self.index_path is not None

    @property
    def local(self) -> bool:
        """Whether the files are on this machine (paths, not URLs)."""
        return url_scheme(self.index_path or self.path) in (None, "file")

    @property
    def header_metadata(self) -> dict[str, str] | None:
        """The first file's ``__metadata__``: what shard and merge write into new files
        (a shard's without the checkpoint id, which names the save it came from)."""
        return self.file.part_metadata(0) if self.file_names else None

    @property
    def file_size(self) -> int:
        return sum(f.source.size for f in self.files)

    @property
    def header_size(self) -> int:
        return sum(f.header.header_size for f in self.files)

    @property
    def tensor_count(self) -> int:
        return len(self.file.names())

    @property
    def tensors(self) -> list[TensorInfo]:
        """Every tensor in file order (shard by shard; a shard's tensors the index maps elsewhere are skipped)."""
        return [t for i in range(len(self.file_names)) for t in self.file.part_tensors(i)]

    def _file(self, name: str) -> SafeFile:
        if name not in self.file:
            raise missing(self.path, name)
        return self.files[self.file.part_of(name)]

    def info(self, name: str) -> TensorInfo:
        if name not in self.file:
            raise missing(self.path, name)
        return self.file.info(name)

    def file_of(self, name: str) -> str:
        if name not in self.file:
            raise missing(self.path, name)
        return self.file_names[self.file.part_of(name)]

    def data(self, name: str) -> TensorBytes:
        """The tensor's bytes to slice in chunks: a view of a mapped file, else ranged reads."""
        f = self._file(name)
        if capabilities(f.source).view:
            return f.raw(name).data
        info = f.info(name)

        def read(start: int, stop: int) -> memoryview:
            buf = alloc(stop - start)  # large chunks: an anonymous map, no zero-fill pass
            if len(buf):  # a failed read names the tensor
                f.read_data(info.begin + start, buf, tensor=name)
            return buf

        return RangedBytes(read, info.nbytes)

    def stored(self, name: str) -> TensorBytes | None:
        """The tensor's bytes as stored (as :meth:`data`: safetensors stores values)."""
        return self.data(name)

    def read(self, name: str) -> memoryview:
        """The whole tensor's bytes (a view when mapped, else one read); for writers."""
        return self._file(name).raw(name).data

    def data_regions(self) -> list[tuple[SafeFile, int, int]]:
        """(file, absolute start, length) of each file's data region, in order."""
        return [(f, N_LEN + f.header.header_size, f.header.data_size) for f in self.files]

    def shard_metadata(self) -> list[ShardMetadata] | None:
        """Shard headers' ``__metadata__``, grouped by equal value (None for a single file)."""
        if not self.sharded:
            return None
        groups: list[ShardMetadata] = []
        for position, name in enumerate(self.file_names):
            meta = self.file.part_metadata(position)
            for g in groups:
                if g.metadata == meta:
                    g.files.append(name)
                    break
            else:
                groups.append(ShardMetadata([name], meta))
        return groups

    def metadata_disagreements(self) -> list[MetadataDisagreement] | None:
        """Keys whose value differs between shard headers (absent counts as a value), or
        between the index and a shard header that has the key.  The index may carry keys the
        shards lack (``total_size``) and the shards keys the index lacks (``format``): that
        is how Hugging Face checkpoints are written, not a disagreement.  None for a single file.
        """
        if not self.sharded:
            return None
        index = self.metadata or {}
        headers = [(name, self.file.part_metadata(i) or {}) for i, name in enumerate(self.file_names)]
        keys = sorted({k for _, m in headers for k in m})
        out = []
        for key in keys:
            values = {name: m.get(key) for name, m in headers}
            distinct = set(values.values())
            against_index = key in index and any(v is not None and v != index[key] for v in distinct)
            if len(distinct) > 1 or against_index:
                out.append(MetadataDisagreement(key, index.get(key), values))
        return out

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> Checkpoint:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def name_input(path: str, e: SafetensorError) -> SafetensorError:
    """``e`` saying which input it is about: format errors name tensors and offsets, not the
    path, so their message gets it in front; the I/O layer's and an index's errors, and those
    raised with ``input_name`` (a split GGUF set's), name it already.  ``input_name`` is then
    ``path``, for a message in a user's words (HeaderError.plain)."""
    if e.input_name is None and not isinstance(e, (SourceError, InvalidIndex)):
        e.args = (f"{path}: {e}",)
    e.input_name = path
    return e


def _from_sharded(path: str, sf: ShardedFile) -> Checkpoint:
    try:
        for shard in sf.shard_names:
            try:
                sf.shard(shard)
            except SafetensorError as e:
                raise name_input(redact_url(shard), e) from None
        for shard in sf.shard_names:
            sf.check(shard, complete=True)  # the index's rule: every mapped tensor is there
    except BaseException:
        sf.close()
        raise
    return Checkpoint(path, sf, list(sf.shard_names), index_path=sf.name)


#: what the read tools take: a safetensors checkpoint or a GGUF file
AnyCheckpoint = Checkpoint | GGUFCheckpoint


def stream_tensors(ckpt: AnyCheckpoint, names: Sequence[str], heads: Mapping[str, int] | None = None
                   ) -> Iterator[tuple[TensorInfo, TensorBytes]]:
    """``(info, bytes)`` for each name, in the order given: a safetensors tensor's bytes, a GGUF
    tensor's values (``heads``: llama's q/k rows to un-permute, by name; see ``data``).

    On sources without views (HTTP, fsspec), consecutive names whose tensors lie back to back in
    one file (holes of at most READ_AHEAD_GAP) come from one read of at most
    :func:`read_ahead_bytes`; larger tensors stay read on slice (RangedBytes, DecodedBytes).
    The bytes handed out are valid until the next item is taken.
    """
    heads = heads or {}
    infos: Sequence[TensorInfo]
    alone: Callable[[TensorInfo], TensorBytes]
    read_run: Callable[[TensorInfo, int], Any]
    piece: Callable[[TensorInfo, Any], TensorBytes]
    if ckpt.format == "gguf":
        g = ckpt.file
        infos = [ckpt.info(n) for n in names]
        keys: list[object | None] = [None if g.views or t.type.startswith("unknown") else g for t in infos]
        gguf = ckpt
        alone = lambda t: gguf.data(t.name, heads.get(t.name))
        read_run = lambda first, end: g.stored(first.name, 0, end - first.begin)
        piece = lambda t, b: g.decoded(t.name, heads.get(t.name), b)
    else:
        infos = [ckpt.info(n) for n in names]
        files = {n: ckpt.files[ckpt.file.part_of(n)] for n in names}
        keys = [None if capabilities(files[n].source).view else files[n] for n in names]
        safe = ckpt
        alone = lambda t: safe.data(t.name)

        def read_run(first: TensorInfo, end: int) -> memoryview:
            buf = alloc(end - first.begin)
            files[first.name].read_data(first.begin, buf)  # a failure names the tensor it hit
            return buf

        piece = lambda t, b: b
    # Each run infos[i:j] is one read: consecutive tensors of one file (keys: None for one read
    # on its own, such as one on a mapped file) close together, within the read-ahead window.
    window, i = read_ahead_bytes(), 0
    while i < len(infos):
        first, key, end, j = infos[i], keys[i], infos[i].end, i + 1
        while (key is not None and j < len(infos) and keys[j] is key and end <= infos[j].begin <= end + READ_AHEAD_GAP
               and infos[j].end - first.begin <= window):
            end, j = infos[j].end, j + 1
        if j == i + 1:
            yield first, alone(first)
        else:
            buf = read_run(first, end)
            for t in infos[i:j]:
                yield t, piece(t, buf[t.begin - first.begin : t.end - first.begin])
        i = j


def _open_file(found: Located, gguf: bool, shown: str, gguf_layout: bool) -> Checkpoint | GGUFCheckpoint:
    """The single file :func:`~pysafetensors.io.locate.locate` found, as a Checkpoint, or (with
    ``gguf``) a GGUFCheckpoint when its magic says so (its layout checked when ``gguf_layout``;
    a file of a split set opens the whole set)."""
    source = found.take_source()
    file_name = os.path.basename(redact_url(str(source.name or shown)).rstrip("/"))
    if found.format == "safetensors":
        return Checkpoint(shown, SafeFile(source), [file_name])
    if not gguf:
        source.close()
        raise GGUFUnsupported(
            f"{shown} is a GGUF file; this command works on safetensors checkpoints (inspect, id, diff, validate "
            "and stats read GGUF; `pysafetensors convert IN.gguf OUT.safetensors` converts it)", input_name=shown
        )
    gguf_file = open_gguf(source, validate=gguf_layout, unknown_types=True, open_part=found.sibling_opener())
    return GGUFCheckpoint(shown, gguf_file, file_name)


@overload
def open_checkpoint(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None, *,
                    gguf: Literal[False] = False, gguf_layout: bool = True,
                    max_input_size: int | None = None) -> Checkpoint: ...
@overload
def open_checkpoint(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None, *,
                    gguf: bool, gguf_layout: bool = True,
                    max_input_size: int | None = None) -> Checkpoint | GGUFCheckpoint: ...
def open_checkpoint(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None, *,
                    gguf: bool = False, gguf_layout: bool = True,
                    max_input_size: int | None = None) -> Checkpoint | GGUFCheckpoint:
    """Open a file, URL, index JSON, checkpoint directory or stream as one :class:`Checkpoint`.

    ``storage_options`` go to remote sources (for HTTP: ``timeout``, ``headers``, ``token``...).
    With ``gguf``, a GGUF file opens as a :class:`GGUFCheckpoint` (only its header is read);
    without, it is refused with GGUFUnsupported.  ``gguf_layout=False`` skips the check of
    where a GGUF's tensor data lies (aligned, inside the file, not overlapping): the header
    alone is parsed, which is all the structural ID needs (a file holding only the header and
    the tensor descriptions, such as weight-inspect's ``tiny.gguf``, then opens); its tensors
    must not be read.  A stream is copied to a temporary file first, at most ``max_input_size``
    bytes (:mod:`pysafetensors.io.spool`; None: its default cap).  Errors name the input, with a
    URL's secrets removed.
    """
    path = os.fspath(path)
    shown = redact_url(path)
    try:
        found = locate(path, storage_options, max_input_size=max_input_size)
        if not found.index:
            return _open_file(found, gguf, shown, gguf_layout)
        sharded = open_index(found.location, None, storage_options)  # the backend is chosen per file
    except SafetensorError as e:
        raise name_input(shown, e) from None
    return _from_sharded(shown, sharded)

__all__ = ["AnyCheckpoint", "Checkpoint", "GGUFCheckpoint", "GGUFTensor", "MetadataDisagreement", "RangedBytes",
           "ReadOnSlice", "ShardMetadata", "TensorAccess", "TensorBytes", "ValueTensor", "is_sharded_path", "matches",
           "open_checkpoint", "stream_tensors"]
