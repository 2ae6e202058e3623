"""What the read paths ask of the system per tensor and per load (no timing asserted): small
pread reads ask no CPU count; the mapped shards of one load share one read-ahead allowance; a
whole-file load populates a cached file and reads a cold one ahead, to its last page."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import evict, spy_advice

from pysafetensors import reader as reader_mod
from pysafetensors import safe_open
from pysafetensors import sharded as sharded_module
from pysafetensors.format.index import parse_index
from pysafetensors.io.sources import MmapSource
from pysafetensors.numpy import load_file, save_file, save_sharded
from pysafetensors.reader import SafeFile


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


def test_mapped_shards_share_one_read_ahead_allowance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Four cold shards of ~1 MiB and "memory for 2.5 of them": half of it, 1.25 shards, is read
    # ahead in shard order; the rest is left to the first touches (a checkpoint larger than
    # memory must not read its last shards ahead over its first ones).
    arrays = {f"layer.{i}.w": np.arange(1 << 18, dtype=np.float32) + i for i in range(4)}
    index = Path(save_sharded(arrays, tmp_path, max_shard_size=(1 << 20) + 4096))
    shards = parse_index(index.read_bytes()).shards
    assert len(shards) == 4
    for shard in shards:
        evict(tmp_path / shard)
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
    evict(tmp_path / shards[2])
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore through libc: Linux")
def test_cold_bulk_load_reads_the_whole_region_ahead(tmp_path: Any) -> None:
    """Past the first readahead window too: the last pages arrive without being touched."""
    import time

    from pysafetensors.io.sources import readahead_cap

    path = os.fspath(tmp_path / "c.safetensors")
    step = readahead_cap(os.stat(tmp_path).st_dev)
    n = (3 * step + (5 << 20)) // 4
    save_file({"a": np.arange(n, dtype=np.float32), "b": np.ones(1000, np.float32)}, path)
    evict(path)
    src = MmapSource(path)
    try:
        tail = src.size - (1 << 20)
        if src.resident(tail, 1 << 20) is not False:
            pytest.skip("this filesystem keeps the file cached (tmpfs): nothing to read ahead")
        views = list(SafeFile(src).raw_all())  # hands out views; touches nothing
        assert views[-1].name == "b"
        deadline = time.monotonic() + 20
        while not src.resident(tail, 1 << 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert src.resident(tail, 1 << 20), "the end of the data region was never read ahead"
        del views
    finally:
        src.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore through libc: Linux")
@pytest.mark.parametrize("hot", [True, False])
def test_bulk_load_populates_a_cached_file_and_reads_ahead_a_cold_one(tmp_path: Any, hot: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import mmap

    path = os.fspath(tmp_path / "h.safetensors")
    arrays = {"a": np.arange(300_000, dtype=np.float32), "b": np.ones((7, 9), np.int16)}
    save_file(arrays, path)
    if hot:
        with open(path, "rb") as f:
            f.read()
    else:
        evict(path)
    calls = spy_advice(monkeypatch)
    populated: list[tuple[int, int]] = []
    real = MmapSource.populate
    monkeypatch.setattr(MmapSource, "populate", lambda self, o, n: (populated.append((o, n)), real(self, o, n))[1])
    got = load_file(path, backend="mmap")
    advice = {a for _, _, a in calls}
    data_start = os.path.getsize(path) - (300_000 * 4 + 7 * 9 * 2)
    # Opening reads the header through the map with one exact WILLNEED per read; the data
    # region gets populated when cached, read ahead otherwise.
    on_data = [c for c in calls if c[0] >= data_start]
    assert all(o + n <= data_start for o, n, _ in calls if o < data_start)
    if hot:
        assert populated == [(data_start, 300_000 * 4 + 7 * 9 * 2)] and not on_data
    else:
        assert on_data and advice == {mmap.MADV_WILLNEED} and not populated
    for k, v in arrays.items():
        np.testing.assert_array_equal(got[k], v)
