"""A sharded checkpoint read whole: copying shards (pread, HTTP) are read concurrently, within the
thread budget and a bounded read-ahead; results and their order are the sequential ones.

Reads are observed through a PreadSource that records when each read runs (and holds it a few
milliseconds, so that reads which may overlap do); HTTP through the test server's count of
requests in flight.  No timing is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy as upstream
from servers import RangeServer

from pysafetensors import safe_open
from pysafetensors import sharded as sharded_module
from pysafetensors.errors import InvalidIndex, SourceError, UnmappedTensorWarning
from pysafetensors.format.index import parse_index
from pysafetensors.io.sources import PreadSource
from pysafetensors.numpy import load_file, save_sharded
from pysafetensors.reader import SafeFile
from pysafetensors.sharded import ShardedFile

KiB = 1 << 10


def _arrays(shards: int, per_shard: int = 2, size: int = 64 * KiB) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        f"layer.{i:02d}.w{j}": rng.standard_normal(size // 4 // per_shard).astype(np.float32)
        for i in range(shards)
        for j in range(per_shard)
    }


def _checkpoint(tmp_path: Path, shards: int, size: int = 64 * KiB) -> tuple[Path, dict[str, np.ndarray]]:
    arrays = _arrays(shards, size=size)
    index = Path(save_sharded(arrays, tmp_path / "ckpt", max_shard_size=size + 1000))
    assert len(parse_index(index.read_bytes()).shards) == shards
    return index, arrays


def _expected(index: Path) -> list[tuple[str, np.ndarray]]:
    """Upstream's load of every shard, in index order: what loading the index must give."""
    out: list[tuple[str, np.ndarray]] = []
    for shard in parse_index(index.read_bytes()).shards:
        with upstream.safe_open(str(index.parent / shard), "np") as f:
            out.extend((name, f.get_tensor(name)) for name in f.offset_keys())
    return out


class Recorder:
    """Shared log of the data reads of every shard's TrackingSource."""

    def __init__(self, hold: float = 0.02) -> None:
        self.hold = hold
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0
        self.reads: list[str] = []  # shard file names, in the order their reads started

    def open_shard(self, directory: Path) -> Any:
        recorder = self

        class TrackingSource(PreadSource):
            def read_into(self, offset: int, buffer: memoryview) -> None:
                if len(buffer) < 4 * KiB:  # the header: not what is measured
                    super().read_into(offset, buffer)
                    return
                with recorder.lock:
                    recorder.active += 1
                    recorder.max_active = max(recorder.max_active, recorder.active)
                    recorder.reads.append(os.path.basename(self.name))
                try:
                    time.sleep(recorder.hold)
                    super().read_into(offset, buffer)
                finally:
                    with recorder.lock:
                        recorder.active -= 1

        return lambda shard: SafeFile(TrackingSource(directory / shard))


def _tracked(index: Path, recorder: Recorder) -> ShardedFile:
    return ShardedFile(parse_index(index.read_bytes(), str(index)), recorder.open_shard(index.parent), str(index))


@pytest.mark.parametrize("backend", ["pread", "mmap"])
@pytest.mark.parametrize("threads", [None, 1, 3])
def test_same_tensors_in_the_same_order(tmp_path: Path, backend: str, threads: int | None) -> None:
    index, _ = _checkpoint(tmp_path, 5)
    got = load_file(index, backend=backend, threads=threads)
    expected = _expected(index)
    assert list(got) == [name for name, _ in expected]
    for name, value in expected:
        np.testing.assert_array_equal(got[name], value)
        assert got[name].flags.writeable == (backend == "pread")


def _load(f: ShardedFile, threads: int | None = None) -> dict[str, np.ndarray]:
    return {raw.name: np.frombuffer(raw.data, np.float32).reshape(raw.shape) for raw in f.raw_all(threads)}


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_small_pread_shards_are_read_in_parallel_within_the_budget(tmp_path: Path, threads: int) -> None:
    # Each shard is far below one 16 MiB read chunk: alone, each would be one read on one thread.
    index, arrays = _checkpoint(tmp_path, 6)
    recorder = Recorder()
    f = _tracked(index, recorder)
    try:
        got = _load(f, threads)
    finally:
        f.close()
    assert recorder.max_active == threads  # the reads of several shards overlapped, no more than allowed
    assert sorted(recorder.reads) == sorted(parse_index(index.read_bytes()).shards)  # each read once
    assert list(got) == list(arrays)
    for name, value in arrays.items():
        np.testing.assert_array_equal(got[name], value)


@pytest.mark.parametrize("budget_shards", [0, 2])
def test_read_ahead_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget_shards: int) -> None:
    # A consumer that looks at one shard at a time: while it has shard k, the reads started
    # are those of shards up to k + 1, plus what the read-ahead budget allows beyond.
    index, _ = _checkpoint(tmp_path, 7)
    shards = parse_index(index.read_bytes()).shards
    size = os.path.getsize(index.parent / shards[0])
    monkeypatch.setattr(sharded_module, "_READ_AHEAD", budget_shards * size)
    recorder = Recorder(hold=0.0)
    f = _tracked(index, recorder)
    seen: list[int] = []
    try:
        for raw in f.raw_all(threads=2):
            k = shards.index(f.index.weight_map[raw.name])
            if seen and seen[-1] == k:
                continue
            seen.append(k)
            with recorder.lock:
                furthest = max(shards.index(name) for name in recorder.reads)
            assert furthest <= k + 1 + budget_shards, (k, recorder.reads)
    finally:
        f.close()
    assert seen == list(range(len(shards)))


def test_a_failed_shard_read_names_it_and_leaves_no_thread(tmp_path: Path) -> None:
    index, _ = _checkpoint(tmp_path, 5)
    shards = parse_index(index.read_bytes()).shards
    before = threading.active_count()
    with safe_open(index, "np", backend="pread") as f:
        f.offset_keys()  # every shard opened, headers checked
        victim = index.parent / shards[3]
        os.truncate(victim, os.path.getsize(victim) - 1000)  # shrunk under the open handle
        with pytest.raises(SourceError, match=shards[3]) as info:
            f.get_tensors()
        assert info.value.tensor is not None and info.value.tensor.startswith("layer.03.")
        assert threading.active_count() == before
        assert f.get_tensor("layer.00.w0").shape == (8192,)  # the handle is still usable


def test_a_consumer_stopping_early_stops_the_reads(tmp_path: Path) -> None:
    index, arrays = _checkpoint(tmp_path, 6)
    before = threading.active_count()
    recorder = Recorder()
    f = _tracked(index, recorder)
    try:
        stream = f.raw_all(threads=2)
        first = next(stream)
        assert first.name == next(iter(arrays))
        stream.close()  # what breaking out of a for loop does
        assert threading.active_count() == before
        assert len(recorder.reads) < 6  # the rest was never read
        np.testing.assert_array_equal(np.frombuffer(f.raw("layer.05.w1").data, np.float32), arrays["layer.05.w1"])
    finally:
        f.close()


def _served(index: Path) -> dict[str, bytes]:
    return {f"repo/{p.name}": p.read_bytes() for p in index.parent.iterdir()}


def test_remote_shards_are_fetched_concurrently(tmp_path: Path) -> None:
    # Shards over the 100 kB the header request brings: each needs a request for its data.
    index, arrays = _checkpoint(tmp_path, 6, size=256 * KiB)
    with RangeServer(_served(index), latency=0.05) as server:
        url = server.url("repo/model.safetensors.index.json")
        with safe_open(url, "np") as f:
            names = f.offset_keys()  # opening every shard: header requests at once
            assert server.paths_in_flight > 1
            server.max_in_flight = server.paths_in_flight = 0
            got = f.get_tensors()
        assert server.paths_in_flight > 1  # data requests of several shards at once
        assert server.max_in_flight <= sharded_module._SHARDS_AT_ONCE * 8  # HTTPSource's max_workers each
    assert list(got) == names == list(arrays)
    for name, value in arrays.items():
        np.testing.assert_array_equal(got[name], value)


def test_remote_shard_errors_come_in_shard_order(tmp_path: Path) -> None:
    # Shard 1 lacks a tensor the index maps to it, shard 2 is not there at all: opened at once,
    # the first shard's error is the one raised, as when the shards are read one by one.
    index, _ = _checkpoint(tmp_path, 3)
    files = _served(index)
    shards = parse_index(index.read_bytes()).shards
    del files[f"repo/{shards[1]}"]
    text = index.read_text().replace('"layer.02.w0": "' + shards[2], '"layer.02.w0": "' + shards[0])
    files["repo/model.safetensors.index.json"] = text.encode()
    with (
        RangeServer(files, latency=0.02) as server,
        pytest.raises(InvalidIndex, match="layer.02.w0"),
        pytest.warns(UnmappedTensorWarning, match=shards[2]),
    ):
        load_file(server.url("repo/model.safetensors.index.json"))


def test_staging_takes_a_sharded_checkpoint(tmp_path: Path) -> None:
    # safe_open(index, "pt", device="cuda").get_tensors() hands the ShardedFile to the ring.
    import torch

    from pysafetensors.handle import open_file
    from pysafetensors.staging import StagingConfig, load_to_device
    from pysafetensors.torch import load_file as torch_load_file
    from pysafetensors.torch import save_sharded as torch_save_sharded

    tensors = {f"w{i}": torch.arange(3000, dtype=torch.float32) * i for i in range(5)}
    index = torch_save_sharded(tensors, tmp_path, max_shard_size=25_000)
    f = open_file(index)
    try:
        got = load_to_device(f, "cpu", config=StagingConfig(buffers=2, buffer_bytes=7000))
    finally:
        f.close()
    expected = torch_load_file(index)
    assert list(got) == list(expected) == list(tensors)
    for name, value in expected.items():
        assert torch.equal(got[name], value)


def test_benchmark_quick_smoke(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "sharded_parallel.py"
    out = tmp_path / "results.json"
    args = ["--quick", "-n", "1", "--settle", "0", "--data", str(tmp_path), "--only", "pread, hot", "--json", str(out)]
    subprocess.run([sys.executable, str(script), *args], check=True, capture_output=True, timeout=300)
    results = json.loads(out.read_text())
    assert [r["case"] for r in results] == ["24 MiB in 6 shards, pread, hot", "4 MiB in 8 shards, pread, hot"]
    assert all(len(r["seq"]) == len(r["par"]) == 1 for r in results)
