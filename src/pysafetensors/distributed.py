"""Loading one checkpoint across the ranks of a torch.distributed job.

Three ways, for anything ``safe_open`` opens (file, URL, fsspec URL, sharded index/directory).
``backend`` is ``safe_open``'s: None (the default) reads each file with mmap, or with pread
on a network or FUSE filesystem, where such jobs usually read their checkpoints.

* :func:`load_partition` - each rank reads a disjoint part (whole shards of a sharded
  checkpoint, else a byte-balanced run of tensors) and gets only those tensors.
* :func:`load_tensor_parallel` - each rank reads only its slice of the tensors you split
  (``get_slice`` reads just those bytes) and the whole of the others.
* :func:`load_file_cooperative` - every rank ends with every tensor, but each reads only
  1/world of the bytes; the pieces are exchanged with ``all_gather`` (gloo, nccl...).

The transport is torch.distributed's own; nothing here opens sockets.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from typing import Any

from ._adapters import load_adapter
from ._device import parse_device
from ._optional import require
from .format.header import TensorInfo
from .handle import open_file
from .reader import RawTensor, SafeFile
from .sharded import ShardedFile

Split = Mapping[str, int] | Callable[[str, tuple[int, ...]], "int | None"]


def _rank_world(group: Any, rank: int | None, world_size: int | None) -> tuple[int, int]:
    if rank is not None and world_size is not None:
        r, w = int(rank), int(world_size)
    else:
        dist = require("torch.distributed", "torch")
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "torch.distributed is not initialized: call init_process_group() first, "
                "or pass rank= and world_size="
            )
        r = dist.get_rank(group) if rank is None else int(rank)
        w = dist.get_world_size(group) if world_size is None else int(world_size)
    if not 0 <= r < w:
        raise ValueError(f"rank {r} is outside a world of {w}")
    return r, w


def _parts(file: SafeFile | ShardedFile) -> list[tuple[SafeFile, list[TensorInfo]]]:
    """(file, tensors in data order) per physical file; shards are opened here."""
    if isinstance(file, SafeFile):
        return [(file, list(file.header.tensors))]
    out = []
    for shard in file.shard_names:
        out.append((file.shard(shard), file.shard_tensors(shard)))
    return out


def _convert(adapter: Any, raws: list[RawTensor], device: Any) -> dict[str, Any]:
    return {raw.name: adapter.from_raw(raw, device) for raw in raws}


def load_partition(
    filename: Any,
    *,
    framework: str = "pt",
    device: Any = "cpu",
    group: Any = None,
    rank: int | None = None,
    world_size: int | None = None,
    backend: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """This rank's disjoint part of the checkpoint; the parts of all ranks cover every tensor.

    Sharded: shard ``i`` (in index order) goes to rank ``i % world``, and only those shards
    are opened.  A single file: tensors in file order are split into ``world`` runs of about
    equal bytes.  No collective is called, so ``rank``/``world_size`` may be given instead.
    """
    r, w = _rank_world(group, rank, world_size)
    adapter, dev = load_adapter(framework), parse_device(device)
    file = open_file(filename, backend, storage_options)
    try:
        if isinstance(file, ShardedFile):
            mine = [s for i, s in enumerate(file.shard_names) if i % w == r]
            out: dict[str, Any] = {}
            for shard in mine:
                out.update(_convert(adapter, [file.raw(t.name) for t in file.shard_tensors(shard)], dev))
            return out
        tensors = file.header.tensors
        total = max(file.header.data_size, 1)
        # A tensor belongs to the rank whose byte run holds its middle byte.
        names = [t.name for t in tensors if min(w - 1, (t.begin + t.end) * w // (2 * total)) == r]
        return _convert(adapter, [file.raw(n) for n in names], dev)
    finally:
        file.close()


def _split_dim(split: Split, name: str, shape: tuple[int, ...]) -> int | None:
    if callable(split):
        return split(name, shape)
    if name in split:
        return split[name]
    for pattern, dim in split.items():
        if fnmatch.fnmatchcase(name, pattern):
            return dim
    return None


def shard_bounds(length: int, rank: int, world: int) -> tuple[int, int]:
    """[start, stop) of ``rank``'s part of ``length`` items, sizes as ``torch.tensor_split``."""
    base, extra = divmod(length, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


def load_tensor_parallel(
    filename: Any,
    split: Split,
    *,
    framework: str = "pt",
    device: Any = "cpu",
    group: Any = None,
    rank: int | None = None,
    world_size: int | None = None,
    backend: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every tensor, with those named in ``split`` cut along a dimension to this rank's part.

    ``split`` maps a name or an fnmatch pattern (``"*.q_proj.weight"``) to the dimension to
    split, or is a callable ``(name, shape) -> dim | None``.  Parts follow
    ``torch.tensor_split`` (the first ``size % world`` ranks get one more); only the bytes of
    this rank's part are read (``get_slice``).  Other tensors are read whole.
    """
    from .handle import safe_open

    r, w = _rank_world(group, rank, world_size)
    out: dict[str, Any] = {}
    with safe_open(filename, framework, device, backend=backend, storage_options=storage_options) as f:
        names = f.keys()
        for name in names:
            sl = f.get_slice(name)
            shape = tuple(sl.get_shape())
            dim = _split_dim(split, name, shape)
            if dim is None:
                out[name] = f.get_tensor(name)
                continue
            if not -len(shape) <= dim < len(shape):
                raise ValueError(f"tensor {name!r} {list(shape)}: cannot split along dim {dim}")
            dim %= len(shape)
            start, stop = shard_bounds(shape[dim], r, w)
            index = (slice(None),) * dim + (slice(start, stop),)
            out[name] = sl[index]
    return out


def load_file_cooperative(
    filename: Any,
    *,
    framework: str = "pt",
    device: Any = "cpu",
    group: Any = None,
    backend: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Every tensor on every rank, each byte read from storage by one rank only.

    The tensors' bytes (all shards, in order) are cut into ``world`` equal runs; each rank
    reads its run and ``all_gather`` assembles the whole on every rank.  The returned
    tensors share one buffer.  Needs an initialized process group (gloo works on CPU).
    """
    torch = require("torch", "torch")
    dist = require("torch.distributed", "torch")
    r, w = _rank_world(group, None, None)
    adapter, dev = load_adapter(framework), parse_device(device)
    file = open_file(filename, backend, storage_options)
    try:
        parts = _parts(file)
        layout: list[tuple[SafeFile, TensorInfo, int]] = []  # file, tensor, offset in the gathered buffer
        pos = 0
        for f, infos in parts:
            for t in infos:
                layout.append((f, t, pos))
                pos += -(-t.nbytes // 8) * 8  # keep every tensor 8-byte aligned in the buffer
        chunk = max(1, -(-pos // w))
        lo, hi = r * chunk, min(pos, (r + 1) * chunk)
        mine = torch.zeros(chunk, dtype=torch.uint8)
        mine_view = memoryview(mine.numpy())
        for f, t, at in layout:
            a, b = max(lo, at), min(hi, at + t.nbytes)
            if a < b:
                f.read_data(t.begin + (a - at), mine_view[a - lo : b - lo], tensor=t.name)
        gathered = torch.empty(chunk * w, dtype=torch.uint8)
        if dist.get_backend(group) == "nccl":  # nccl moves CUDA tensors only: gather there, come back
            on_gpu = torch.empty(chunk * w, dtype=torch.uint8, device="cuda")
            dist.all_gather(list(on_gpu.split(chunk)), mine.cuda(), group=group)
            gathered.copy_(on_gpu)
        else:
            dist.all_gather(list(gathered.split(chunk)), mine, group=group)
        data = memoryview(gathered.numpy())
        raws = [RawTensor(t.name, t.dtype, t.shape, data[at : at + t.nbytes], False, True) for _, t, at in layout]
        return _convert(adapter, raws, dev)
    finally:
        file.close()


__all__ = ["load_file_cooperative", "load_partition", "load_tensor_parallel", "shard_bounds"]
