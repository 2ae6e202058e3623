"""What the read paths ask of the system per tensor and per load (no timing asserted): small
pread reads ask no CPU count; the mapped shards of one load share one read-ahead allowance."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors import reader as reader_mod
from pysafetensors import safe_open
from pysafetensors import sharded as sharded_module
from pysafetensors.format.index import parse_index
from pysafetensors.io.sources import MmapSource
from pysafetensors.numpy import load_file, save_file, save_sharded


def test_small_pread_reads_ask_no_cpu_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = {f"t{i:03d}": np.full((i % 5 + 1, 3), i, np.float32) for i in range(200)}
    path = tmp_path / "m.safetensors"
    save_file(arrays, path)
    asked: list[int] = []
    real = reader_mod.default_threads
    monkeypatch.setattr(reader_mod, "default_threads", lambda: asked.append(1) or real())
    with safe_open(path, "np", backend="pread") as f:
        for name, value in arrays.items():
            np.testing.assert_array_equal(f.get_tensor(name), value)
    assert asked == []  # a sched_getaffinity call per tensor otherwise
    # A read big enough to split still asks, once, and gets the same threads as before.
    assert reader_mod.read_workers(_Parallel(), 64 << 20) == min(real(), 4)
    assert asked == [1]
    assert reader_mod.read_workers(_Parallel(), 64 << 20, threads=3) == 3
    assert reader_mod.read_workers(_Parallel(), 64 << 20, threads=1) == 1
    assert reader_mod.read_workers(_Parallel(), 1 << 20, threads=8) == 1


class _Parallel:
    name = "p"
    size = 1 << 40
    parallel_safe = True

    def read_into(self, offset: int, buffer: memoryview) -> None:
        raise AssertionError("not read")

    def close(self) -> None:
        pass


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def test_mapped_shards_share_one_read_ahead_allowance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Four cold shards of ~1 MiB and "memory for 2.5 of them": half of it, 1.25 shards, is read
    # ahead in shard order; the rest is left to the first touches (a checkpoint larger than
    # memory must not read its last shards ahead over its first ones).
    arrays = {f"layer.{i}.w": np.arange(1 << 18, dtype=np.float32) + i for i in range(4)}
    index = Path(save_sharded(arrays, tmp_path, max_shard_size=(1 << 20) + 4096))
    shards = parse_index(index.read_bytes()).shards
    assert len(shards) == 4
    for shard in shards:
        _evict(tmp_path / shard)
    data = 1 << 20  # each shard's data region
    monkeypatch.setattr(sharded_module, "mem_available", lambda: 5 * data // 2)
    hinted: list[tuple[str, int]] = []
    real = MmapSource.prefetch
    monkeypatch.setattr(
        MmapSource, "prefetch", lambda self, o, n: (hinted.append((os.path.basename(self.name), n)), real(self, o, n))[1]
    )
    probe = MmapSource(tmp_path / shards[3])
    try:
        assert probe.resident(0, data) is False  # the shards start out of the page cache
    finally:
        probe.close()
    got = load_file(index, backend="mmap")
    assert hinted == [(shards[0], data), (shards[1], data // 4)]
    for name, value in arrays.items():
        np.testing.assert_array_equal(got[name], value)
    # A single file read whole is read ahead as far as the source allows, as before.
    del got  # its views keep the pages mapped, which eviction leaves alone
    hinted.clear()
    _evict(tmp_path / shards[2])
    with safe_open(tmp_path / shards[2], "np") as f:
        f.get_tensors()
    assert hinted == [(shards[2], data)]


def test_hot_mapped_shards_are_mapped_in_not_read_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = {f"layer.{i}.w": np.arange(1 << 16, dtype=np.float32) + i for i in range(3)}
    index = Path(save_sharded(arrays, tmp_path, max_shard_size=(1 << 18) + 4096))
    for shard in parse_index(index.read_bytes()).shards:
        (tmp_path / shard).read_bytes()  # cached
    hinted: list[Any] = []
    populated: list[Any] = []
    monkeypatch.setattr(MmapSource, "prefetch", lambda self, o, n: hinted.append(n))
    real = MmapSource.populate
    monkeypatch.setattr(MmapSource, "populate", lambda self, o, n: (populated.append(n), real(self, o, n))[1])
    got = load_file(index, backend="mmap")
    assert hinted == [] and populated == [1 << 18] * 3
    assert list(got) == list(arrays)
