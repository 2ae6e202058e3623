"""Every ByteSource, local and remote, runs the same conformance class; open_source is the one way in;
AtomicFileSink keeps files whole."""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from servers import RangeServer

import pysafetensors.io as io_pkg
from pysafetensors.errors import FileClosed, InvalidBackend, SafetensorError, SourceError, WriteError
from pysafetensors.io import registry, sources
from pysafetensors.io.protocols import (
    Advisable,
    ByteSource,
    Capabilities,
    ParallelReadable,
    RangedReadable,
    ResidencyAware,
    ViewSource,
    capabilities,
)
from pysafetensors.io.registry import open_source
from pysafetensors.io.remote import PREFETCH, FsspecSource, HTTPSource
from pysafetensors.io.sinks import AtomicFileSink
from pysafetensors.io.sources import FileObjectSource, MemorySource, MmapSource, PreadSource

fsspec = pytest.importorskip("fsspec")

# Longer than the 100,001 bytes remote sources fetch when opened, so reads past it go over the wire.
PAYLOAD = bytes(range(256)) * 600 + b"tail"
assert len(PAYLOAD) > PREFETCH


def _mmap(p: Path, _: Any) -> Any:
    return MmapSource(p)


def _pread(p: Path, _: Any) -> Any:
    return PreadSource(str(p))


def _memory(p: Path, _: Any) -> Any:
    return MemorySource(p.read_bytes())


def _fileobj(p: Path, request: Any) -> Any:
    f = open(p, "rb")  # noqa: SIM115 - closed by the finalizer: the source does not own it
    request.addfinalizer(f.close)
    return FileObjectSource(f)


def _bytesio(p: Path, _: Any) -> Any:
    return FileObjectSource(io.BytesIO(p.read_bytes()))


def _http(p: Path, request: Any) -> Any:
    server = RangeServer({"payload.bin": p.read_bytes()})
    request.addfinalizer(server.close)
    return HTTPSource(server.url("payload.bin"), retries=0)


def _fsspec(p: Path, request: Any) -> Any:
    path = f"/pst-conformance-{uuid.uuid4().hex}/payload.bin"
    fs = fsspec.filesystem("memory")
    fs.pipe(path, p.read_bytes())
    request.addfinalizer(lambda: fs.rm(path))
    return FsspecSource(f"memory://{path}")


FACTORIES: dict[str, Callable[[Path, Any], Any]] = {
    "mmap": _mmap, "pread": _pread, "memory": _memory, "fileobj": _fileobj, "bytesio": _bytesio,
    "http": _http, "fsspec": _fsspec,
}

# What each source can do beyond ByteSource (io/protocols.py).
EXPECTED = {
    "mmap": Capabilities(view=True, parallel=True, ranged=False, advice=True, residency=True),
    "pread": Capabilities(view=False, parallel=True, ranged=False, advice=False, residency=False),
    "memory": Capabilities(view=True, parallel=False, ranged=False, advice=False, residency=False),
    "fileobj": Capabilities(view=False, parallel=False, ranged=False, advice=False, residency=False),
    "bytesio": Capabilities(view=False, parallel=False, ranged=False, advice=False, residency=False),
    "http": Capabilities(view=False, parallel=False, ranged=True, advice=False, residency=False),
    "fsspec": Capabilities(view=False, parallel=False, ranged=True, advice=False, residency=False),
}
OWNS_RESOURCES = {"mmap", "pread", "http", "fsspec"}  # the others read memory or a caller's file object


@pytest.fixture(params=sorted(FACTORIES))
def kind(request: Any) -> str:
    return str(request.param)


@pytest.fixture
def source(kind: str, request: Any, tmp_path: Path) -> Iterator[Any]:
    path = tmp_path / "payload.bin"
    path.write_bytes(PAYLOAD)
    src = FACTORIES[kind](path, request)
    yield src
    src.close()


class TestByteSource:
    def test_is_a_byte_source(self, source: Any) -> None:
        assert isinstance(source, ByteSource)
        assert source.size == len(PAYLOAD)
        assert isinstance(source.name, str) and source.name

    @pytest.mark.parametrize(
        "offset, length",
        [(0, 0), (0, 8), (5, 300), (len(PAYLOAD) - 4, 4), (1000, 5000), (PREFETCH - 10, 20), (120_000, 9_000)],
    )
    def test_read_into(self, source: Any, offset: int, length: int) -> None:
        buf = bytearray(length)
        source.read_into(offset, memoryview(buf))
        assert bytes(buf) == PAYLOAD[offset : offset + length]

    def test_read_past_end_is_a_source_error_with_its_offset(self, source: Any) -> None:
        with pytest.raises(SourceError) as e:
            source.read_into(len(PAYLOAD) - 2, memoryview(bytearray(10)))
        assert isinstance(e.value, SafetensorError) and isinstance(e.value, OSError)
        assert isinstance(e.value.offset, int) and len(PAYLOAD) - 2 <= e.value.offset <= len(PAYLOAD)
        assert source.name in str(e.value)

    def test_capabilities(self, source: Any, kind: str) -> None:
        caps = capabilities(source)
        assert caps == EXPECTED[kind]
        # the cached answer is the protocols' own
        assert caps.view == isinstance(source, ViewSource)
        assert caps.parallel == isinstance(source, ParallelReadable)
        assert caps.ranged == isinstance(source, RangedReadable)
        assert caps.advice == isinstance(source, Advisable)
        assert caps.residency == isinstance(source, ResidencyAware)

    def test_view_capability(self, source: Any) -> None:
        if not capabilities(source).view:
            return
        v = source.view(10, 20)
        assert bytes(v) == PAYLOAD[10:30]
        assert v.readonly == source.readonly
        del v

    def test_ranged_reads(self, source: Any) -> None:
        if not capabilities(source).ranged:
            return
        spans = [(3, 10), (50, 7), (110_000, 1000), (150_000, 64)]
        bufs = [bytearray(n) for _, n in spans]
        source.read_ranges([(o, memoryview(b)) for (o, _), b in zip(spans, bufs)])
        assert [bytes(b) for b in bufs] == [PAYLOAD[o : o + n] for o, n in spans]

    def test_close_is_idempotent_and_final(self, source: Any, kind: str) -> None:
        source.close()
        source.close()
        if kind in OWNS_RESOURCES:
            with pytest.raises(FileClosed):
                source.read_into(120_000, memoryview(bytearray(4)))


def test_one_open_source(tmp_path: Path) -> None:
    # One function, importable from io and io.registry; the local sources' module does not dispatch.
    assert io_pkg.open_source is registry.open_source
    assert "open_source" not in dir(sources)
    assert "is_byte_source" not in dir(registry)


def test_open_source_dispatch(tmp_path: Path) -> None:
    path = tmp_path / "d.bin"
    path.write_bytes(PAYLOAD)
    assert isinstance(open_source(path, "mmap"), MmapSource)
    assert isinstance(open_source(str(path), "pread"), PreadSource)
    assert isinstance(open_source(path.as_uri(), "pread"), PreadSource)  # file:// URL
    assert isinstance(open_source(PAYLOAD), MemorySource)
    assert isinstance(open_source(bytearray(PAYLOAD)), MemorySource)
    assert isinstance(open_source(io.BytesIO(PAYLOAD)), FileObjectSource)
    with open(path, "rb") as f:
        mapped = open_source(f, "mmap")
        assert isinstance(mapped, MmapSource) and mapped.name == str(path)  # named after the file
        mapped.close()
        assert isinstance(open_source(f, "pread"), FileObjectSource)
    src = MemorySource(PAYLOAD)
    assert open_source(src) is src
    with pytest.raises(TypeError):
        open_source(12345)
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        open_source(tmp_path / "missing.bin")


def test_open_source_opens_urls(tmp_path: Path) -> None:
    """``pysafetensors.io.open_source`` takes URLs too (it once took only paths)."""
    with RangeServer({"d.bin": PAYLOAD}) as server:
        src = io_pkg.open_source(server.url("d.bin"))
        assert isinstance(src, HTTPSource) and src.size == len(PAYLOAD)
        src.close()
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-open-url/d.bin", PAYLOAD)
    try:
        src = io_pkg.open_source("memory://pst-open-url/d.bin")
        assert isinstance(src, FsspecSource) and src.size == len(PAYLOAD)
    finally:
        fs.rm("/pst-open-url", recursive=True)


@pytest.mark.parametrize("backend", ["mmapp", "MMAP", "", 1, b"mmap"])
def test_a_mistyped_backend_is_refused_for_every_kind_of_input(tmp_path: Path, backend: Any) -> None:
    path = tmp_path / "d.bin"
    path.write_bytes(PAYLOAD)
    with open(path, "rb") as f:
        for obj in (path, str(path), path.as_uri(), PAYLOAD, io.BytesIO(PAYLOAD), f, MemorySource(PAYLOAD),
                    "http://127.0.0.1:9/never-contacted", tmp_path / "missing.bin"):
            with pytest.raises(InvalidBackend, match="is invalid") as e:
                open_source(obj, backend)
            assert isinstance(e.value, ValueError)


def test_mmap_source_holds_one_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "d.bin"
    path.write_bytes(PAYLOAD)
    before = len(os.listdir("/proc/self/fd"))
    src = MmapSource(path)
    assert len(os.listdir("/proc/self/fd")) == before + 1
    src.close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_empty_file_sources(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    for src in (MmapSource(path), PreadSource(path), MemorySource(b"")):
        assert src.size == 0
        src.read_into(0, memoryview(bytearray(0)))
        src.close()


def test_atomic_sink_commit_and_abort(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    with AtomicFileSink(path) as sink:
        sink.write([b"abc", memoryview(b"def"), bytearray(b"g")])
        assert not path.exists()  # nothing visible until commit
    assert path.read_bytes() == b"abcdefg"
    with pytest.raises(RuntimeError), AtomicFileSink(path) as sink:
        sink.write([b"partial"])
        raise RuntimeError("interrupted")
    assert path.read_bytes() == b"abcdefg"
    assert os.listdir(tmp_path) == ["out.bin"]


def test_atomic_sink_pwrite_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "p.bin"
    with AtomicFileSink(path) as sink:
        sink.truncate(8)
        sink.pwrite(b"xy", 6)
        sink.pwrite(b"ab", 0)
    assert path.read_bytes() == b"ab\x00\x00\x00\x00xy"


def test_atomic_sink_unwritable_directory(tmp_path: Path) -> None:
    with pytest.raises(WriteError):
        AtomicFileSink(tmp_path / "no" / "such" / "dir.bin")


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_directory_is_named_in_the_error(tmp_path: Path, backend: str) -> None:
    with pytest.raises(IsADirectoryError) as e:
        open_source(tmp_path, backend)
    assert e.value.filename == str(tmp_path)


def test_mmap_big_reads_copy_in_parallel_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads of 1 MiB and more copy out of the map with the GIL released, from several threads."""
    from pysafetensors import reader

    data = os.urandom(5 << 20)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    monkeypatch.setattr(reader, "_READ_CHUNK", 1 << 20)
    src = MmapSource(path)
    buf = memoryview(bytearray(len(data) - 3))
    assert reader.read_workers(src, len(buf), 4) == 4
    reader.parallel_read(src, 3, buf, 4)
    assert bytes(buf) == data[3:]
    src.close()
    with pytest.raises(FileClosed):
        src.read_into(0, memoryview(bytearray(2 << 20)))
