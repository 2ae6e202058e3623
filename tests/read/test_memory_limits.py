"""Reads that copy (pread, HTTP, staging) refuse up front, with InsufficientMemory, when their
buffer would not fit in the memory the process can have; maps (mmap) are never refused.

The machine's MemAvailable is replaced by a file of the test's own (``io.memory.MEMINFO``) so
"more than available" needs no real memory; the cgroup readers run on fake cgroup trees; the
rlimit case runs in a child process under a real ``RLIMIT_AS`` (what ``ulimit -v`` sets).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors import safe_open
from pysafetensors.errors import InsufficientMemory, SafetensorError
from pysafetensors.format.index import ShardIndex, encode_index
from pysafetensors.io import memory
from pysafetensors.numpy import load_file, save_file

MiB = 1 << 20
SRC = str(Path(__file__).resolve().parents[2] / "src")


def sparse_file(path: Path, sizes: dict[str, int]) -> Path:
    """A valid file of U8 tensors of these sizes whose data is a hole: no disk, no page cache."""
    header: dict[str, Any] = {}
    pos = 0
    for name, n in sizes.items():
        header[name] = {"dtype": "U8", "shape": [n], "data_offsets": [pos, pos + n]}
        pos += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        f.truncate(8 + len(text) + pos)
    return path


@pytest.fixture
def available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set the MemAvailable this process sees (bytes)."""

    def set_available(nbytes: int) -> None:
        meminfo = tmp_path / "meminfo"
        meminfo.write_text(f"MemTotal:       99999999 kB\nMemFree:  1 kB\nMemAvailable:   {nbytes >> 10} kB\n")
        monkeypatch.setattr(memory, "MEMINFO", str(meminfo))

    return set_available


def test_mem_available_reads_the_real_meminfo() -> None:
    with open("/proc/meminfo") as f:
        fields = dict(line.split(":", 1) for line in f)
    expected = int(fields["MemAvailable"].split()[0]) * 1024
    got = memory.mem_available()
    assert got is not None and abs(got - expected) < 256 * MiB  # read a moment apart
    assert any(lim.name.startswith("MemAvailable") for lim in memory.limits())


def test_pread_load_over_available_is_refused_and_mmap_is_not(tmp_path: Path, available: Any) -> None:
    path = sparse_file(tmp_path / "big.safetensors", {"a": 48 * MiB, "b": 16 * MiB})
    available(120 * MiB)  # 64 MiB of data + the 64 MiB margin do not fit; 48 MiB + 64 do
    with pytest.raises(InsufficientMemory) as info:
        load_file(path, backend="pread")
    e = info.value
    assert isinstance(e, SafetensorError) and isinstance(e, MemoryError)
    assert e.requested == 64 * MiB and e.available == 120 * MiB and e.limit.startswith("MemAvailable")
    message = str(e)
    assert str(path) in message and str(64 * MiB) in message and str(120 * MiB) in message
    assert 'backend="mmap"' in message and "get_tensor" in message
    with safe_open(path, "np", backend="pread") as f, pytest.raises(InsufficientMemory):
        f.get_tensors()
    # The same file loads through a map: nothing is allocated for it.
    arrays = load_file(path, backend="mmap")
    assert [a.nbytes for a in arrays.values()] == [48 * MiB, 16 * MiB]
    # One tensor at a time fits: each is checked alone.
    with safe_open(path, "np", backend="pread") as f:
        assert f.get_tensor("a").nbytes == 48 * MiB
        assert f.get_tensor("b").nbytes == 16 * MiB


def test_one_tensor_over_available_is_refused_with_get_slice_advice(tmp_path: Path, available: Any) -> None:
    path = sparse_file(tmp_path / "big.safetensors", {"w": 64 * MiB})
    available(100 * MiB)
    with safe_open(path, "np", backend="pread") as f:
        with pytest.raises(InsufficientMemory, match="tensor 'w'.*get_slice") as info:
            f.get_tensor("w")
        assert info.value.requested == 64 * MiB
        assert f.get_slice("w")[: 4 * MiB].nbytes == 4 * MiB  # a part of it is fine


def test_switch_lets_the_load_try_anyway(tmp_path: Path, available: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = sparse_file(tmp_path / "big.safetensors", {"a": 32 * MiB})
    available(40 * MiB)
    with pytest.raises(InsufficientMemory):
        load_file(path, backend="pread")
    monkeypatch.setenv("PYSAFETENSORS_MEMORY_CHECK", "0")
    assert load_file(path, backend="pread")["a"].nbytes == 32 * MiB


def test_small_reads_are_not_probed(tmp_path: Path, available: Any) -> None:
    path = tmp_path / "small.safetensors"
    save_file({"x": np.arange(1000, dtype=np.float32)}, path)
    available(0)  # nothing "available", yet a few KiB are not worth a probe
    np.testing.assert_array_equal(load_file(path, backend="pread")["x"], np.arange(1000, dtype=np.float32))


def _sharded(tmp_path: Path, sizes: list[int]) -> Path:
    weight_map = {}
    for i, n in enumerate(sizes):
        shard = f"model-{i + 1:05d}-of-{len(sizes):05d}.safetensors"
        sparse_file(tmp_path / shard, {f"t{i}": n})
        weight_map[f"t{i}"] = shard
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(encode_index(ShardIndex(weight_map=weight_map, metadata={"total_size": sum(sizes)})))
    return index


def test_sharded_bulk_load_counts_every_shard(tmp_path: Path, available: Any) -> None:
    # Each shard fits alone (24 MiB + margin < 100 MiB), all four together do not: the bulk
    # load keeps every shard's buffer, so it is refused before the first shard is read.
    index = _sharded(tmp_path, [24 * MiB] * 4)
    available(100 * MiB)
    with pytest.raises(InsufficientMemory, match="4 shard") as info:
        load_file(index, backend="pread")
    assert info.value.requested == 96 * MiB and str(index) in str(info.value)
    assert sum(a.nbytes for a in load_file(index, backend="mmap").values()) == 96 * MiB
    with safe_open(index, "np", backend="pread") as f:
        assert [f.get_tensor(k).nbytes for k in f.keys()]  # noqa: SIM118 - safe_open has no __iter__ == [24 * MiB] * 4


def test_remote_bulk_load_is_refused_before_reading_the_data(tmp_path: Path, available: Any) -> None:
    path = tmp_path / "m.safetensors"
    save_file({"a": np.zeros(10 * MiB, np.float32)}, path)  # 40 MiB
    with RangeServer({"m.safetensors": path.read_bytes()}) as server:
        available(64 * MiB)
        with pytest.raises(InsufficientMemory, match="download the file") as info:
            load_file(server.url("m.safetensors"))
        assert info.value.requested == 40 * MiB
        assert server.log.requests == 1  # the header's request; no data was fetched


def test_staging_refuses_what_does_not_fit(tmp_path: Path, available: Any) -> None:
    from pysafetensors.staging import StagingConfig, load_to_device

    path = sparse_file(tmp_path / "big.safetensors", {"a": 48 * MiB})
    available(96 * MiB)
    small = StagingConfig(buffers=2, buffer_bytes=8 * MiB)
    # To the CPU the tensors themselves are host memory too: 48 + 16 MiB + margin > 96 MiB.
    with pytest.raises(InsufficientMemory, match="staging") as info:
        load_to_device(str(path), "cpu", config=small)
    assert info.value.requested == 64 * MiB
    available(256 * MiB)
    assert load_to_device(str(path), "cpu", config=small)["a"].numel() == 48 * MiB


# --- cgroups ----------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limit_counts_the_page_cache_as_reclaimable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cg"
    _write(root / "cgroup.controllers", "cpu memory\n")
    _write(root / "box" / "memory.max", "max\n")  # the parent: no limit
    _write(root / "box" / "memory.current", "1\n")
    _write(root / "box" / "job" / "memory.max", f"{1024 * MiB}\n")
    _write(root / "box" / "job" / "memory.current", f"{900 * MiB}\n")
    _write(root / "box" / "job" / "memory.stat", f"anon {600 * MiB}\nfile {300 * MiB}\nkernel 0\n")
    _write(tmp_path / "self_cgroup", "0::/box/job\n")
    monkeypatch.setattr(memory, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(memory, "PROC_CGROUP", str(tmp_path / "self_cgroup"))
    cgroups = [lim for lim in memory.limits() if lim.name.startswith("cgroup")]
    # 1024 - 900 in use, of which 300 is page cache the kernel takes back first: 424 MiB.
    assert cgroups == [memory.Limit(f"cgroup limit {root / 'box' / 'job' / 'memory.max'}", 424 * MiB, False)]
    with pytest.raises(InsufficientMemory, match="cgroup limit"):
        memory.check_allocation(400 * MiB, source="f", what="x", advice="y")
    memory.check_allocation(300 * MiB, source="f", what="x", advice="y")


def test_cgroup_v1_hierarchy_and_unlimited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cg"
    mem = root / "memory"
    _write(mem / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    _write(mem / "memory.usage_in_bytes", f"{5000 * MiB}\n")
    _write(mem / "api" / "memory.limit_in_bytes", f"{512 * MiB}\n")  # an ancestor's limit binds
    _write(mem / "api" / "memory.usage_in_bytes", f"{500 * MiB}\n")
    _write(mem / "api" / "memory.stat", f"cache 1\ntotal_inactive_file {100 * MiB}\ntotal_active_file {50 * MiB}\n")
    _write(mem / "api" / "p1" / "memory.limit_in_bytes", "9223372036854771712\n")
    _write(mem / "api" / "p1" / "memory.usage_in_bytes", "1\n")
    _write(tmp_path / "self_cgroup", "5:cpu:/\n4:memory:/api/p1\n0::/\n")
    monkeypatch.setattr(memory, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(memory, "PROC_CGROUP", str(tmp_path / "self_cgroup"))
    cgroups = [lim for lim in memory.limits() if lim.name.startswith("cgroup")]
    assert cgroups == [memory.Limit(f"cgroup limit {mem / 'api' / 'memory.limit_in_bytes'}", 162 * MiB, False)]


def test_cgroup_path_of_the_host_inside_a_container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a cgroup namespace /proc/self/cgroup names the host's path, which the container
    # does not see: its own cgroup is mounted at the root.
    root = tmp_path / "cg"
    _write(root / "cgroup.controllers", "memory\n")
    _write(root / "memory.max", f"{256 * MiB}\n")
    _write(root / "memory.current", f"{56 * MiB}\n")
    _write(root / "memory.stat", "file 0\n")
    _write(tmp_path / "self_cgroup", "0::/system.slice/docker-abc.scope\n")
    monkeypatch.setattr(memory, "CGROUP_ROOT", str(root))
    monkeypatch.setattr(memory, "PROC_CGROUP", str(tmp_path / "self_cgroup"))
    assert [lim.available for lim in memory.limits() if lim.name.startswith("cgroup")] == [200 * MiB]


# --- a real limit: RLIMIT_AS in a child process -----------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, resource, sys

    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) << 10

    from pysafetensors import safe_open
    from pysafetensors.numpy import load_file

    path, headroom = sys.argv[1], int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_AS, (status("VmSize") + headroom, resource.RLIM_INFINITY))
    out = {}
    for what in ("load_pread", "get_tensor_pread", "load_mmap"):
        peak = status("VmPeak")
        try:
            if what == "load_pread":
                load_file(path, backend="pread")
            elif what == "get_tensor_pread":
                with safe_open(path, "np", backend="pread") as f:
                    f.get_tensor("big")
            else:
                load_file(path, backend="mmap")
            result = "ok"
        except BaseException as e:
            result = [type(e).__name__, isinstance(e, MemoryError), str(e), getattr(e, "limit", None)]
        out[what] = {"result": result, "peak_growth": status("VmPeak") - peak}
    print(json.dumps(out))
    """
)


def _child(path: Path, headroom: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYSAFETENSORS_MEMORY_CHECK", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(headroom)], capture_output=True, text=True, timeout=120, env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_address_space_limit_refuses_before_allocating(tmp_path: Path) -> None:
    path = sparse_file(tmp_path / "big.safetensors", {"big": 512 * MiB})
    out = _child(path, 256 * MiB)  # ulimit -v: 256 MiB more than the child has mapped
    for what in ("load_pread", "get_tensor_pread"):
        name, is_memory_error, message, limit = out[what]["result"]
        assert (name, is_memory_error) == ("InsufficientMemory", True), out[what]
        assert limit.startswith("RLIMIT_AS") and str(512 * MiB) in message
        assert out[what]["peak_growth"] < 64 * MiB  # refused before the 512 MiB buffer existed
    # Mapping the file needs 512 MiB of address space too: a clear refusal, not a bare ENOMEM.
    name, is_memory_error, message, limit = out["load_mmap"]["result"]
    assert (name, is_memory_error, limit) == ("InsufficientMemory", True, out["load_pread"]["result"][3])
    assert "address space" in message and 'backend="pread"' in message


def test_address_space_limit_with_room_loads(tmp_path: Path) -> None:
    path = sparse_file(tmp_path / "big.safetensors", {"big": 64 * MiB})
    out = _child(path, 512 * MiB)
    assert {k: v["result"] for k, v in out.items()} == {"load_pread": "ok", "get_tensor_pread": "ok", "load_mmap": "ok"}
