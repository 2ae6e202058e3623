"""Correctness of the fast paths: bulk/threaded reads, byte-exact slices, batched writes,
alignment, the fast header parse and the staging pipeline.  No timing asserts here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from pysafetensors import reader as reader_mod
from pysafetensors import writer as writer_mod
from pysafetensors.format.slicing import plan_slice
from pysafetensors.io.sources import MmapSource, PreadSource
from pysafetensors.numpy import load_file as np_load_file
from pysafetensors.numpy import save as np_save
from pysafetensors.numpy import save_file as np_save_file
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
    rng = np.random.default_rng(1)
    cases = {
        "mixed": {
            "a": rng.standard_normal((64, 33)).astype(np.float32),
            "b": rng.integers(-9, 9, (17,), dtype=np.int64),
            "c": np.zeros((0, 4), np.float16),
            "d": rng.integers(0, 2, (5, 5)).astype(bool),
            "e": rng.standard_normal(()).astype(np.float64),
        },
        "one_big": {"w": rng.standard_normal((300, 257)).astype(np.float32)},
        "many_small": {f"t{i:03d}": np.full((i % 7 + 1,), i, np.int32) for i in range(150)},
    }
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


# --- writing -----------------------------------------------------------------------------


@pytest.mark.parametrize("batch_bytes,batch_count", [(1 << 24, 512), (64, 3), (1, 1)])
def test_batched_writev_paths_match_upstream(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, batch_bytes: int, batch_count: int) -> None:
    monkeypatch.setattr(writer_mod, "_BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(writer_mod, "_BATCH_COUNT", batch_count)
    for name, tensors in _files(tmp_path).items():
        ours = os.path.join(tmp_path, f"{name}.ours")
        np_save_file(tensors, ours, metadata={"k": "v"})
        ref = upstream_np.save(tensors, metadata={"k": "v"})
        with open(ours, "rb") as fh:
            assert fh.read() == ref, name
        assert np_save(tensors, metadata={"k": "v"}) == ref


def test_non_contiguous_arrays_are_written_in_c_order(tmp_path: Any) -> None:
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    tensors = {"f": np.asfortranarray(base), "s": base[:, ::2], "t": base.T}
    path = os.path.join(tmp_path, "nc.safetensors")
    np_save_file(tensors, path)
    ref = upstream_np.save({k: np.ascontiguousarray(v) for k, v in tensors.items()})
    with open(path, "rb") as fh:
        assert fh.read() == ref
    assert base.flags.c_contiguous and tensors["f"].flags.f_contiguous  # inputs untouched


@pytest.mark.parametrize("alignment", [16, 64, 4096])
def test_alignment_files_are_readable_by_both(tmp_path: Any, alignment: int) -> None:
    tensors = {"a": np.arange(10, dtype=np.float32), "b": np.ones((3, 3), np.float64)}
    path = os.path.join(tmp_path, "al.safetensors")
    np_save_file(tensors, path, metadata={"m": "x"}, alignment=alignment)
    with open(path, "rb") as fh:
        data = fh.read()
    n = int.from_bytes(data[:8], "little")
    assert (8 + n) % alignment == 0
    assert json.loads(data[8 : 8 + n])["__metadata__"] == {"m": "x"}
    up = upstream_np.load_file(path)
    ours = np_load_file(path)
    for k, v in tensors.items():
        np.testing.assert_array_equal(up[k], v)
        np.testing.assert_array_equal(ours[k], v)
    assert np_save(tensors, metadata={"m": "x"}, alignment=alignment) == data


def test_default_alignment_is_byte_identical() -> None:
    tensors = {"a": np.arange(3, dtype=np.uint8)}
    assert np_save(tensors) == np_save(tensors, alignment=8) == upstream_np.save(tensors)


def test_bad_alignment_is_rejected(tmp_path: Any) -> None:
    from pysafetensors.errors import SerializeError

    with pytest.raises(SerializeError):
        np_save({"a": np.zeros(2)}, alignment=12)


# --- the staging pipeline (CPU destination: same loop as CUDA) -------------------------


@pytest.mark.parametrize("buffers,buffer_bytes", [(2, 100), (1, 7), (3, 4096), (2, 1 << 20)])
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_staging_pipeline_cpu_destination(tmp_path: Any, buffers: int, buffer_bytes: int, backend: str) -> None:
    torch = pytest.importorskip("torch")
    from pysafetensors.io.sources import open_source
    from pysafetensors.staging import StagingConfig, load_to_device
    from pysafetensors.torch import save_file

    g = torch.Generator().manual_seed(0)
    tensors = {
        "big": torch.randn(50, 40, generator=g),  # 8000 bytes: many ring turns per tensor
        "empty": torch.zeros(0, 3),
        "half": torch.randn(9, generator=g).to(torch.bfloat16),
        "ints": torch.arange(11, dtype=torch.int64),
        **{f"small{i:03d}": torch.full((i % 5 + 1,), float(i)) for i in range(120)},
    }
    path = os.path.join(tmp_path, "st.safetensors")
    save_file(tensors, path)
    f = SafeFile(open_source(path, backend))
    out = load_to_device(f, "cpu", config=StagingConfig(buffers=buffers, buffer_bytes=buffer_bytes), pin=False, threads=2)
    f.close()
    assert list(out) == f.names()
    for k, v in tensors.items():
        assert out[k].dtype == v.dtype and out[k].shape == v.shape
        assert torch.equal(out[k], v), k


def test_staging_rejects_an_empty_ring(tmp_path: Any) -> None:
    pytest.importorskip("torch")
    from pysafetensors.staging import StagingConfig, load_to_device

    path = os.path.join(tmp_path, "x.safetensors")
    upstream_np.save_file({"x": np.zeros(3, np.float32)}, path)
    with pytest.raises(ValueError):
        load_to_device(path, "cpu", config=StagingConfig(buffers=0))


# --- the benchmark harness runs ----------------------------------------------------------


def test_benchmark_quick_smoke(tmp_path: Any) -> None:
    run = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks", "run.py")
    proc = subprocess.run(
        [sys.executable, run, "--quick", "-w", "5", "-n", "1", "--data", os.fspath(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| 5 |" in proc.stdout
    assert re.search(r"\*\*\d+\.\d+x\*\*", proc.stdout), proc.stdout


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


def test_cuda_get_tensors_routes_through_staging(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from pysafetensors import safe_open, staging

    path = os.path.join(tmp_path, "c.safetensors")
    upstream_np.save_file({"x": np.zeros(3, np.float32)}, path)
    calls: list[tuple[str, Any]] = []

    def fake(file: Any, device: str, *, threads: Any = None) -> dict[str, Any]:
        calls.append((device, threads))
        return {"routed": file.names()}

    monkeypatch.setattr(staging, "load_to_device", fake)
    with safe_open(path, framework="pt", device="cuda:1") as f:
        assert f.get_tensors(threads=3) == {"routed": ["x"]}
    assert calls == [("cuda:1", 3)]


# --- hot or cold: page-table population vs readahead -------------------------------------


def _evict(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


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
        _evict(path)
        assert src.resident(0, src.size) is False
        assert src.resident(0, 0) is None
    finally:
        src.close()
    assert src.resident(0, 10) is None  # closed: cannot ask


def _spy_advice(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    calls: list[tuple[int, int, int]] = []
    real = MmapSource.advise

    def spy(self: MmapSource, offset: int, length: int, advice: int) -> None:
        calls.append((offset, length, advice))
        real(self, offset, length, advice)

    monkeypatch.setattr(MmapSource, "advise", spy)
    return calls


@pytest.mark.skipif(not hasattr(__import__("mmap"), "MADV_WILLNEED"), reason="madvise hints: POSIX")
def test_prefetch_hints_the_whole_range_in_pieces_the_kernel_reads_whole(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import mmap

    from pysafetensors.io import sources

    path = os.fspath(tmp_path / "p.safetensors")
    np_save_file({"a": np.arange(300_000, dtype=np.float32)}, path)  # ~1.2 MB
    monkeypatch.setattr(sources, "readahead_cap", lambda dev: 64 << 10)
    calls = _spy_advice(monkeypatch)
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore through libc: Linux")
def test_cold_bulk_load_reads_the_whole_region_ahead(tmp_path: Any) -> None:
    """Past the first readahead window too: the last pages arrive without being touched."""
    import time

    from pysafetensors.io.sources import readahead_cap

    path = os.fspath(tmp_path / "c.safetensors")
    step = readahead_cap(os.stat(tmp_path).st_dev)
    n = (3 * step + (5 << 20)) // 4
    np_save_file({"a": np.arange(n, dtype=np.float32), "b": np.ones(1000, np.float32)}, path)
    _evict(path)
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
    np_save_file(arrays, path)
    if hot:
        with open(path, "rb") as f:
            f.read()
    else:
        _evict(path)
    calls = _spy_advice(monkeypatch)
    populated: list[tuple[int, int]] = []
    real = MmapSource.populate
    monkeypatch.setattr(MmapSource, "populate", lambda self, o, n: (populated.append((o, n)), real(self, o, n))[1])
    got = np_load_file(path, backend="mmap")
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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fault-around and minor-fault counts: Linux")
def test_populate_maps_a_cached_range_so_touches_take_no_faults(tmp_path: Any) -> None:
    import resource

    path = os.fspath(tmp_path / "p.safetensors")
    np_save_file({"a": np.arange(2 << 20, dtype=np.float32)}, path)  # 8 MiB: 2,048 pages
    page = os.sysconf("SC_PAGE_SIZE")
    # Cache it page by page with readahead off, so the page cache holds small folios (a
    # 2 MiB folio is mapped whole by one fault and would leave the control nothing to count).
    _evict(path)
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
