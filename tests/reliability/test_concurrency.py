"""Concurrent readers on one handle, concurrent savers to one path, atomic replace, file modes."""

from __future__ import annotations

import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import in_threads

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors import safe_open

THREADS = 8


def _tensors(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {f"t{i}": rng.standard_normal((16, 33)).astype(np.float32) for i in range(12)}


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("framework", ["np", "pt"])
def test_threads_share_one_handle(tmp_path: Path, backend: str, framework: str) -> None:
    if framework == "pt":
        pytest.importorskip("torch")
    tensors = _tensors(0)
    path = tmp_path / "r.safetensors"
    pnp.save_file(tensors, path)
    with safe_open(path, framework, backend=backend) as f:

        def work(worker: int) -> None:
            for rep in range(20):
                name = f"t{(worker + rep) % 12}"
                full = np.asarray(f.get_tensor(name))
                assert np.array_equal(full, tensors[name])
                part = np.asarray(f.get_slice(name)[rep % 16, ::3])
                assert np.array_equal(part, tensors[name][rep % 16, ::3])
                assert list(f.get_tensors()) == f.offset_keys()

        in_threads(work, THREADS)


def test_concurrent_savers_leave_one_complete_file(tmp_path: Path) -> None:
    path = tmp_path / "race.safetensors"
    inputs = [_tensors(seed) for seed in range(THREADS)]
    expected = {pnp.save(t, metadata={"writer": str(i)}) for i, t in enumerate(inputs)}
    barrier = threading.Barrier(THREADS)

    def save(i: int) -> None:
        barrier.wait()
        for _ in range(3):
            pnp.save_file(inputs[i], path, metadata={"writer": str(i)})

    pnp.save_file(inputs[0], path, metadata={"writer": "0"})
    seen: list[bytes] = []
    done = threading.Event()

    failures: list[BaseException] = []

    def watch() -> None:  # readers opening the path mid-race always find a whole file
        try:
            while not done.is_set():
                with safe_open(path, "np") as f:
                    writer = int(f.metadata()["writer"])
                    assert all(np.array_equal(f.get_tensor(k), v) for k, v in inputs[writer].items())
                seen.append(path.read_bytes())
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(save, range(THREADS)))
    finally:
        done.set()
        watcher.join()
    assert not failures, failures[0]
    assert seen and all(b in expected for b in seen)
    assert path.read_bytes() in expected  # one writer's whole file, never a mix
    assert os.listdir(tmp_path) == ["race.safetensors"]  # no temp files left behind


def test_reader_keeps_old_data_after_replace(tmp_path: Path) -> None:
    path = tmp_path / "swap.safetensors"
    old, new = _tensors(1), _tensors(2)
    pnp.save_file(old, path)
    for backend in ("mmap", "pread"):
        pnp.save_file(old, path)
        with safe_open(path, "np", backend=backend) as f:
            early = f.get_tensor("t0")
            pnp.save_file(new, path)
            # the open handle still sees the file it opened, whole and unchanged
            for name in old:
                assert np.array_equal(f.get_tensor(name), old[name])
                assert np.array_equal(f.get_slice(name)[1:3], old[name][1:3])
            assert np.array_equal(early, old["t0"])
        assert np.array_equal(pnp.load_file(path)["t0"], new["t0"])


def test_failed_save_keeps_previous_file(tmp_path: Path) -> None:
    path = tmp_path / "keep.safetensors"
    pnp.save_file({"a": np.ones(3)}, path)
    before = path.read_bytes()
    bad: Any = {"a": np.ones(3), "z": np.array(["not a number"])}
    with pytest.raises(pysafetensors.SafetensorError):
        pnp.save_file(bad, path)  # refused while planning
    # refused mid-stream: the second tensor's buffer is short, after the temp file exists
    short: Any = {"a": np.ones(3), "b": {"dtype": "U8", "shape": [4], "data": b"xy"}}
    with pytest.raises(pysafetensors.SafetensorError, match="needs 4"):
        pysafetensors.serialize_file(short, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.safetensors"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_file_mode_follows_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        ours = tmp_path / "ours.safetensors"
        pnp.save_file({"a": np.zeros(2)}, ours)
        pysafetensors.serialize_file({"a": np.zeros(2)}, tmp_path / "ser.safetensors")
        with open(tmp_path / "plain", "wb"):
            pass
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "plain").stat().st_mode) == expected
    assert stat.S_IMODE(ours.stat().st_mode) == expected
    assert stat.S_IMODE((tmp_path / "ser.safetensors").stat().st_mode) == expected


def test_existing_file_mode_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    pnp.save_file({"a": np.zeros(2)}, path)
    os.chmod(path, 0o640)
    old = os.umask(0o077)
    try:
        pnp.save_file({"a": np.ones(2)}, path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert pnp.load_file(path)["a"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_load_then_save_over_the_same_path(tmp_path: Path, backend: str) -> None:
    path = tmp_path / "same.safetensors"
    tensors = _tensors(3)
    pnp.save_file(tensors, path, metadata={"v": "1"})
    before = path.read_bytes()
    loaded = pnp.load_file(path, backend=backend)  # mmap: views of the file being replaced
    pnp.save_file(loaded, path, metadata={"v": "1"})
    assert path.read_bytes() == before
    loaded["extra"] = np.arange(3, dtype=np.int8)
    pnp.save_file(loaded, path)
    back = pnp.load_file(path)
    assert all(np.array_equal(back[k], v) for k, v in tensors.items())
    assert back["extra"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.slow
def test_unclosed_handles_release_their_descriptors(tmp_path: Path, backend: str) -> None:
    import gc

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    path = tmp_path / "fd.safetensors"
    pnp.save_file({"a": np.arange(3.0)}, path)
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    kept = []
    for _ in range(50):
        f = safe_open(path, "np", backend=backend)  # never closed, no ``with``
        kept.append(f.get_tensor("a"))
    del f
    gc.collect()
    assert all(k.tolist() == [0.0, 1.0, 2.0] for k in kept)  # tensors outlive their handles
    if backend == "pread":  # fresh buffers: nothing holds the file once the handle is gone
        assert len(os.listdir("/proc/self/fd")) - before <= 1
    # (Python's mmap keeps a duplicate descriptor while a mapped tensor is alive)
    del kept
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) - before <= 1
