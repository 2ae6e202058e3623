"""Loose inputs to the save paths: shapes that are not integer sequences, masked arrays, and
targets that are not regular files."""

from __future__ import annotations

import os
import socket
import stat
from typing import Any

import numpy as np
import pytest

import pysafetensors
from pysafetensors import TensorSpec, serialize
from pysafetensors.errors import InvalidShape, SerializeError, WriteError
from pysafetensors.numpy import load, save, save_file

st = pytest.importorskip("safetensors")
upstream_np = pytest.importorskip("safetensors.numpy")


@pytest.mark.parametrize("shape", ["12", [1.5], ["2"], [2.0], 2])
def test_serialize_refuses_shapes_that_are_not_int_sequences(shape: Any) -> None:
    buf = np.zeros(2, np.float32)
    with pytest.raises(InvalidShape, match="shape"):
        serialize({"a": {"dtype": "F32", "shape": shape, "data": bytes(8)}})
    with pytest.raises(InvalidShape) as ours:
        TensorSpec(dtype="float32", shape=shape, data_ptr=buf.ctypes.data, data_len=8)
    # upstream refuses the same shapes, with a TypeError (ours is one too)
    with pytest.raises(TypeError):
        st.TensorSpec(dtype="float32", shape=shape, data_ptr=buf.ctypes.data, data_len=8)
    assert isinstance(ours.value, TypeError)


def test_integer_like_dims_still_work() -> None:
    buf = np.arange(2, dtype=np.float32)
    spec = TensorSpec(dtype="float32", shape=(np.int64(2),), data_ptr=buf.ctypes.data, data_len=8)
    assert spec.shape == [2]
    data = serialize({"a": {"dtype": "F32", "shape": (np.int32(1), 2), "data": buf.tobytes()}})
    assert load(data)["a"].shape == (1, 2)


def test_masked_array_saves_its_data_like_upstream_with_a_warning() -> None:
    m = np.ma.masked_array(np.array([1.0, 2.0, 3.0], np.float32), mask=[False, True, False])
    with pytest.warns(UserWarning, match="mask .*1 masked element"):
        data = save({"m": m})
    assert data == upstream_np.save({"m": m})
    np.testing.assert_array_equal(load(data)["m"], [1.0, 2.0, 3.0])
    unmasked = np.ma.masked_array(np.arange(4, dtype=np.int64).reshape(2, 2))
    assert save({"u": unmasked}) == upstream_np.save({"u": unmasked})  # nothing masked: no warning


# --- save targets that are not regular files ------------------------------------------------------


def _fifo(tmp_path: Any) -> str:
    path = os.path.join(tmp_path, "fifo")
    os.mkfifo(path)
    return path


def _socket(tmp_path: Any) -> str:
    path = os.path.join(tmp_path, "sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    return path


def _device(tmp_path: Any) -> str:
    if os.geteuid() == 0:  # a private copy of /dev/null's node: the real one stays out of harm's way
        path = os.path.join(tmp_path, "null")
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return path
    return "/dev/null"  # not root: the save could never replace it anyway


@pytest.mark.parametrize(("make", "kind"), [(_fifo, "a FIFO"), (_socket, "a socket"), (_device, "a character device"),
                                            (lambda p: os.fspath(p), "a directory")])
def test_saving_onto_a_special_file_is_refused(tmp_path: Any, make: Any, kind: str) -> None:
    target = make(tmp_path)
    mode = os.stat(target).st_mode
    tensors = {"a": np.ones(2, np.float32)}
    for save_to in (lambda p: save_file(tensors, p), lambda p: pysafetensors.serialize_file({"a": np.ones(2)}, p),
                    lambda p: pysafetensors.open_writer(p, {"a": ("F32", (2,))})):
        with pytest.raises(WriteError, match=f"is {kind}, not a regular file") as e:
            save_to(target)
        assert e.value.filename == target
        assert os.stat(target).st_mode == mode  # still what it was
    assert not [n for n in os.listdir(os.path.dirname(target) or ".") if n.endswith(".tmp")]


def test_a_symlink_to_a_regular_file_is_replaced_as_before(tmp_path: Any) -> None:
    # Saves replace the path they are given: a link to a file becomes the new file and the file
    # it pointed to is left as it was (a shared blob is never written through).
    blob = tmp_path / "blob.safetensors"
    save_file({"old": np.zeros(1, np.float32)}, blob)
    before = blob.read_bytes()
    link = tmp_path / "link.safetensors"
    link.symlink_to(blob)
    save_file({"new": np.ones(1, np.float32)}, link)
    assert not link.is_symlink() and list(pysafetensors.numpy.load_file(link)) == ["new"]
    assert blob.read_bytes() == before
    dangling = tmp_path / "dangling.safetensors"
    dangling.symlink_to(tmp_path / "nowhere")
    save_file({"new": np.ones(1, np.float32)}, dangling)
    assert not dangling.is_symlink()


def test_a_symlink_to_a_fifo_is_refused(tmp_path: Any) -> None:
    link = tmp_path / "link"
    link.symlink_to(_fifo(tmp_path))
    with pytest.raises(WriteError, match="a FIFO"):
        save_file({"a": np.ones(1, np.float32)}, link)
    assert link.is_symlink()


def test_refusals_are_safetensor_errors() -> None:
    assert issubclass(WriteError, pysafetensors.SafetensorError) and issubclass(InvalidShape, SerializeError)
