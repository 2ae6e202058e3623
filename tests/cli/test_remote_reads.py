"""What crosses the network for a URL input: each byte once, and few requests.

``id --content --tensors`` hashes everything in one pass; ``stats``, ``diff --values``, ``id``,
``shard`` and ``merge`` read runs of small tensors with one request instead of one request per
tensor.
Counted on a loopback HTTP server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors import safe_open
from pysafetensors.numpy import save_file, save_sharded
from pysafetensors.tools import _chunks

from .conftest import run_cli

SMALL = 3000  # tensors of 1 KiB: ~3 MB after the 100 kB the first request prefetches


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    out = {f"layer.{i:04d}.bias": rng.standard_normal(256).astype(np.float32) for i in range(SMALL)}
    out["big.weight"] = rng.standard_normal((1024, 1024)).astype(np.float32)  # 4 MiB
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("remote_reads")
    single = root / "model.safetensors"
    save_file(_tensors(), str(single))
    sharded = root / "sharded"
    save_sharded(_tensors(), sharded, max_shard_size="2MB")
    return {"single": single, "sharded": sharded}


@pytest.fixture(scope="module")
def server(files: dict[str, Path]) -> Iterator[RangeServer]:
    served = {"model.safetensors": files["single"].read_bytes()}
    served.update({f"sharded/{p.name}": p.read_bytes() for p in files["sharded"].iterdir()})
    with RangeServer(served) as s:
        yield s


def _json(*args: object) -> dict:
    r = run_cli(*args, "--json")
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


@pytest.mark.parametrize("kind", ["single", "sharded"])
def test_id_content_and_tensors_in_one_pass(kind: str, files: dict[str, Path], server: RangeServer) -> None:
    # Every byte of every file once, not once per hash: for a sharded URL, the index and each
    # shard (the shards' headers are read once, for the tensor list and for the content hash).
    local_path = files[kind]
    paths = [local_path] if kind == "single" else sorted(local_path.iterdir())
    size = sum(p.stat().st_size for p in paths)
    url = server.url("model.safetensors" if kind == "single" else "sharded/model.safetensors.index.json")
    server.reset_log()
    remote = _json("id", url, "--content", "--tensors")
    assert server.log.bytes_sent <= size * 1.01
    assert server.log.requests <= 8 * len(paths)  # per file: its header, then its data in 16 MiB requests
    local = _json("id", local_path, "--content", "--tensors")
    assert {**remote, "path": None} == {**local, "path": None}
    assert remote["content_sha256"] and remote["tensors"]
    if kind == "single":
        import hashlib

        raw = local_path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        assert local["content_sha256"] == "0x" + hashlib.sha256(raw[8 + n :]).hexdigest()


@pytest.mark.parametrize("command", [("stats",), ("diff", "{url}", "--values"), ("id", "--tensors")],
                         ids=lambda c: c[0])
def test_small_tensors_share_requests(command: tuple[str, ...], files: dict[str, Path], server: RangeServer,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    url = server.url("model.safetensors")
    size = files["single"].stat().st_size
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 17)  # 1 MiB read ahead: several windows
    name, *rest = command
    args = [name, url, *[a.format(url=url) for a in rest]]
    server.reset_log()
    result = _json(*args)
    copies = 2 if name == "diff" else 1
    assert server.log.requests <= 40 * copies, server.log.requests  # not one per tensor (3000)
    assert server.log.bytes_sent <= copies * size * 1.02
    if name == "stats":
        assert len(result["tensors"]) == SMALL + 1
    if name == "diff":
        assert result["same"] and len(result["values"]) == SMALL + 1


def test_sharded_url_reads_ahead_shard_by_shard(files: dict[str, Path], server: RangeServer,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 17)
    url = server.url("sharded/model.safetensors.index.json")
    server.reset_log()
    remote = _json("stats", url)
    total = sum(p.stat().st_size for p in files["sharded"].iterdir())
    assert server.log.requests <= 60 and server.log.bytes_sent <= total * 1.02
    local = {t["name"]: t for t in _json("stats", files["single"])["tensors"]}
    assert {t["name"]: t for t in remote["tensors"]} == local


@pytest.mark.parametrize("source", ["model.safetensors", "sharded/model.safetensors.index.json"],
                         ids=["file", "index"])
@pytest.mark.parametrize("command", ["shard", "merge"])
def test_shard_and_merge_read_ahead(command: str, source: str, files: dict[str, Path], server: RangeServer,
                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """shard and merge write whole tensors: runs of small ones come from one request each."""
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 17)  # 1 MiB read ahead: several windows
    out = tmp_path / ("shards" if command == "shard" else "merged.safetensors")
    args = [command, server.url(source), out] + (["--max-shard-size", "1MB"] if command == "shard" else [])
    served = (files["single"].stat().st_size if source == "model.safetensors"
              else sum(p.stat().st_size for p in files["sharded"].iterdir()))
    server.reset_log()
    assert run_cli(*args).code == 0
    assert server.log.requests <= 60, server.log.requests  # not one per tensor (3000)
    assert server.log.bytes_sent <= served * 1.02
    expected = _tensors()
    with safe_open(out / "model.safetensors.index.json" if command == "shard" else out, "np") as f:
        assert set(f.keys()) == set(expected)
        for name in expected:
            np.testing.assert_array_equal(f.get_tensor(name), expected[name])
