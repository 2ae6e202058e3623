"""Distributed loaders over torch.distributed (gloo) with two processes on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors.distributed import load_partition, load_tensor_parallel, shard_bounds

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from pysafetensors.io.remote import PREFETCH
from pysafetensors.torch import save_file, save_sharded

WORLD = 2

WORKER = textwrap.dedent(
    """
    import os, sys
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from pysafetensors.distributed import load_file_cooperative, load_partition, load_tensor_parallel

    rank, world, port, out, ckpt_dir, single, url = sys.argv[1:]
    rank, world = int(rank), int(world)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=40))
    results = {
        "partition": load_partition(ckpt_dir),
        "partition_single": load_partition(single),
        "tp": load_tensor_parallel(single, {"w.*": 0, "col": 1}),
        "coop_dir": load_file_cooperative(ckpt_dir),
        "coop_url": load_file_cooperative(url, storage_options={"backoff": 0.05}),
    }
    dist.barrier()
    torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def state() -> dict:
    g = torch.Generator().manual_seed(0)
    return {
        "w.0": torch.randn(512, 512, generator=g),  # 1 MiB
        "w.1": torch.randn(257, 300, generator=g),  # odd rows: uneven split
        "col": torch.randn(64, 33, generator=g),
        "bias": torch.arange(10, dtype=torch.int64),
        "half": torch.randn(100, 7, generator=g).to(torch.bfloat16),
    }


def test_two_gloo_ranks(tmp_path, state: dict) -> None:
    ckpt, single = tmp_path / "ckpt", tmp_path / "single.safetensors"
    save_sharded(state, ckpt, max_shard_size="300KB")
    save_file(state, single)
    shards = [n for n in os.listdir(ckpt) if n.endswith(".safetensors")]
    assert len(shards) >= 3
    blob = single.read_bytes()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    import pysafetensors

    here = os.path.dirname(os.path.dirname(os.path.abspath(pysafetensors.__file__)))  # the package under test
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, *sys.path]), "OMP_NUM_THREADS": "1"}
    if sys.platform.startswith("linux"):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on loopback whatever the host name resolves to
    with RangeServer({"single.safetensors": blob}) as server:
        port = str(_free_port())
        procs = [
            subprocess.Popen(
                [sys.executable, str(script), str(r), str(WORLD), port, str(tmp_path), str(ckpt), str(single),
                 server.url("single.safetensors")],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            )
            for r in range(WORLD)
        ]
        logs = []
        deadline = time.monotonic() + 90  # for the whole job: it can never hang the suite
        try:
            for p in procs:
                logs.append(p.communicate(timeout=max(1, deadline - time.monotonic()))[0].decode(errors="replace"))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        assert all(p.returncode == 0 for p in procs), "\n".join(logs)
        coop_bytes = server.log.bytes_sent
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]

    # Partition: disjoint, together everything, each rank's part exact.
    for key in ("partition", "partition_single"):
        parts = [set(r[key]) for r in results]
        assert parts[0].isdisjoint(parts[1]) and parts[0] | parts[1] == set(state)
        assert all(parts), key
        for r in results:
            assert all(torch.equal(v, state[k]) for k, v in r[key].items())

    # Tensor parallel: pieces concatenate back; unsplit tensors whole.
    for name, dim in (("w.0", 0), ("w.1", 0), ("col", 1)):
        pieces = [r["tp"][name] for r in results]
        assert torch.equal(torch.cat(pieces, dim), state[name])
        assert [p.shape[dim] for p in pieces] == [len(t) for t in torch.tensor_split(torch.empty(state[name].shape[dim]), WORLD)]
    assert all(torch.equal(r["tp"]["bias"], state["bias"]) for r in results)

    # Cooperative: everything everywhere, and the file crossed the wire about once, not twice.
    for r in results:
        for key in ("coop_dir", "coop_url"):
            assert set(r[key]) == set(state)
            assert all(torch.equal(r[key][k], v) for k, v in state.items()), key
    print(f"cooperative load: {coop_bytes} bytes over HTTP for a {len(blob)}-byte file, {WORLD} ranks")
    assert coop_bytes <= len(blob) + WORLD * PREFETCH
    assert coop_bytes < 1.5 * len(blob)


def test_partition_and_tensor_parallel_without_a_process_group(tmp_path) -> None:
    arrays = {f"t{i}": np.full((6, 4), i, np.float32) for i in range(5)}
    from pysafetensors.numpy import save_file as np_save_file

    path = tmp_path / "m.safetensors"
    np_save_file(arrays, path)
    parts = [load_partition(path, framework="np", rank=r, world_size=3) for r in range(3)]
    assert sorted(k for p in parts for k in p) == sorted(arrays)
    assert all(parts)
    tp = [load_tensor_parallel(path, lambda n, s: 1 if n == "t2" else None, framework="np", rank=r, world_size=3)
          for r in range(3)]
    np.testing.assert_array_equal(np.concatenate([p["t2"] for p in tp], axis=1), arrays["t2"])
    with pytest.raises(RuntimeError, match="init_process_group"):
        load_partition(path, framework="np")
    with pytest.raises(ValueError, match="outside"):
        load_partition(path, framework="np", rank=3, world_size=3)


@pytest.mark.parametrize(("length", "world"), [(10, 3), (3, 4), (0, 2), (257, 2)])
def test_shard_bounds_follow_tensor_split(length: int, world: int) -> None:
    expected = torch.tensor_split(torch.arange(length), world)
    for r in range(world):
        start, stop = shard_bounds(length, r, world)
        assert list(range(start, stop)) == expected[r].tolist()
