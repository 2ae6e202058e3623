"""Every command on an http:// URL, a memory:// URL, an index URL and a sharded directory.

Results must equal the local-file results; chunked commands (stats, diff --values) must read
remote tensors through byte ranges, moving each byte about once.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors.numpy import load_file, save_sharded
from pysafetensors.tools import _chunks

from .conftest import SAMPLE_METADATA, run_cli, sample_tensors

PATH_KEYS = ("path", "a", "b", "source")


def tensors() -> dict[str, np.ndarray]:
    # The sample's every-dtype tensors plus one of 512 KiB, so the file is larger than the
    # 100 kB the first request prefetches and the tensor bytes really travel by ranges.
    out = sample_tensors()
    out["big.weight"] = np.random.default_rng(1).standard_normal((512, 256)).astype(np.float32)
    return out


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from pysafetensors.numpy import save_file

    root = tmp_path_factory.mktemp("remote_inputs")
    single = root / "model.safetensors"
    save_file(tensors(), str(single), metadata=dict(SAMPLE_METADATA))
    sharded = root / "sharded"
    save_sharded(tensors(), sharded, max_shard_size="200KB", metadata=dict(SAMPLE_METADATA))
    return {"single": single, "sharded": sharded}


@pytest.fixture(scope="module")
def server(local: dict[str, Path]) -> Iterator[RangeServer]:
    files = {"model.safetensors": local["single"].read_bytes()}
    for p in local["sharded"].iterdir():
        files[f"sharded/{p.name}"] = p.read_bytes()
    with RangeServer(files) as s:
        yield s


@pytest.fixture(scope="module")
def memory_url(local: dict[str, Path]) -> Iterator[str]:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-cli/model.safetensors", local["single"].read_bytes())
    yield "memory://pst-cli/model.safetensors"
    fs.rm("/pst-cli", recursive=True)


def cli_json(*args: object) -> tuple[int, dict[str, Any]]:
    r = run_cli(*args, "--json")
    assert r.err == "" or r.code != 0, r.err
    data = json.loads(r.out)
    for key in PATH_KEYS:
        data.pop(key, None)
    return r.code, data


COMMANDS = [
    ("inspect", "--tensors"),
    ("id", "--content", "--tensors"),
    ("validate",),
    ("stats",),
    ("metadata", "get"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_http_and_memory_match_local(
    command: tuple[str, ...], local: dict[str, Path], server: RangeServer, memory_url: str
) -> None:
    name, *rest = command
    expected = cli_json(name, local["single"], *rest)
    assert expected[0] == 0
    assert cli_json(name, server.url("model.safetensors"), *rest) == expected
    assert cli_json(name, memory_url, *rest) == expected


@pytest.mark.parametrize("command", [c for c in COMMANDS if c[0] in ("id", "stats")], ids=lambda c: c[0])
def test_sharded_directory_and_index_url_match_local(
    command: tuple[str, ...], local: dict[str, Path], server: RangeServer
) -> None:
    # The same tensors, so the same statistics and per-tensor hashes as the single file; the
    # structural ID hashes the checkpoint's metadata, which for a sharded checkpoint is the
    # index's (the single file's plus total_size). id --content hashes the shards' data
    # regions: left out. Stats come shard by shard (file order), so they are compared per tensor.
    name, *rest = command
    rest = [a for a in rest if a != "--content"]
    expected = cli_json(name, local["single"], *rest)
    assert len(list(local["sharded"].glob("*.safetensors"))) >= 2
    if name == "id":
        from pysafetensors.tools.identity import PREFIX, structural_id

        header = json.loads(local["single"].read_bytes()[8 : 8 + int.from_bytes(local["single"].read_bytes()[:8], "little")])
        specs = [(k, v["dtype"], v["shape"], v["data_offsets"][1] - v["data_offsets"][0])
                 for k, v in header.items() if k != "__metadata__"]
        from pysafetensors.format.index import CHECKPOINT_ID_KEY

        index_meta = json.loads((local["sharded"] / "model.safetensors.index.json").read_text())["metadata"]
        assert CHECKPOINT_ID_KEY in index_meta  # bookkeeping of the save, left out of what readers show
        index_meta.pop(CHECKPOINT_ID_KEY)
        digest = structural_id({k: str(v) for k, v in index_meta.items()}, specs)
        assert set(index_meta) == {*SAMPLE_METADATA, "total_size"}
        expected[1].update(id=PREFIX + digest[:8], structure_sha256=digest)
    for where in (local["sharded"], server.url("sharded/model.safetensors.index.json")):
        got = cli_json(name, where, *rest)
        assert got[0] == 0
        assert same_stats(got[1], expected[1]) if name == "stats" else got == expected


def test_sharded_inspect_and_validate_over_http(local: dict[str, Path], server: RangeServer) -> None:
    url = server.url("sharded/model.safetensors.index.json")
    code, remote = cli_json("inspect", url, "--tensors")
    assert code == 0
    assert cli_json("inspect", local["sharded"], "--tensors") == (0, remote)
    single = cli_json("inspect", local["single"])[1]
    assert remote["parameter_count"] == single["parameter_count"]
    assert remote["files"] == sorted(p.name for p in local["sharded"].glob("*.safetensors"))
    code, valid = cli_json("validate", url)
    assert code == 0 and valid["valid"] and valid["files"] == remote["files"]
    assert cli_json("validate", local["sharded"]) == (0, valid)


def test_diff_values_across_kinds_of_input(local: dict[str, Path], server: RangeServer, memory_url: str) -> None:
    for other in (server.url("model.safetensors"), memory_url):
        code, r = cli_json("diff", local["single"], other, "--values")
        assert code == 0 and r["same"], other
        assert len(r["values"]) == len(tensors())
    # A sharded checkpoint's metadata is its index's: the same as the file's plus total_size,
    # which diff reports; every tensor and value is the same.
    total = str(json.loads((local["sharded"] / "model.safetensors.index.json").read_text())["metadata"]["total_size"])
    assert total == str(local["single"].stat().st_size - 8 - int.from_bytes(local["single"].read_bytes()[:8], "little"))
    for other in (local["sharded"], server.url("sharded/model.safetensors.index.json")):
        code, r = cli_json("diff", local["single"], other, "--values")
        assert code == 1 and r["metadata_added"] == {"total_size": total}, other
        assert not (r["metadata_removed"] or r["metadata_changed"] or r["tensors_added"] or r["tensors_removed"])
        assert len(r["values"]) == len(tensors()) and not any(v["differing"] for v in r["values"])


def same_stats(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal per tensor (any order); mean and std up to rounding (chunked sums differ in the last bits)."""
    ta = {t["name"]: t for t in a["tensors"]}
    tb = {t["name"]: t for t in b["tensors"]}
    assert ta.keys() == tb.keys()
    for name, x in ta.items():
        y = tb[name]
        for k in x:
            if k in ("mean", "std") and isinstance(x[k], float):
                assert x[k] == pytest.approx(y[k], rel=1e-9, abs=1e-12), (name, k)
            else:
                assert x[k] == y[k], (name, k)
    return True


def _range_lengths(ranges: list[str | None]) -> list[int]:
    out = []
    for r in ranges:
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", r or "")
        assert m, r
        out.append(int(m.group(2)) - int(m.group(1)) + 1)
    return out


def test_stats_over_http_reads_chunks_by_range_once(
    local: dict[str, Path], server: RangeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    size = local["single"].stat().st_size
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 16 * 1024)  # 64 KiB of float32 per chunk
    server.reset_log()
    code, remote = cli_json("stats", server.url("model.safetensors"))
    assert code == 0
    lengths = _range_lengths(server.log.ranges)
    # The first request prefetches 100 kB (the header and the small tensors); then the big
    # tensor arrives chunk by chunk: no request asks for the whole 512 KiB at once.
    assert max(lengths[1:]) <= 64 * 1024 < tensors()["big.weight"].nbytes
    assert len(lengths) >= tensors()["big.weight"].nbytes // (64 * 1024)
    assert size <= server.log.bytes_sent <= size * 1.02
    monkeypatch.undo()
    assert same_stats(remote, cli_json("stats", local["single"])[1])


def test_diff_values_over_http_transfers_each_file_once(local: dict[str, Path], server: RangeServer) -> None:
    size = local["single"].stat().st_size
    url = server.url("model.safetensors")
    server.reset_log()
    assert run_cli("diff", url, url, "--values").code == 0
    assert 2 * size <= server.log.bytes_sent <= 2 * size * 1.02


def test_metadata_on_a_url(local: dict[str, Path], server: RangeServer, tmp_path: Path) -> None:
    url = server.url("model.safetensors")
    r = run_cli("metadata", url, "set", "k=v")
    assert r.code == 2 and "--output" in r.err
    out = tmp_path / "edited.safetensors"
    assert run_cli("metadata", url, "set", "k=v", "--output", out).code == 0
    assert run_cli("metadata", out, "get", "k").out == "v\n"
    original = load_file(str(local["single"]))
    assert {k: v.tobytes() for k, v in load_file(str(out)).items()} == {k: v.tobytes() for k, v in original.items()}


def test_shard_from_url_merge_from_index_url(local: dict[str, Path], server: RangeServer, tmp_path: Path) -> None:
    out = tmp_path / "s"
    assert run_cli("shard", server.url("model.safetensors"), out, "--max-shard-size", "200KB").code == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in local["sharded"].iterdir())
    merged = tmp_path / "merged.safetensors"
    assert run_cli("merge", server.url("sharded/model.safetensors.index.json"), merged).code == 0
    assert merged.read_bytes() == local["single"].read_bytes()


def test_convert_from_a_url_replaces_an_existing_output(tmp_path: Path) -> None:
    """An existing local output is checked against the input only when the input is local
    (asking the filesystem whether a URL is the output file failed with 'No such file')."""
    import io

    buf = io.BytesIO()
    np.save(buf, np.arange(5, dtype=np.float32))
    out = tmp_path / "out.safetensors"
    out.write_bytes(b"old")
    with RangeServer({"n.npy": buf.getvalue()}) as server:
        r = run_cli("convert", server.url("n.npy"), out)
    assert r.code == 0, r.err
    np.testing.assert_array_equal(load_file(str(out))["tensor"], np.arange(5, dtype=np.float32))


def test_missing_url_is_one_line_exit_2(server: RangeServer) -> None:
    r = run_cli("inspect", server.url("nope.safetensors"))
    assert r.code == 2 and r.err.count("\n") == 1 and "No such file" in r.err


def test_unreachable_ftp_url_is_one_line_naming_the_redacted_url() -> None:
    # The library's RemoteError carries the URL without its password; the CLI prints that line
    # alone (no raw errno, no traceback, the password nowhere), exit 2.
    pytest.importorskip("fsspec")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed once the block ends: nothing listens there
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    p = subprocess.run([sys.executable, "-m", "pysafetensors", "inspect",
                        f"ftp://user:hunter2@127.0.0.1:{port}/x.safetensors"],
                       capture_output=True, text=True, env=env, timeout=60, check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and "hunter2" not in p.stderr
    assert p.stderr.startswith(f"pysafetensors: error: ftp://127.0.0.1:{port}/x.safetensors: ")
    assert "Connection refused" in p.stderr


def test_subprocess_on_a_url(local: dict[str, Path], server: RangeServer) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    p = subprocess.run([sys.executable, "-m", "pysafetensors", "id", server.url("model.safetensors"), "--json"],
                       capture_output=True, text=True, env=env, timeout=60, check=False)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["id"] == cli_json("id", local["single"])[1]["id"]


def test_validate_broken_file_and_missing_shard_over_http(local: dict[str, Path], tmp_path: Path) -> None:
    truncated = local["single"].read_bytes()[:-10]
    (tmp_path / "t.safetensors").write_bytes(truncated)
    files = {"t.safetensors": truncated}
    for p in local["sharded"].iterdir():
        if not p.name.startswith("model-00002"):  # the index lists a shard the server lacks
            files[f"sharded/{p.name}"] = p.read_bytes()
    with RangeServer(files) as server:
        code, remote = cli_json("validate", server.url("t.safetensors"))
        assert code == 1 and not remote["valid"]
        assert cli_json("validate", tmp_path / "t.safetensors") == (1, remote)
        code, sharded = cli_json("validate", server.url("sharded/model.safetensors.index.json"))
        assert code == 1
        assert [(p["code"], p["file"]) for p in sharded["problems"]] == [
            ("missing_shard", "model-00002-of-00002.safetensors")]
