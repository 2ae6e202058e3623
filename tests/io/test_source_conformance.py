"""Every ByteSource runs the same conformance class; AtomicFileSink keeps files whole."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pysafetensors.errors import FileClosed, SafetensorError, SourceError, WriteError
from pysafetensors.io.sinks import AtomicFileSink
from pysafetensors.io.sources import (
    FileObjectSource,
    MemorySource,
    MmapSource,
    PreadSource,
    open_source,
    supports_view,
)

PAYLOAD = bytes(range(256)) * 40 + b"tail"


def _mmap(p: Path) -> Any:
    return MmapSource(p)


def _pread(p: Path) -> Any:
    return PreadSource(str(p))


def _memory(p: Path) -> Any:
    return MemorySource(p.read_bytes())


def _fileobj(p: Path) -> Any:
    return FileObjectSource(open(p, "rb"))


def _bytesio(p: Path) -> Any:
    return FileObjectSource(io.BytesIO(p.read_bytes()))


FACTORIES: dict[str, Callable[[Path], Any]] = {
    "mmap": _mmap, "pread": _pread, "memory": _memory, "fileobj": _fileobj, "bytesio": _bytesio,
}


@pytest.fixture(params=sorted(FACTORIES))
def source(request: Any, tmp_path: Path) -> Any:
    path = tmp_path / "payload.bin"
    path.write_bytes(PAYLOAD)
    src = FACTORIES[request.param](path)
    yield src
    src.close()


class TestByteSource:
    def test_size_and_name(self, source: Any) -> None:
        assert source.size == len(PAYLOAD)
        assert isinstance(source.name, str) and source.name

    @pytest.mark.parametrize("offset, length", [(0, 0), (0, 8), (5, 300), (len(PAYLOAD) - 4, 4), (1000, 5000)])
    def test_read_into(self, source: Any, offset: int, length: int) -> None:
        buf = bytearray(length)
        source.read_into(offset, memoryview(buf))
        assert bytes(buf) == PAYLOAD[offset : offset + length]

    def test_read_past_end_is_a_source_error(self, source: Any) -> None:
        with pytest.raises(SourceError) as e:
            source.read_into(len(PAYLOAD) - 2, memoryview(bytearray(10)))
        assert isinstance(e.value, SafetensorError) and isinstance(e.value, OSError)

    def test_view_capability(self, source: Any) -> None:
        # Zero-copy views are a capability: in-memory and mapped sources have it, the others not.
        assert supports_view(source) == isinstance(source, (MmapSource, MemorySource))
        if supports_view(source):
            v = source.view(10, 20)
            assert bytes(v) == PAYLOAD[10:30]
            del v

    def test_close_is_idempotent(self, source: Any) -> None:
        source.close()
        source.close()


def test_pread_after_close(tmp_path: Path) -> None:
    path = tmp_path / "p.bin"
    path.write_bytes(PAYLOAD)
    src = PreadSource(path)
    src.close()
    with pytest.raises(FileClosed):
        src.read_into(0, memoryview(bytearray(4)))


def test_open_source_dispatch(tmp_path: Path) -> None:
    path = tmp_path / "d.bin"
    path.write_bytes(PAYLOAD)
    assert isinstance(open_source(path, "mmap"), MmapSource)
    assert isinstance(open_source(str(path), "pread"), PreadSource)
    assert isinstance(open_source(PAYLOAD), MemorySource)
    assert isinstance(open_source(bytearray(PAYLOAD)), MemorySource)
    assert supports_view(open_source(io.BytesIO(PAYLOAD))) is False
    with pytest.raises(TypeError):
        open_source(12345)
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        open_source(tmp_path / "missing.bin")


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
