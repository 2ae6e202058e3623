"""Sharded saves never replace or delete what is not a regular file (SECURITY.md's promise).

A FIFO, device node, socket or directory at a name a sharded save would replace (a shard, the
index) or remove (a stale shard of another count, an old index, a lone model.safetensors) is
refused with a WriteError naming it, before any shard is written; the node is left as it was.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors.errors import WriteError
from pysafetensors.format.dtypes import by_code
from pysafetensors.numpy import save_sharded
from pysafetensors.sharded import write_sharded
from pysafetensors.writer import WriteItem

INDEX = "model.safetensors.index.json"


def _two_shards() -> dict[str, np.ndarray]:
    return {"a": np.zeros(300, np.float32), "b": np.ones(300, np.float32)}  # 1200 B each: 2 shards at 2000


def _fifo(path: str) -> None:
    os.mkfifo(path)


def _socket(path: str) -> None:
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()


def _device(path: str) -> None:
    # A private copy of /dev/null's node (1, 3): the real one stays out of harm's way.
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
KINDS = [pytest.param(_fifo, "a FIFO", id="fifo"), pytest.param(_socket, "a socket", id="socket"),
         pytest.param(_device, "a character device", id="device", marks=needs_root)]


def _snapshot(directory: Any) -> dict[str, tuple[int, int, bytes | None]]:
    """Every name in ``directory`` with its mode, device number and (for regular files) bytes."""
    out = {}
    for name in sorted(os.listdir(directory)):
        st = os.lstat(os.path.join(directory, name))
        data = Path(directory, name).read_bytes() if stat.S_ISREG(st.st_mode) else None
        out[name] = (st.st_mode, st.st_rdev, data)
    return out


@pytest.mark.parametrize(("make", "kind"), KINDS)
@pytest.mark.parametrize("name", ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", INDEX])
def test_a_special_file_at_a_name_the_save_writes_is_refused(tmp_path: Any, make: Any, kind: str, name: str) -> None:
    node = os.path.join(tmp_path, name)
    make(node)
    before = _snapshot(tmp_path)
    with pytest.raises(WriteError, match=f"is {kind}, not a regular file") as e:
        save_sharded(_two_shards(), tmp_path, max_shard_size=2000)
    assert e.value.filename == node
    assert _snapshot(tmp_path) == before  # the node is what it was, and nothing was staged or left


@pytest.mark.parametrize(("make", "kind"), KINDS)
@pytest.mark.parametrize(("shards", "name"), [
    (2, "model-00002-of-00003.safetensors"),  # a stale shard of another count, removed after a 2-shard save
    (2, "model.safetensors"),  # a lone file a sharded save removes
    (1, INDEX),  # the old index a single-file save removes
    (1, "model-00001-of-00002.safetensors"),  # a stale shard a single-file save removes
])
def test_a_special_file_at_a_name_the_save_removes_is_refused(
    tmp_path: Any, make: Any, kind: str, shards: int, name: str
) -> None:
    node = os.path.join(tmp_path, name)
    make(node)
    before = _snapshot(tmp_path)
    with pytest.raises(WriteError, match=f"cannot remove {node}.* is {kind}, not a regular file") as e:
        save_sharded(_two_shards(), tmp_path, max_shard_size=2000 if shards == 2 else 10**6)
    assert e.value.filename == node
    assert _snapshot(tmp_path) == before


def test_an_old_checkpoint_is_left_whole_when_a_node_is_refused(tmp_path: Any) -> None:
    save_sharded(_two_shards(), tmp_path, max_shard_size=2000)
    _fifo(os.path.join(tmp_path, "model-00003-of-00003.safetensors"))
    before = _snapshot(tmp_path)
    with pytest.raises(WriteError, match="a FIFO"):
        save_sharded({k: v + 1 for k, v in _two_shards().items()}, tmp_path, max_shard_size=2000)
    assert _snapshot(tmp_path) == before  # old shards and index unchanged, the FIFO kept


def test_a_directory_at_a_shard_name_is_refused_before_any_shard_is_written(tmp_path: Any) -> None:
    os.mkdir(os.path.join(tmp_path, "model-00002-of-00002.safetensors"))
    read: list[str] = []

    def item(name: str) -> WriteItem:
        def get_bytes() -> bytes:
            read.append(name)
            return bytes(1200)

        return WriteItem(name, by_code("F32"), (300,), get_bytes)

    with pytest.raises(WriteError, match="model-00002-of-00002.safetensors: it is a directory, not a regular file"):
        write_sharded([item("a"), item("b")], tmp_path, max_shard_size=2000)
    assert read == []  # refused before the first tensor was asked for
    assert os.listdir(tmp_path) == ["model-00002-of-00002.safetensors"]


def test_regular_files_and_links_to_them_are_still_replaced(tmp_path: Any) -> None:
    # The check refuses only what is not a regular file: an earlier save's files (and a link to
    # a regular file, replaced by the new file as single-file saves do) go as before.
    blob = tmp_path / "blob"
    blob.write_bytes(b"x")
    (tmp_path / "model-00001-of-00002.safetensors").symlink_to(blob)
    (tmp_path / "model-00002-of-00003.safetensors").write_bytes(b"stale")
    save_sharded(_two_shards(), tmp_path, max_shard_size=2000)
    assert sorted(os.listdir(tmp_path)) == ["blob", "model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors", INDEX]
    assert blob.read_bytes() == b"x" and not (tmp_path / "model-00001-of-00002.safetensors").is_symlink()


def test_publishing_rechecks_names_a_node_took_since_the_save_began(tmp_path: Any) -> None:
    # The names are checked before writing; a node that appears at one while the shards are
    # written is still neither replaced (WriteError) nor removed as a leftover (kept).
    from pysafetensors.io.sinks import LocalDirectory

    target = LocalDirectory(os.fspath(tmp_path))
    stage = target.stage("model")
    with open(stage.file("new.safetensors"), "wb") as f:
        f.write(b"new")
    _fifo(os.path.join(tmp_path, "new.safetensors"))
    _fifo(os.path.join(tmp_path, "old.safetensors"))
    with pytest.raises(WriteError, match="new.safetensors: it is a FIFO"):
        stage.publish(["new.safetensors"])
    with pytest.raises(WriteError, match="cannot remove .*old.safetensors.* a FIFO"):
        stage.set_aside("old.safetensors")
    stage.publish([], remove=["old.safetensors"])  # clean-up is best effort: the FIFO is skipped, not deleted
    with pytest.raises(WriteError, match="cannot remove .*old.safetensors.* a FIFO"):
        target.remove(["old.safetensors"])
    for name in ("new.safetensors", "old.safetensors"):
        assert stat.S_ISFIFO(os.lstat(os.path.join(tmp_path, name)).st_mode)
