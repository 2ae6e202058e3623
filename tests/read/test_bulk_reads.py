"""Bulk and threaded reads and byte-exact slices: what the reader asks of a source, and that the
result equals upstream's.  No timing asserts here."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from _helpers import sample_arrays

from pysafetensors import reader as reader_mod
from pysafetensors.format.slicing import plan_slice
from pysafetensors.io.sources import MmapSource, PreadSource
from pysafetensors.numpy import load_file as np_load_file
from pysafetensors.reader import SafeFile

upstream_np = pytest.importorskip("safetensors.numpy")


class CountingSource:
    """A PreadSource that records every read (offset, length)."""

    parallel_safe = True

    def __init__(self, path: str) -> None:
        self._inner = PreadSource(path)
        self.size = self._inner.size
        self.name = self._inner.name
        self.reads: list[tuple[int, int]] = []

    def read_into(self, offset: int, buffer: memoryview) -> None:
        self.reads.append((offset, len(buffer)))
        self._inner.read_into(offset, buffer)

    def close(self) -> None:
        self._inner.close()


def _files(tmp_path: Any) -> dict[str, dict[str, np.ndarray]]:
    """The sample checkpoints, written by upstream."""
    cases = sample_arrays()
    for name, tensors in cases.items():
        upstream_np.save_file(tensors, os.path.join(tmp_path, f"{name}.safetensors"))
    return cases


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_threaded_pread_equals_mmap_and_upstream(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    monkeypatch.setattr(reader_mod, "_READ_CHUNK", 4096)  # force many parallel chunks on small files
    for name, tensors in _files(tmp_path).items():
        path = os.path.join(tmp_path, f"{name}.safetensors")
        pread = np_load_file(path, backend="pread", threads=threads)
        mapped = np_load_file(path, backend="mmap")
        up = upstream_np.load_file(path)
        assert list(pread) == list(mapped) == [k for k in up]
        for k in tensors:
            np.testing.assert_array_equal(pread[k], up[k])
            np.testing.assert_array_equal(mapped[k], up[k])
            assert pread[k].dtype == up[k].dtype and pread[k].shape == up[k].shape


def test_parallel_read_splits_into_chunks(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader_mod, "_READ_CHUNK", 1000)
    path = os.path.join(tmp_path, "x.safetensors")
    upstream_np.save_file({"x": np.arange(5000, dtype=np.int32)}, path)
    src = CountingSource(path)
    f = SafeFile(src)
    src.reads.clear()
    raws = list(f.raw_all(threads=3))
    assert sum(n for _, n in src.reads) == 20000 and len(src.reads) == 20
    assert np.array_equal(np.frombuffer(raws[0].data, np.int32), np.arange(5000))
    f.close()


def _resident_pages(view: memoryview) -> int:
    """How many pages of an anonymous buffer are faulted in (``mincore``)."""
    import ctypes

    from pysafetensors.io.sources import _libc_mincore

    mincore = _libc_mincore()
    if mincore is None:
        pytest.skip("mincore is Linux-only")
    page = os.sysconf("SC_PAGE_SIZE")
    pages = -(-len(view) // page)
    vec = (ctypes.c_ubyte * pages)()
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    assert mincore(address, len(view), vec) == 0
    return sum(b & 1 for b in vec)


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MAP_POPULATE"), reason="MAP_POPULATE is Linux-only")
def test_alloc_populates_only_when_asked() -> None:
    n = 4 << 20
    populated = reader_mod.alloc(n)
    lazy = reader_mod.alloc(n, populate=False)
    pages = n // os.sysconf("SC_PAGE_SIZE")
    assert _resident_pages(populated) == pages
    assert _resident_pages(lazy) == 0
    lazy[len(lazy) - 1] = 7  # still an ordinary writable buffer
    assert lazy[len(lazy) - 1] == 7 and _resident_pages(lazy) == 1


@pytest.mark.parametrize(("threads", "populated"), [(1, True), (3, False)])
def test_bulk_pread_buffer_is_faulted_in_by_its_readers(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, threads: int, populated: bool) -> None:
    # One reader: populate the buffer in one call first (less CPU).  Several: leave the
    # faults to the threads, which take them in parallel while they copy.
    monkeypatch.setattr(reader_mod, "_READ_CHUNK", 1000)
    calls: list[tuple[int, bool]] = []
    real = reader_mod.alloc

    def spy(nbytes: int, populate: bool = True) -> memoryview:
        calls.append((nbytes, populate))
        return real(nbytes, populate)

    monkeypatch.setattr(reader_mod, "alloc", spy)
    path = os.path.join(tmp_path, "x.safetensors")
    upstream_np.save_file({"x": np.arange(5000, dtype=np.int32)}, path)
    f = SafeFile(PreadSource(path))
    raws = list(f.raw_all(threads=threads))
    f.close()
    assert calls == [(20000, populated)]
    assert np.array_equal(np.frombuffer(raws[0].data, np.int32), np.arange(5000))
    src = PreadSource(path)
    assert reader_mod.read_workers(src, 20000, threads) == (1 if threads == 1 else 3)
    src.close()


def test_raw_all_on_a_closed_file_raises(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "x.safetensors")
    upstream_np.save_file({"x": np.arange(10, dtype=np.int32)}, path)
    f = SafeFile(PreadSource(path))
    f.close()
    with pytest.raises(Exception, match="closed"):
        list(f.raw_all())


@pytest.mark.parametrize(
    "index",
    [
        (slice(10, 74),),  # a row block: one range
        (5,),
        (slice(None), slice(3, 9)),  # a column band: one range per row
        (slice(2, 200, 7), slice(1, 30, 3)),  # strided both ways
        (Ellipsis, 4),
        (slice(None), slice(0, 30)),  # 300 ranges, densely packed: one bounding read
    ],
)
def test_slices_read_only_needed_bytes(tmp_path: Any, index: tuple[Any, ...]) -> None:
    arr = np.arange(300 * 40, dtype=np.float32).reshape(300, 40)
    path = os.path.join(tmp_path, "s.safetensors")
    upstream_np.save_file({"w": arr}, path)
    src = CountingSource(path)
    f = SafeFile(src)
    src.reads.clear()
    info = f.info("w")
    plan = plan_slice(info.shape, info.dtype, index)
    raw = f.raw_slice("w", plan)
    got = np.frombuffer(raw.data, np.float32).reshape(plan.shape)
    np.testing.assert_array_equal(got, arr[index])
    read = sum(n for _, n in src.reads)
    ranges = list(plan.byte_ranges())
    span = ranges[-1][1] - ranges[0][0]
    if len(ranges) > reader_mod._MANY_RANGES and span <= reader_mod._BLOCK_SLACK * plan.nbytes:
        assert len(src.reads) == 1 and read == span  # one bounding block instead of many reads
    else:
        assert read == plan.nbytes and len(src.reads) == len(ranges)
    f.close()


def test_single_range_slice_over_a_map_is_zero_copy(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "s.safetensors")
    upstream_np.save_file({"w": np.arange(400, dtype=np.int16).reshape(20, 20)}, path)
    f = SafeFile(MmapSource(path))
    info = f.info("w")
    raw = f.raw_slice("w", plan_slice(info.shape, info.dtype, (slice(3, 9),)))
    assert raw.shared and len(raw.data) == 6 * 20 * 2
    assert np.array_equal(np.frombuffer(raw.data, np.int16).reshape(6, 20), np.arange(400).reshape(20, 20)[3:9])


def test_big_single_tensor_pread_is_chunked_across_threads(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # get_tensor (what transformers calls, one name at a time) reads a big tensor in parallel
    # chunks too, into a buffer its readers fault in.
    monkeypatch.setattr(reader_mod, "_READ_CHUNK", 1000)
    monkeypatch.setattr(reader_mod, "default_threads", lambda: 2)
    path = os.path.join(tmp_path, "x.safetensors")
    upstream_np.save_file({"a": np.arange(7, dtype=np.int8), "x": np.arange(5000, dtype=np.int32)}, path)
    src = CountingSource(path)
    f = SafeFile(src)
    src.reads.clear()
    raw = f.raw("x")
    assert len(src.reads) == 20 and sum(n for _, n in src.reads) == 20000
    assert np.array_equal(np.frombuffer(raw.data, np.int32), np.arange(5000))
    f.close()
    with pytest.raises(Exception, match="closed"):
        f.raw("x")
