"""Sharded checkpoints: read an index (or a directory) as one logical file; write shards + index.

Reading: ``handle.open_file`` hands a ``*.index.json`` (local, URL or fsspec), or a local
directory holding one, to :func:`open_index`, which makes a :class:`ShardedFile`: names and
metadata come from the index; a shard's header is read (with ``pread``, for a local one) when
one of its tensors' dtype or shape is asked for, and the shard is opened for reading (mapped,
its backend chosen) when one of its tensors is read; either way it is checked against the
index the first time (``format.index.check_shard``).  Writing:
:func:`write_sharded` plans shards greedily in key order (huggingface_hub's rule), stages every
file, then publishes the set in an order that never shows a reader a mixed or partial set as a
checkpoint (see its docstring).
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import (
    CheckpointMismatch,
    FileClosed,
    InvalidIndex,
    SerializeError,
    TensorNotFound,
    UnmappedTensorWarning,
)
from .format._gcpause import paused_gc
from .format.dtypes import DType
from .format.header import HEADER_CAP, Header, TensorInfo, parse_header
from .format.index import (
    CHECKPOINT_ID_KEY,
    DEFAULT_MAX_SHARD_SIZE,
    ShardCheck,
    ShardIndex,
    check_shard,
    encode_index,
    index_file_name,
    parse_index,
    plan_shards,
    shard_name_pattern,
    shard_names,
    without_checkpoint_id,
)
from .format.slicing import SlicePlan
from .io.locate import (
    backend_chooser,
    find_in_directory,
    is_index_name,
    pick_checkpoint_file,
)
from .io.memory import mem_available
from .io.protocols import capabilities
from .io.registry import check_backend, open_source, sibling_url, url_scheme
from .io.sources import PreadSource
from .reader import RawTensor, RegionRead, SafeFile, check_threads, default_threads, read_header_bytes

if TYPE_CHECKING:
    from .io.protocols import ByteSource
    from .io.targets import StorageOptions
    from .writer import WriteItem

# --- reading ------------------------------------------------------------------------------

INDEX_CAP = HEADER_CAP  # an index lists names like a header does; the same cap bounds memory
# Reading a sharded checkpoint whole: remote shards fetched at once (each already runs several
# range requests), and how far beyond the next shard the reads may run ahead of the consumer.
_SHARDS_AT_ONCE = 8
_READ_AHEAD = 256 << 20
# Shards opened for single tensors (get_tensor, get_slice) kept open at once: a loader that
# reads tensor by tensor, shard after shard, keeps this many maps (and their touched pages)
# rather than every shard's.  The least recently used one beyond it is closed; tensors already
# handed out stay valid (each holds its own view of the map).
OPEN_SHARDS = 2


class ShardedFile:
    """Several shard files behind one index, read as one file (the SafeFile interface)."""

    def __init__(
        self,
        index: ShardIndex,
        open_shard: Callable[[str], SafeFile],
        name: str,
        locate: Callable[[str], str] | None = None,
        *,
        remote: bool = False,
        read_header: Callable[[str], SafeFile] | None = None,
    ) -> None:
        self.index = index
        self.name = name
        self._open_shard = open_shard
        # A shard's header alone, its file closed when it is returned (``describe`` and
        # ``info`` need no more); None: they open the shard as a read does.
        self._read_header = read_header
        # Shards behind a network round trip each: their headers are fetched concurrently.
        self.remote = remote
        # Where a shard lives (a path or URL next to the index), for tools that read it raw.
        self.locate: Callable[[str], str] = locate or (lambda shard: shard)
        # Shards asked for as files (``shard``, bulk reads): kept until ``close``.
        self._shards: dict[str, SafeFile] = {}
        # Shards opened for single tensors (``file_of``), least recently used first: at most
        # OPEN_SHARDS of them.
        self._recent: dict[str, SafeFile] = {}
        # Shards not open now whose headers were read: closed to keep OPEN_SHARDS, or read for
        # their header only.  Their parsed headers still answer ``info``.
        self._evicted: dict[str, SafeFile] = {}
        self._checks: dict[str, ShardCheck] = {}
        # The dtype and shape of every tensor read so far from the shard the index maps it to,
        # as columns (``_at``: name -> row), filled once per shard when it is first checked:
        # ``describe`` (every get_slice) answers with one lookup, whether the shard is still
        # open or not, and keeps no object per tensor (see ``format.header.Header``).
        self._at: dict[str, int] = {}
        self._dtypes: list[DType] = []
        self._shapes: list[tuple[int, ...]] = []
        self._lock = threading.Lock()
        self._closed = False

    # --- index facts --------------------------------------------------------------------
    @property
    def metadata(self) -> dict[str, str] | None:
        """The index's metadata (``total_size`` and user entries) as strings; None when empty.

        The checkpoint id is bookkeeping and is left out."""
        meta = self.index.user_metadata
        if not meta:
            return None
        return {k: v if isinstance(v, str) else _to_str(v) for k, v in meta.items()}

    def shard_metadata(self, shard: str) -> dict[str, str] | None:
        """A shard's header metadata without the checkpoint id (None when nothing is left)."""
        return without_checkpoint_id(self.shard(shard).metadata)

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
        self._open_all(self.shard_names)
        return [t.name for shard in self.shard_names for t in self.shard_tensors(shard)]

    def shard_tensors(self, shard: str) -> list[TensorInfo]:
        """The tensors read from ``shard``, in its data order: those the index maps to it."""
        f = self.shard(shard)
        ignored = set(self.check(shard).ignored)
        return [t for t in f.header.tensors if t.name not in ignored] if ignored else list(f.header.tensors)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.index.weight_map

    def check_open(self) -> None:
        if self._closed:
            raise FileClosed("File is closed")

    # --- shards ---------------------------------------------------------------------------
    def shard(self, shard: str) -> SafeFile:
        """The SafeFile of one shard, opened on first use and checked against the index.

        A shard from another save (checkpoint ids differ) is refused; tensors the index does not
        map to it are left out, with an UnmappedTensorWarning.  A mapped tensor the shard lacks
        is an error when it is asked for (``file_of``) or when every tensor is read.
        """
        with self._lock:
            self.check_open()
            f = self._shards.get(shard)
            if f is not None:
                return f
            f = self._recent.pop(shard, None)
            if f is not None:  # kept from now on
                self._shards[shard] = f
                return f
        # Opened outside the lock, so threads reading different shards open them at once; a
        # thread that loses the race to open the same shard closes its copy (``_adopt``).
        return self._adopt(shard, self._open_shard(shard))

    def _adopt(self, shard: str, f: SafeFile, recent: bool = False, header_only: bool = False) -> SafeFile:
        """Check a freshly opened shard against the index and keep it (or the copy another
        thread kept first); ``recent``: among the shards opened for single tensors;
        ``header_only``: a closed file read for its header, kept with the evicted ones."""
        evicted: list[SafeFile] = []
        try:
            with self._lock:
                check = self._checks.get(shard)
            first = check is None
            if check is None:
                check = check_shard(self.index, shard, f.header.names, f.metadata)
                if check.mixed:
                    raise CheckpointMismatch(
                        check.describe_mixed(self.name), shard=shard, index_id=check.index_id, shard_id=check.shard_id
                    )
            with self._lock:
                self.check_open()
                if shard not in self._checks:
                    self._checks[shard] = check
                    self._add_columns(f, check)
                else:
                    check = self._checks[shard]
                kept = self._shards.get(shard) or self._recent.get(shard)
                if header_only:
                    kept = kept or self._evicted.get(shard)
                    if kept is None:
                        self._evicted[shard] = f
                elif kept is None:
                    if recent:
                        self._recent[shard] = f
                        self._evicted.pop(shard, None)
                        while len(self._recent) > OPEN_SHARDS:
                            oldest = next(iter(self._recent))
                            evicted.append(self._recent.pop(oldest))
                            self._evicted[oldest] = evicted[-1]
                    else:
                        self._shards[shard] = f
        except BaseException:
            f.close()
            raise
        for old in evicted:
            old.close()
        if kept is not None:
            f.close()
            return kept
        if check.ignored and first:
            warnings.warn(UnmappedTensorWarning(check.describe_ignored(self.name)), stacklevel=3)
        return f

    def _add_columns(self, f: SafeFile, check: ShardCheck) -> None:
        """Add the dtype and shape of every tensor the index maps to ``f``'s shard (and it
        holds) to the columns ``describe`` reads.  Under the lock, once per shard."""
        header = f.header
        names = header.names
        base = len(self._dtypes)
        self._dtypes.extend(header.dtypes)
        self._shapes.extend(header.shapes)
        rows = zip(names, range(base, base + len(names)))
        if check.ignored:  # not read from this shard: left out, as every read leaves them out
            ignored = set(check.ignored)
            self._at.update((n, i) for n, i in rows if n not in ignored)
        else:
            self._at.update(rows)

    def _open_all(self, shards: Sequence[str], complete: bool = False) -> None:
        """Open (and check, see ``check``) every shard, in order; remote ones are opened
        concurrently (each header is a round trip).  The first failure in shard order is
        raised; shards that opened are kept either way (they are closed with the file)."""
        with self._lock:
            self.check_open()
            missing = [s for s in shards if s not in self._shards]
        failed: dict[str, BaseException] = {}
        if self.remote and len(missing) > 1:
            from concurrent.futures import ThreadPoolExecutor

            def attempt(shard: str) -> SafeFile | BaseException:
                try:
                    return self._open_shard(shard)
                except Exception as e:  # noqa: BLE001 - raised below, in shard order
                    return e

            with ThreadPoolExecutor(min(len(missing), _SHARDS_AT_ONCE)) as pool:
                opened = list(pool.map(attempt, missing))
            for shard, f in zip(missing, opened):
                try:
                    if isinstance(f, BaseException):
                        raise f
                    self._adopt(shard, f)
                except Exception as e:  # noqa: BLE001 - raised below, in shard order
                    failed[shard] = e
        for shard in shards:
            if shard in failed:
                raise failed[shard]
            self.check(shard, complete)

    def check(self, shard: str, complete: bool = False) -> ShardCheck:
        """How ``shard`` agrees with the index (opens it); ``complete``: also raise InvalidIndex
        when it lacks a tensor the index maps to it."""
        self.shard(shard)
        check = self._checks[shard]
        if complete and check.missing:
            raise InvalidIndex(
                check.describe_missing(self.name), tensor=check.missing[0], shard=shard, missing=check.missing
            )
        return check

    def file_of(self, name: str) -> SafeFile:
        """The open shard holding tensor ``name``: a kept shard, or one opened for single
        tensors (at most OPEN_SHARDS of those stay open; see ``_single``)."""
        shard = self._shard_of(name)
        with self._lock:
            self.check_open()
            f = self._shards.get(shard)
            if f is None:
                f = self._recent.pop(shard, None)
                if f is not None:
                    self._recent[shard] = f  # now the most recently used
        if f is None:
            f = self._adopt(shard, self._open_shard(shard), recent=True)
        self._check_mapped(name, shard)
        return f

    def _shard_of(self, name: str) -> str:
        """The shard the index puts tensor ``name`` in (TensorNotFound if none; FileClosed after close)."""
        self.check_open()
        shard = self.index.weight_map.get(name) if isinstance(name, str) else None
        if shard is None:
            raise TensorNotFound(f"File does not contain tensor {name}", tensor=name)
        return shard

    def _check_mapped(self, name: str, shard: str) -> None:
        if name in self._checks[shard].missing:
            raise InvalidIndex(
                f"{self.name}: the index puts tensor {name!r} in {shard}, which does not contain it",
                tensor=name,
                shard=shard,
            )

    def _single(self, name: str, read: Callable[[SafeFile], Any]) -> Any:
        """``read(file_of(name))``, again if another thread closed that shard (to keep at most
        OPEN_SHARDS open) between the lookup and the read."""
        while True:
            f = self.file_of(name)
            try:
                return read(f)
            except FileClosed:
                with self._lock:
                    if self._closed or any(g is f for g in self._shards.values()):
                        raise
                    if self._recent.get(self.index.weight_map[name]) is f:
                        raise  # still ours, so closed by something else: not an eviction

    # --- the SafeFile interface --------------------------------------------------------------
    def _header_of(self, shard: str) -> SafeFile:
        """A SafeFile with ``shard``'s header, checked against the index: an open shard, one
        opened before (open or closed since), else its header read now (the shard opened for
        single tensors when there is no header-only reader)."""
        f = self._shards.get(shard) or self._recent.get(shard) or self._evicted.get(shard)
        if f is not None:
            return f
        if self._read_header is None:
            return self._adopt(shard, self._open_shard(shard), recent=True)
        return self._adopt(shard, self._read_header(shard), header_only=True)

    def info(self, name: str) -> TensorInfo:
        shard = self._shard_of(name)
        f = self._header_of(shard)
        self._check_mapped(name, shard)
        return f.entry(name)

    def describe(self, name: str) -> tuple[DType, tuple[int, ...]]:
        """``name``'s dtype and shape (``info`` without building the entry): what every
        ``get_slice`` asks, answered from the columns once its shard's header was read."""
        if self._closed:
            raise FileClosed("File is closed")
        try:
            i = self._at.get(name)
        except TypeError:  # unhashable: no tensor's name
            i = None
        if i is None:
            shard = self._shard_of(name)
            self._header_of(shard)
            self._check_mapped(name, shard)  # a mapped tensor its shard lacks: InvalidIndex
            i = self._at.get(name)
            if i is None:  # closed meanwhile (close empties ``_at``)
                raise FileClosed("File is closed")
        return self._dtypes[i], self._shapes[i]

    def raw(self, name: str) -> RawTensor:
        raw: RawTensor = self._single(name, lambda f: f.raw(name))
        return raw

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor:
        raw: RawTensor = self._single(name, lambda f: f.raw_slice(name, plan))
        return raw

    def raw_all(self, threads: int | None = None) -> Iterator[RawTensor]:
        """Every tensor listed in the index, shard by shard in file order.

        Every shard is opened and checked against the index first, so a missing or mismatched
        shard is an error before any tensor is read.  Shards that copy (``pread``, HTTP,
        fsspec) need a buffer each, all kept by a bulk load: their total is checked against
        the memory this process can have before anything is allocated (InsufficientMemory).
        With more than one such shard, the next shards are read while the current one is
        handed out (``_read_ahead``).  Mapped shards are handed out as SafeFile.raw_all does.
        """
        threads = check_threads(threads)
        self.check_open()
        shards = self.shard_names
        self._open_all(shards, complete=True)
        parts = [(self.shard(s), frozenset(self.check(s).ignored)) for s in shards]
        copying = [f for f, _ in parts if f.copies]
        if copying:
            total = sum(f.header.data_size for f in copying)
            workers = default_threads() if threads is None else threads
            what = f"all tensors of {len(copying)} shard(s)"
            copying[0].check_memory(total, what, workers, bulk=True, source=self.name)
        advice = _MapAdvice()
        if len(copying) < 2:
            for f, ignored in parts:
                raws = advice.raw_all(f, threads) if not f.copies else f.raw_all(threads, checked=True)
                for raw in raws:
                    if raw.name not in ignored:
                        yield raw
            return
        yield from self._read_ahead(parts, threads, advice)

    def _read_ahead(
        self, parts: list[tuple[SafeFile, frozenset[str]]], threads: int | None, advice: _MapAdvice
    ) -> Iterator[RawTensor]:
        """Hand out the shards' tensors in order while the next shards are read in the background.

        Copying shards are read by one pool: for pread, ``threads`` threads (default: the CPUs
        available) share all the shards' 16 MiB pieces, in order, so no thread idles at a
        shard boundary and small shards are read in parallel; remote shards are read up to
        ``_SHARDS_AT_ONCE`` at a time, each fanning out into concurrent range requests itself.
        Reading ahead stops at the next shard, plus further shards while they add up to at most
        ``_READ_AHEAD`` bytes: a consumer that drops each shard's tensors holds at most that
        much beyond the shard it is using.  A failed read raises the shard's SourceError when its
        shard is reached; reads not started yet are cancelled.
        """
        from concurrent.futures import Future, ThreadPoolExecutor

        parallel = all(capabilities(f.source).parallel for f, _ in parts if f.copies)
        if parallel:
            size = default_threads() if threads is None else threads
        else:
            size = min(_SHARDS_AT_ONCE, sum(1 for f, _ in parts if f.copies))
        pool = ThreadPoolExecutor(max_workers=size)
        started: dict[int, tuple[RegionRead, list[Future[None]]]] = {}
        submitted = 0  # parts[:submitted] have been started (or need no reading)
        try:
            for k, (f, ignored) in enumerate(parts):
                ahead = sum(g.header.data_size for g, _ in parts[k + 1 : submitted] if g.copies)
                while submitted < len(parts) and (
                    submitted <= k + 1 or ahead + parts[submitted][0].header.data_size <= _READ_AHEAD
                ):
                    g = parts[submitted][0]
                    if submitted > k:
                        ahead += g.header.data_size if g.copies else 0
                    if g.copies:
                        read = g.region_read(threads)
                        started[submitted] = (read, [pool.submit(read.read, piece) for piece in read.pieces])
                    submitted += 1
                if k not in started:  # a mapped shard: views, nothing to read
                    raws: Iterator[RawTensor] = advice.raw_all(f, threads)
                else:
                    read, futures = started[k]
                    for future in futures:
                        try:
                            future.result()
                        except OSError as e:
                            raise read.failed(e) from e
                    del started[k]
                    raws = read.tensors()
                for raw in raws:
                    if raw.name not in ignored:
                        yield raw
        finally:
            for _, futures in started.values():
                for future in futures:
                    future.cancel()
            pool.shutdown(wait=True)  # no thread may still write into a buffer once we return

    # --- the CheckpointFiles interface: the shards, in index order ----------------------------
    def parts(self) -> list[SafeFile]:
        return [self.shard(s) for s in self.shard_names]

    def part_tensors(self, i: int) -> list[TensorInfo]:
        return self.shard_tensors(self.shard_names[i])

    def part_metadata(self, i: int) -> dict[str, str] | None:
        return self.shard_metadata(self.shard_names[i])

    def part_of(self, name: str) -> int:
        return self.shard_names.index(self._shard_of(name))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            shards = [*self._shards.values(), *self._recent.values()]
            self._shards, self._recent, self._evicted, self._checks, self._at = {}, {}, {}, {}, {}
        for f in shards:
            f.close()


class _MapAdvice:
    """Read-ahead shared by the mapped shards of one bulk load.

    A shard read whole on its own is read ahead as far as the source allows (half the memory
    available, see ``MmapSource.prefetch``); shards read one after another share that
    allowance instead, taken from the memory available when the load starts, so a checkpoint
    larger than memory does not read its last shards ahead over its first ones before they
    are used.  Beyond it, pages are read when first touched.
    """

    def __init__(self) -> None:
        self.started = False
        self.left: int | None = None  # None: no bound known

    def raw_all(self, f: SafeFile, threads: int | None) -> Iterator[RawTensor]:
        if not self.started:  # at the first mapped shard: a load of copying shards never asks
            self.started = True
            available = mem_available()
            self.left = None if available is None else available // 2
        asked = f.advise_all(self.left)
        if self.left is not None:
            self.left -= asked
        return f.raw_all(threads, advise=False)


def _to_str(v: Any) -> str:
    import json

    return json.dumps(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else str(v)


def open_index(
    location: Any, backend: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> ShardedFile:
    """Open an index file (path or URL); shard files are resolved next to it and each opened
    through ``io.open_source`` with ``backend`` (None: chosen per shard).

    Local files are read with ``pread`` where only their bytes are wanted: the index, and a
    shard's header when only its tensors' dtypes and shapes are asked for (``describe``,
    ``info``); no backend is chosen and nothing is mapped until a tensor is read."""
    location = os.fspath(location) if isinstance(location, os.PathLike) else location
    check_backend(backend)  # an invalid one is refused here, whichever files are read later
    scheme = url_scheme(location)
    remote = scheme not in (None, "file")
    # Every file's backend (each shard's) is chosen by the filesystem it is on (a shard may be
    # a mount point itself).
    backend_for = backend_chooser(backend, remote)
    src = PreadSource(location) if scheme is None else open_source(location, backend_for(location), storage_options)
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
    index = parse_index(data, name)
    if remote:

        def shard_location(shard: str) -> str:
            return sibling_url(location, shard)
    else:
        directory = os.path.dirname(os.path.abspath(location))

        def shard_location(shard: str) -> str:
            return os.path.join(directory, shard)

    # Each shard's header as last read: its bytes, the file's size then, and the parse.  A shard
    # opened again (for its tensors after its header alone was read, or after it was closed to
    # keep OPEN_SHARDS) still reads its header from the new source, and takes the parse when
    # those bytes and the size are the same (the parse depends on nothing else).
    seen: dict[str, tuple[bytearray, int, Header]] = {}

    def with_header(shard: str, src: ByteSource) -> SafeFile:
        try:
            raw = read_header_bytes(src)
            known = seen.get(shard)
            if known is not None and known[1] == src.size and known[0] == raw:
                header = known[2]
            else:
                header = parse_header(raw, src.size)
                seen[shard] = (raw, src.size, header)
        except BaseException:
            src.close()
            raise
        return SafeFile(src, header)

    def open_shard(shard: str) -> SafeFile:
        where = shard_location(shard)
        return with_header(shard, open_source(where, backend_for(where), storage_options))

    def read_header(shard: str) -> SafeFile:
        f = with_header(shard, PreadSource(shard_location(shard)))
        f.close()
        return f

    # Remote: the shard opened for its header serves its reads too (each open is a round trip).
    header_only = None if remote else read_header
    return ShardedFile(index, open_shard, name, shard_location, remote=remote, read_header=header_only)


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
    storage_options: StorageOptions = None,
) -> str:
    """Write ``items`` as Hugging Face shards (+ index when more than one) into ``directory``.

    Every shard's header carries ``shard_metadata`` (default: ``metadata``); the index has
    ``{"total_size": ..., **metadata}``.  With more than one shard, the index and every shard
    also carry a fresh checkpoint id (``format.index.CHECKPOINT_ID_KEY``; readers leave it out
    of the metadata they show).  Items with the same ``storage_ids`` value stay in one shard.
    Returns the index path, or the single file's path when everything fits in one shard.

    All or nothing, as far as a directory allows: every file is first written (and, when
    ``durable``, fsynced) into a hidden staging directory inside ``directory``; a failure or a
    kill up to there leaves ``directory`` as it was.  Publishing moves the files in by rename,
    in an order that keeps every intermediate state either the old checkpoint, or one that
    readers refuse: new shards whose names the old checkpoint does not use go in while the old
    index still stands, and the new index replaces it last; when a new shard would replace a
    file of the old set, the old index is taken out first (a directory with shards and no index
    is no checkpoint here, nor for transformers).  Stale files of the earlier save with the
    same base name are removed afterwards.  A shard from another save under an index (two saves
    racing into one directory) is refused by its checkpoint id.

    ``directory`` may be an fsspec URL prefix (``s3://bucket/ckpt/``; ``storage_options`` go
    to its filesystem).  Each file is then streamed to the store and appears all at once
    (``io.remote_sinks``), and the set is published in the same order with one difference,
    since an object store has no rename: files whose names are free are written straight to
    their keys, and only files that replace existing ones are staged (under a hidden prefix)
    and copied in at the end (``io.remote_prefix.RemoteStage``).  A failure removes what the
    save wrote; a killed save leaves its new shards and no new index (the old checkpoint, if
    its names differ, still reads; otherwise the prefix is refused as a checkpoint), and, on
    S3, the pending upload of the shard it was writing (``remove_stale_uploads``).
    """
    # The write side is imported here, on first save: opening a checkpoint never needs it.
    import secrets

    from .format.layout import checked_name, unique_by_name
    from .io.targets import is_url_target, open_directory, open_sink
    from .writer import write_file

    if metadata is not None and "total_size" in metadata:
        raise SerializeError("metadata key 'total_size' is reserved for the index (sum of tensor bytes)")
    if metadata is not None and CHECKPOINT_ID_KEY in metadata:
        raise SerializeError(f"metadata key {CHECKPOINT_ID_KEY!r} is reserved for the checkpoint id")
    # The save's one check of the names (a str, not __metadata__, each once): the plan and
    # every shard's layout trust it.
    named = unique_by_name(items, lambda i: checked_name(i.name))
    ids = storage_ids or {}
    sizes = {i.name: _nbytes(i) for i in named.values()}
    plan = plan_shards(((n, sizes[n], ids.get(n)) for n in named), max_shard_size, names_checked=True)
    files = shard_names(len(plan), basename, variant)
    index_name = index_file_name(basename, variant)
    base_meta = without_checkpoint_id(metadata if shard_metadata is None else shard_metadata)
    target = open_directory(directory, storage_options)
    target.ensure()
    if not is_url_target(directory):
        # Every name this save replaces or removes, checked before anything is written: a FIFO,
        # device node, socket or directory there is refused (WriteError), never replaced or
        # deleted.  (A store holds plain objects only: nothing to check, no listing to pay.)
        stale = _stale_shards(target.names(), files, basename, variant)
        if len(plan) == 1:
            target.check_names(files, [index_name, *stale])
        else:
            target.check_names([*files, index_name], [*stale, *shard_names(1, basename, variant)])
    if len(plan) == 1:
        # One plain file, replaced atomically; then the old index goes (the switch), then its shards.
        single = target.join(files[0])
        write_file([named[n] for n in plan[0]], single, base_meta, durable=durable, storage_options=storage_options,
                   names_checked=True)
        target.remove([index_name, *_stale_shards(target.names(), files, basename, variant)])
        return single

    checkpoint_id = secrets.token_hex(16)
    shard_meta = {**(base_meta or {}), CHECKPOINT_ID_KEY: checkpoint_id}
    index = ShardIndex(
        weight_map={n: f for f, shard in zip(files, plan) for n in shard},
        metadata={**dict(metadata or {}), "total_size": sum(sizes.values()), CHECKPOINT_ID_KEY: checkpoint_id},
    )
    label = f"{basename}.{variant}" if variant else basename
    stage = target.stage(label, durable=durable, names=[*files, index_name])
    try:
        for shard_file, shard in zip(files, plan):
            write_file([named[n] for n in shard], stage.file(shard_file), shard_meta, durable=durable,
                       storage_options=storage_options, names_checked=True)
        with open_sink(stage.file(index_name), durable=durable, storage_options=storage_options) as sink:
            sink.write([encode_index(index).encode("utf-8")])
        if any(stage.exists(f) for f in files):
            stage.set_aside(index_name)  # a shard of the old set is about to be replaced
        stale = [*_stale_shards(target.names(), files, basename, variant), *shard_names(1, basename, variant)]
        stage.publish([*files, index_name], remove=stale)
    except BaseException:
        stage.abort()
        raise
    return target.join(index_name)


def _nbytes(item: WriteItem) -> int:
    return item.dtype.nbytes(math.prod(item.shape))


def _stale_shards(names: list[str], written: list[str], basename: str, variant: str | None) -> list[str]:
    # A directory is read as "its index, else its only file": leftovers of an earlier save
    # with another shard count would otherwise shadow or pollute this one.
    pattern = shard_name_pattern(basename, variant)
    keep = set(written)
    return [n for n in names if pattern.match(n) and n not in keep]


__all__ = [
    "ShardedFile",
    "find_in_directory",
    "is_index_name",
    "open_index",
    "pick_checkpoint_file",
    "write_sharded",
]
