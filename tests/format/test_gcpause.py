"""_gcpause.paused_gc: saves and bulk loads do not run the cyclic collector mid-call, and always restore it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import pysafetensors
from pysafetensors import numpy as stnp
from pysafetensors.format._gcpause import paused_gc


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """Generations of the collections that run while the test body runs, with thresholds so
    low that any allocation-heavy code would trigger many."""
    seen: list[int] = []

    def cb(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    old = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    gc.callbacks.append(cb)
    try:
        yield seen
    finally:
        gc.callbacks.remove(cb)
        gc.set_threshold(*old)
        gc.enable()


def test_saving_and_loading_many_tensors_runs_no_collection(tmp_path: Path, collections: list[int]) -> None:
    tensors = {f"t{i}": np.full((4,), i, dtype=np.float32) for i in range(500)}
    raw = {k: v.tobytes() for k, v in tensors.items()}
    path = tmp_path / "a.safetensors"
    gc.collect()
    collections.clear()
    [[0] * 100 for _ in range(50)]  # the fixture's thresholds do trigger collections here...
    assert len(collections) > 0
    counts = []
    data = stnp.save(tensors)
    handle = pysafetensors.safe_open(data, "np")
    calls = (lambda: stnp.save_file(tensors, path), lambda: stnp.save(tensors),
             lambda: pysafetensors.serialize(raw), lambda: stnp.load_file(path), lambda: stnp.load(data),
             handle.get_tensors)
    for call in calls:
        gc.collect()  # count 0: the few allocations before the pause cannot reach 50
        collections.clear()
        call()
        counts.append(len(collections))  # len() allocates nothing the collector tracks
    # ...but not during the saves and loads (thousands of allocations each)
    assert counts == [0] * len(calls)
    assert gc.isenabled()
    assert stnp.load_file(path)["t499"][0] == 499
    assert len(pysafetensors.deserialize(pysafetensors.serialize(raw))) == 500


def test_state_is_restored_even_on_error(tmp_path: Path) -> None:
    assert gc.isenabled()
    with pytest.raises(pysafetensors.SafetensorError):
        stnp.save_file({"a": object()}, tmp_path / "b.safetensors")  # type: ignore[dict-item]
    assert gc.isenabled()
    gc.disable()
    try:
        stnp.save_file({"a": np.zeros(2)}, tmp_path / "c.safetensors")
        assert not gc.isenabled()  # a caller's "off" is kept
    finally:
        gc.enable()


def test_nested_and_concurrent_pauses_leave_the_collector_on() -> None:
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner one found it off
    assert gc.isenabled()

    start = threading.Barrier(8)

    @paused_gc()
    def work() -> None:
        start.wait()
        for _ in range(200):
            [object() for _ in range(10)]

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert gc.isenabled()
