"""Staged host -> device loading for torch: a small ring of reused (pinned) host buffers.

``load_file(path, device="cuda")`` and ``safe_open(..., device="cuda").get_tensors()`` come
here.  Every destination tensor is allocated once on the device; the file's data region is
read chunk by chunk into a ring of ``buffers`` host buffers of ``buffer_bytes`` each (pinned
when the destination is CUDA), and each chunk is copied to its tensors with
``non_blocking=True`` on a side stream.  A buffer is refilled only after the event recorded
behind its last copy has completed, so reading chunk k+1 from disk overlaps the DMA of chunk
k while host memory stays bounded (default 2 x 64 MiB) whatever the file size.

The same loop runs with a CPU destination and plain buffers (``_SyncOps``): that is how
the tests exercise the pipeline on machines without CUDA.

``register_host=True`` instead registers the whole mapped file with
``cudaHostRegister`` (through ``torch.cuda.cudart()``) so copies DMA straight from the page
cache, and unregisters it afterwards.  Registering pins every page of the file first, which
is only worth it when the file is hot in the page cache (benchmarks/RESULTS.md lists it under
"Not measured").
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from ._adapters.torch import _torch_shape, require_available, torch_dtype
from ._device import parse_device
from ._optional import require
from .io.memory import check_allocation
from .io.protocols import capabilities
from .io.registry import open_source
from .reader import SafeFile, check_threads, default_threads
from .sharded import ShardedFile

torch = require("torch", "torch")

__all__ = ["DEFAULT", "StagingConfig", "load_to_device"]


@dataclass(frozen=True)
class StagingConfig:
    """Ring size and buffer size for staged loads (host memory used: buffers x buffer_bytes)."""

    buffers: int = 2
    buffer_bytes: int = 64 << 20
    register_host: bool = False


DEFAULT = StagingConfig(
    buffers=int(os.environ.get("PYSAFETENSORS_STAGING_BUFFERS", "2")),
    buffer_bytes=int(os.environ.get("PYSAFETENSORS_STAGING_BYTES", str(64 << 20))),
)


_CUDA_HOST_REGISTER_READ_ONLY = 0x08  # cudaHostRegisterReadOnly (CUDA >= 11.1)


class _SyncOps:
    """CPU destination: copies complete at once, nothing to wait for."""

    def event_after_copies(self) -> Any:
        return None

    def wait(self, event: Any) -> None:
        pass

    def copy(self, dst: Any, src: Any) -> None:
        dst.copy_(src)

    def finish(self) -> None:
        pass


class _CudaOps:
    """Copies queued on a side stream; one event per ring slot guards its reuse."""

    def __init__(self, device: Any) -> None:
        self.stream = torch.cuda.Stream(device=device)

    def event_after_copies(self) -> Any:
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def wait(self, event: Any) -> None:
        if event is not None:
            event.synchronize()  # the host may now overwrite this staging buffer

    def copy(self, dst: Any, src: Any) -> None:
        with torch.cuda.stream(self.stream):
            dst.copy_(src, non_blocking=True)

    def finish(self) -> None:
        # Tensors are used on the caller's stream: order it after every staged copy.
        torch.cuda.current_stream(self.stream.device).wait_stream(self.stream)
        self.stream.synchronize()


def _host_buffer(nbytes: int, pin: bool) -> tuple[Any, memoryview]:
    buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin)
    return buf, memoryview(buf.numpy()).cast("B")


def load_to_device(
    file: Any,
    device: Any = "cuda",
    *,
    threads: int | None = None,
    config: StagingConfig | None = None,
    pin: bool | None = None,
) -> dict[str, Any]:
    """Load every tensor of ``file`` onto ``device`` through the ring.

    ``file`` is a SafeFile, a ShardedFile (loaded shard by shard), or anything
    ``io.open_source`` opens (a path is read with mmap, or pread on a network/FUSE
    filesystem).  ``pin`` defaults to True for CUDA destinations.  ``threads`` (None or a
    positive int) parallelises the reads that fill each staging buffer.  Returns ``{name: tensor}`` in file order; a failed read raises a SourceError
    naming the tensor, and no tensor is returned.
    """
    cfg = config or DEFAULT
    if cfg.buffers < 1 or cfg.buffer_bytes < 1:
        raise ValueError(f"staging needs at least one buffer of at least one byte, got {cfg}")
    threads = check_threads(threads)
    if isinstance(file, ShardedFile):
        return _load_shards(file, device, threads, cfg, pin)
    owned = not isinstance(file, SafeFile)
    safe = SafeFile(open_source(file)) if owned else file
    try:
        target = parse_device(device)
        if not target.is_cpu:
            require_available(target)  # an InvalidDevice naming it, not torch's AssertionError
        dev = torch.device(device)
        is_cuda = dev.type == "cuda"
        ops: Any = _CudaOps(dev) if is_cuda else _SyncOps()
        pin = is_cuda if pin is None else pin
        safe.check_open()
        tensors = safe.header.tensors
        _check_host_memory(safe, cfg, dev.type == "cpu", threads)
        dests = [torch.empty(t.nbytes, dtype=torch.uint8, device=dev) for t in tensors]
        registered = cfg.register_host and is_cuda and _register_and_copy(safe, dests, ops)
        if not registered:
            _staged_copy(safe, dests, ops, cfg, pin, threads)
        ops.finish()
        return {
            t.name: d.view(torch_dtype(t.dtype)).reshape(_torch_shape(t.dtype, t.shape, t.name))
            if t.nbytes
            else torch.empty(_torch_shape(t.dtype, t.shape, t.name), dtype=torch_dtype(t.dtype), device=dev)
            for t, d in zip(tensors, dests)
        }
    finally:
        if owned:
            safe.close()


def _load_shards(file: ShardedFile, device: Any, threads: int | None, cfg: StagingConfig, pin: bool | None) -> dict[str, Any]:
    """A sharded checkpoint through the ring, shard by shard in file order, after checking every
    shard against the index (as ``ShardedFile.raw_all`` does); tensors the index does not map to
    a shard are left out."""
    file.check_open()
    ignored = {shard: set(file.check(shard, complete=True).ignored) for shard in file.shard_names}
    out: dict[str, Any] = {}
    for shard, skip in ignored.items():
        part = load_to_device(file.shard(shard), device, threads=threads, config=cfg, pin=pin)
        out.update((name, t) for name, t in part.items() if name not in skip)
    return out


def _ring_shape(cfg: StagingConfig, total: int) -> tuple[int, int]:
    """(buffers, bytes per buffer) of the ring for a data region of ``total`` bytes."""
    size = min(cfg.buffer_bytes, max(total, 1))
    return min(cfg.buffers, -(-total // size) or 1), size


def _check_host_memory(safe: SafeFile, cfg: StagingConfig, to_cpu: bool, threads: int | None) -> None:
    """Refuse (InsufficientMemory) before allocating, when the ring (pinned memory, which
    cannot be swapped or reclaimed) plus, for a CPU destination, the tensors themselves would
    not fit in the memory this process can have."""
    total = safe.header.data_size
    buffers, size = _ring_shape(cfg, total)
    host = buffers * size + (total if to_cpu else 0)
    check_allocation(
        host,
        source=safe.name,
        what=f"{'all tensors through ' if to_cpu else ''}a staging ring of {buffers} x {size} bytes",
        threads=threads or default_threads(),
        advice="use fewer or smaller staging buffers (StagingConfig, PYSAFETENSORS_STAGING_BUFFERS / "
        "PYSAFETENSORS_STAGING_BYTES)" + (', or load with backend="mmap" on the CPU' if to_cpu else ""),
    )


def _staged_copy(safe: SafeFile, dests: list[Any], ops: Any, cfg: StagingConfig, pin: bool, threads: int | None) -> None:
    """Walk the data region chunk by chunk; each chunk feeds the tensors it overlaps."""
    header = safe.header
    tensors = header.tensors
    total = header.data_size
    buffers, size = _ring_shape(cfg, total)
    ring = [_host_buffer(size, pin) for _ in range(buffers)]
    events: list[Any] = [None] * len(ring)
    first = 0  # first tensor that may still overlap the current chunk
    for k, pos in enumerate(range(0, total, size)):
        slot = k % len(ring)
        host, view = ring[slot]
        ops.wait(events[slot])
        n = min(size, total - pos)
        safe.read_data(pos, view[:n], threads)
        while first < len(tensors) and tensors[first].end <= pos:
            first += 1
        i = first
        while i < len(tensors) and tensors[i].begin < pos + n:
            t = tensors[i]
            lo, hi = max(t.begin, pos), min(t.end, pos + n)
            if hi > lo:
                ops.copy(dests[i][lo - t.begin : hi - t.begin], host[lo - pos : hi - pos])
            i += 1
        events[slot] = ops.event_after_copies()


def _register_and_copy(safe: SafeFile, dests: list[Any], ops: _CudaOps) -> bool:
    """Pin the mapped file with cudaHostRegister and copy tensors straight from it.

    Returns False (caller falls back to staging) when the source has no writable zero-copy
    view (a copy-on-write map has one; so do writable bytes in memory).
    """
    source: Any = safe.source
    if not capabilities(source).view or source.readonly or not source.size:
        return False
    m = source.view(0, source.size)  # the whole map (one export, released with ``m``)
    size = len(m)
    address = ctypes.addressof(ctypes.c_char.from_buffer(m))
    cudart = torch.cuda.cudart()
    # ReadOnly: the map is copy-on-write, and a writable registration would make the driver
    # break COW on every page (a private copy of the whole file).  Fall back to default flags
    # on drivers without it.
    for flags in (_CUDA_HOST_REGISTER_READ_ONLY, 0):
        err = cudart.cudaHostRegister(address, size, flags)
        if int(getattr(err, "value", err)) == 0:
            break
    else:
        return False
    try:
        whole = torch.frombuffer(m, dtype=torch.uint8)
        base = safe.header.data_start
        for t, d in zip(safe.header.tensors, dests):
            if t.nbytes:
                ops.copy(d, whole[base + t.begin : base + t.end])
        ops.stream.synchronize()
    finally:
        cudart.cudaHostUnregister(address)
    return True
