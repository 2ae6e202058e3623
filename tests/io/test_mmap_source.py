"""MmapSource's page-cache calls: copies out of the map, residency probes, read-ahead hints in
pieces the kernel reads whole, and populating a cached range."""

from __future__ import annotations

import os
import sys
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from _helpers import evict, spy_advice

from pysafetensors.io.sources import MmapSource
from pysafetensors.numpy import save_file as np_save_file

upstream_np = pytest.importorskip("safetensors.numpy")


def test_mmap_source_read_into_copies_out_of_the_map(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "m.safetensors")
    upstream_np.save_file({"x": np.arange(1000, dtype=np.int32)}, path)
    src = MmapSource(path)
    assert src.parallel_safe
    buf = bytearray(16)
    src.read_into(src.size - 16, memoryview(buf))
    assert bytes(buf) == np.arange(996, 1000, dtype=np.int32).tobytes()
    view = src.view(src.size - 16, 16)
    src.close()
    assert bytes(view) == bytes(buf)  # views outlive the handle
    with pytest.raises(Exception, match="closed"):
        src.read_into(0, memoryview(bytearray(8)))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore through libc: Linux")
def test_resident_probes_the_page_cache(tmp_path: Any) -> None:
    path = os.fspath(tmp_path / "r.safetensors")
    np_save_file({"a": np.arange(1 << 20, dtype=np.float32)}, path)  # 4 MiB
    with open(path, "rb") as f:
        f.read()
    src = MmapSource(path)
    try:
        assert src.resident(0, src.size) is True
        assert src.resident(src.size - 3, 3) is True  # the last, partial page
        evict(path)
        assert src.resident(0, src.size) is False
        assert src.resident(0, 0) is None
    finally:
        src.close()
    assert src.resident(0, 10) is None  # closed: cannot ask


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MADV_WILLNEED"), reason="madvise hints: POSIX")
def test_prefetch_hints_the_whole_range_in_pieces_the_kernel_reads_whole(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import mmap

    from pysafetensors.io import sources

    path = os.fspath(tmp_path / "p.safetensors")
    np_save_file({"a": np.arange(300_000, dtype=np.float32)}, path)  # ~1.2 MB
    monkeypatch.setattr(sources, "readahead_cap", lambda dev: 64 << 10)
    calls = spy_advice(monkeypatch)
    src = MmapSource(path)
    try:
        src.prefetch(100, src.size - 100)
        assert all(a == mmap.MADV_WILLNEED for _, _, a in calls)
        assert all(n <= 64 << 10 for _, n, _ in calls)
        # Contiguous pieces from the first byte asked to the end, no gap, no overlap.
        assert calls[0][0] == 100
        assert all(o2 == o1 + n1 for (o1, n1, _), (o2, _, _) in pairwise(calls))
        assert calls[-1][0] + calls[-1][1] == src.size
        assert len(calls) == -(-(src.size - 100) // (64 << 10))
        # Never more than half the free memory: a file bigger than memory must not evict
        # its own first pages before they are used.
        calls.clear()
        monkeypatch.setattr(sources, "_free_bytes", lambda: 2 * 200_000)
        src.prefetch(0, src.size)
        assert sum(n for _, n, _ in calls) == 200_000
        calls.clear()
        monkeypatch.setattr(sources, "_free_bytes", lambda: None)  # cannot ask: one hint
        src.prefetch(0, src.size)
        assert calls == [(0, src.size, mmap.MADV_WILLNEED)]
    finally:
        src.close()
    calls.clear()
    src.prefetch(0, 10)  # closed: nothing to hint, no error
    assert calls == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sysfs: Linux")
def test_readahead_cap_reads_the_device_queue_and_has_a_floor(tmp_path: Any) -> None:
    from pysafetensors.io.sources import _free_bytes, readahead_cap

    free = _free_bytes()
    assert free is not None and free > 0 and free % 1024 == 0
    cap = readahead_cap(os.stat(tmp_path).st_dev)
    assert cap >= 4096 and cap % 1024 == 0
    assert readahead_cap(os.makedev(0, 987_654)) == 128 << 10  # no such block device


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fault-around and minor-fault counts: Linux")
def test_populate_maps_a_cached_range_so_touches_take_no_faults(tmp_path: Any) -> None:
    import resource

    path = os.fspath(tmp_path / "p.safetensors")
    np_save_file({"a": np.arange(2 << 20, dtype=np.float32)}, path)  # 8 MiB: 2,048 pages
    page = os.sysconf("SC_PAGE_SIZE")
    # Cache it page by page with readahead off, so the page cache holds small folios (a
    # 2 MiB folio is mapped whole by one fault and would leave the control nothing to count).
    evict(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for offset in range(0, os.path.getsize(path), page):
            os.pread(fd, page, offset)
    finally:
        os.close(fd)

    def faults_touching_every_page(populate: bool) -> int:
        src = MmapSource(path)
        try:
            if populate:
                src.populate(100, src.size - 100)  # unaligned on purpose
            view = np.frombuffer(src.view(100, src.size - 100), np.uint8)
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            int(view[::page].sum()) + int(view[-1])
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            del view
            return faults
        finally:
            src.close()

    untouched = faults_touching_every_page(False)
    assert untouched >= 32, untouched  # the control: touching does fault (~128: one per 64 KiB)
    assert faults_touching_every_page(True) <= 4
    src = MmapSource(path)
    src.close()
    src.populate(0, 10)  # closed: nothing to map, no error
