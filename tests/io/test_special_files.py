"""Odd inputs are SafetensorErrors with context, never a hang or a bare builtin error: a FIFO (a
file or a shard), a directory where a shard should be, an index nested 100,000 deep."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pysafetensors import SafetensorError, safe_open
from pysafetensors.errors import DirectoryNotFile, InvalidIndex, NotARegularFile
from pysafetensors.io.regular import open_regular
from pysafetensors.numpy import load_file, save_file

ROOT = Path(__file__).resolve().parents[2]


def _two_shards(directory: Path) -> Path:
    save_file({"a": np.ones(2, np.float32)}, directory / "model-00001-of-00002.safetensors")
    save_file({"b": np.ones(2, np.float32)}, directory / "model-00002-of-00002.safetensors")
    index = directory / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 16}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    return index


def _in_subprocess(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    # A hang would be the bug: run where a timeout can end it.
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, backend: str) -> None:
    fifo = tmp_path / "x.safetensors"
    os.mkfifo(fifo)
    r = _in_subprocess(
        "import sys\nfrom pysafetensors import safe_open\nfrom pysafetensors.errors import NotARegularFile\n"
        "try:\n    safe_open(sys.argv[1], 'np', backend=sys.argv[2])\n"
        "except NotARegularFile as e:\n    print('refused:', e)\n",
        os.fspath(fifo), backend,
    )
    assert r.returncode == 0 and "refused:" in r.stdout and "is a FIFO" in r.stdout and str(fifo) in r.stdout, r


def test_a_fifo_shard_is_refused_without_blocking(tmp_path: Path) -> None:
    index = _two_shards(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    os.mkfifo(tmp_path / "model-00002-of-00002.safetensors")
    r = _in_subprocess(
        "import sys\nfrom pysafetensors.numpy import load_file\nfrom pysafetensors import SafetensorError\n"
        "try:\n    load_file(sys.argv[1])\nexcept SafetensorError as e:\n    print(type(e).__name__, e)\n",
        os.fspath(index),
    )
    assert r.returncode == 0 and r.stdout.startswith("NotARegularFile") and "model-00002-of-00002" in r.stdout, r
    cli = subprocess.run([sys.executable, "-m", "pysafetensors", "inspect", os.fspath(tmp_path)], check=False,
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert cli.returncode == 2 and "FIFO" in cli.stderr and "internal error" not in cli.stderr, cli


def test_a_directory_shard_is_a_clear_error(tmp_path: Path) -> None:
    index = _two_shards(tmp_path)
    (tmp_path / "model-00001-of-00002.safetensors").unlink()
    (tmp_path / "model-00001-of-00002.safetensors").mkdir()
    with pytest.raises(DirectoryNotFile, match="model-00001-of-00002.safetensors: is a directory") as e:
        load_file(index)
    assert isinstance(e.value, IsADirectoryError) and isinstance(e.value, SafetensorError)
    with safe_open(index, "np") as f:  # the other shard still reads
        assert f.get_tensor("b").tolist() == [1, 1]


def test_open_regular_refuses_devices_and_sockets(tmp_path: Path) -> None:
    with pytest.raises(NotARegularFile, match="a character device"):
        open_regular("/dev/null")
    with pytest.raises(FileNotFoundError, match="No such file or directory: "):
        open_regular(tmp_path / "missing")
    fd = open_regular(_two_shards(tmp_path))
    try:
        assert os.get_blocking(fd)
    finally:
        os.close(fd)


def test_index_nested_100000_deep(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"weight_map": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(InvalidIndex, match="nested too deeply"):
        safe_open(index, "np")
    cli = subprocess.run([sys.executable, "-m", "pysafetensors", "inspect", os.fspath(index)], check=False,
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert cli.returncode == 2 and "nested too deeply" in cli.stderr and "RecursionError" not in cli.stderr, cli


def test_a_lone_shard_in_a_directory_is_not_a_checkpoint(tmp_path: Path) -> None:
    _two_shards(tmp_path)
    (tmp_path / "model.safetensors.index.json").unlink()
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(InvalidIndex, match="shard 1 of 2, and no index"):
        load_file(tmp_path)
    assert list(load_file(tmp_path / "model-00001-of-00002.safetensors")) == ["a"]  # by name: fine
