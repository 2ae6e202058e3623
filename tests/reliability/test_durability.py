"""Saves: atomic always, fsync only when durable; the temp file is preallocated to its final size."""

from __future__ import annotations

import errno
import os
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import run_python

import pysafetensors
from pysafetensors import open_writer
from pysafetensors.errors import WriteError
from pysafetensors.io import sinks
from pysafetensors.io.sinks import AtomicFileSink, default_durable
from pysafetensors.numpy import load_file, save_file, save_sharded

TENSORS = {"a": np.arange(1000, dtype=np.float32), "b": np.ones((3, 4), np.int64)}


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every fd passed to os.fsync (the real fsync still runs)."""
    calls: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    monkeypatch.delenv("PYSAFETENSORS_DURABLE", raising=False)
    return calls


def _same(path: str) -> None:
    got = load_file(path)
    assert got.keys() == TENSORS.keys()
    for k, v in TENSORS.items():
        np.testing.assert_array_equal(got[k], v)


def test_default_save_renames_without_fsync(tmp_path: Any, fsyncs: list[int]) -> None:
    path = os.fspath(tmp_path / "m.safetensors")
    save_file(TENSORS, path)
    assert fsyncs == []
    _same(path)
    assert os.path.getsize(path) == len(pysafetensors.numpy.save(TENSORS))  # reserve == final size


@pytest.mark.parametrize(
    "save",
    [
        lambda p: save_file(TENSORS, p, durable=True),
        lambda p: pysafetensors.serialize_file(TENSORS, p, durable=True),
        lambda p: save_sharded(TENSORS, os.path.dirname(p), durable=True),
    ],
    ids=["numpy.save_file", "serialize_file", "save_sharded"],
)
def test_durable_fsyncs_file_and_directory(tmp_path: Any, fsyncs: list[int], save: Any) -> None:
    save(os.fspath(tmp_path / "model.safetensors"))
    assert len(fsyncs) == 2  # the temp file before the rename, the directory after
    _same(os.fspath(tmp_path / "model.safetensors"))


def test_environment_variable_turns_durability_on(tmp_path: Any, fsyncs: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expected in [("1", True), ("yes", True), ("on", True), ("0", False), ("", False), ("no", False)]:
        monkeypatch.setenv("PYSAFETENSORS_DURABLE", value)
        assert default_durable() is expected
    monkeypatch.setenv("PYSAFETENSORS_DURABLE", "1")
    save_file(TENSORS, os.fspath(tmp_path / "m.safetensors"))
    assert len(fsyncs) == 2
    fsyncs.clear()
    save_file(TENSORS, os.fspath(tmp_path / "m.safetensors"), durable=False)  # explicit wins
    assert fsyncs == []


def test_incremental_writer_durable_and_not(tmp_path: Any, fsyncs: list[int]) -> None:
    path = os.fspath(tmp_path / "w.safetensors")
    for durable, expected in [(False, 0), (True, 2)]:
        fsyncs.clear()
        with open_writer(path, {"a": ("F32", (1000,)), "b": ("I64", (3, 4))}, durable=durable) as w:
            w.write("b", TENSORS["b"])
            w.write("a", TENSORS["a"])
        assert len(fsyncs) == expected
        _same(path)


def test_cli_metadata_edit_is_durable(tmp_path: Any, fsyncs: list[int]) -> None:
    from pysafetensors.cli.main import main

    path = os.fspath(tmp_path / "m.safetensors")
    save_file(TENSORS, path)
    fsyncs.clear()
    assert main(["metadata", path, "set", "k=" + "v" * 5000, "--quiet"]) == 0  # too big: rewrite
    assert fsyncs, "the CLI rewrote the user's file without fsync"
    assert pysafetensors.safe_open(path, "np").metadata() == {"k": "v" * 5000}


def test_without_fallocate_the_file_is_sized_by_ftruncate(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Filesystems without fallocate (EOPNOTSUPP): a sparse ftruncate, same bytes."""
    monkeypatch.setattr(sinks, "_libc_fallocate", lambda: (lambda fd, size: errno.EOPNOTSUPP))
    path = os.fspath(tmp_path / "m.safetensors")
    save_file(TENSORS, path)
    with open(path, "rb") as f:
        assert f.read() == pysafetensors.numpy.save(TENSORS)


def test_no_room_is_reported_before_any_data_is_written(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.fspath(tmp_path / "m.safetensors")
    save_file({"old": np.zeros(3)}, path)
    monkeypatch.setattr(sinks, "_libc_fallocate", lambda: (lambda fd, size: errno.ENOSPC))
    before = open(path, "rb").read()  # noqa: SIM115
    writes: list[int] = []
    monkeypatch.setattr(sinks, "_writev_all", lambda fd, bufs, name: writes.append(1) or 0)
    with pytest.raises(WriteError, match=r"no room for \d+ bytes \(No space left on device\)") as e:
        save_file(TENSORS, path)
    assert e.value.errno == errno.ENOSPC
    assert writes == []
    assert open(path, "rb").read() == before  # noqa: SIM115
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


FILE_SIZE_LIMIT = r"""
import resource, signal, sys, numpy as np
from pysafetensors.errors import WriteError
from pysafetensors.numpy import save_file
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
try:
    save_file({"big": np.ones((1024, 1024), np.float32)}, sys.argv[1])
except WriteError as e:
    print("WriteError", e.errno, e)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")
def test_real_fallocate_refuses_a_file_over_the_size_limit_up_front(tmp_path: Any) -> None:
    proc = run_python(FILE_SIZE_LIMIT, os.fspath(tmp_path / "m.safetensors"))
    assert "WriteError 27" in proc.stdout, proc.stdout + proc.stderr
    if sinks._libc_fallocate() is not None:  # Linux: caught by the reservation, not mid-copy
        assert "no room for 4194384 bytes" in proc.stdout, proc.stdout


def test_sink_reserve_of_zero_is_a_no_op(tmp_path: Any) -> None:
    with AtomicFileSink(os.fspath(tmp_path / "e.bin")) as sink:
        sink.reserve(0)
        sink.write([b"abc"])
    assert open(tmp_path / "e.bin", "rb").read() == b"abc"  # noqa: SIM115
