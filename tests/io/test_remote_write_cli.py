"""The CLI's outputs as store URLs: ``shard`` into an ``s3://`` prefix, ``merge`` from and to
``s3://``, ``convert`` and ``metadata … --output`` to ``s3://`` (moto's S3 on loopback; each
command a real ``python -m pysafetensors`` subprocess, pointed at it by the environment as a
user's AWS settings would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from s3_servers import MotoS3

from pysafetensors import safe_open
from pysafetensors.numpy import save_file

SRC = Path(__file__).resolve().parent.parent.parent / "src"


def cli(s3: MotoS3, *args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **s3.environment(), "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "pysafetensors", *map(str, args)], capture_output=True, text=True,
                          env=env, check=False, timeout=300)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(11)
    tensors = {f"layer.{i}.weight": rng.standard_normal((256, 1024)).astype(np.float32) for i in range(4)}
    tensors["ids"] = np.arange(100, dtype=np.int64)
    path = tmp_path_factory.mktemp("src") / "model.safetensors"
    save_file(tensors, path, metadata={"format": "np"})
    return path


@pytest.mark.slow
def test_shard_into_s3_then_merge_back_from_it(s3: MotoS3, source: Path, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    prefix = f"s3://{bucket}/sharded/"
    r = cli(s3, "shard", source, prefix, "--max-shard-size", "2MB", "--json")
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["outdir"] == prefix and shown["index"] == f"{prefix}model.safetensors.index.json"
    names = [s["name"] for s in shown["shards"]]
    assert len(names) == 4  # 1 MiB tensors, 2 MB (decimal) shards: one tensor each (ids joins the first)
    assert s3.keys(bucket) == sorted(f"sharded/{n}" for n in [*names, "model.safetensors.index.json"])
    assert s3.uploads(bucket) == []

    again = cli(s3, "shard", source, prefix, "--max-shard-size", "2MB")
    assert again.returncode == 2 and "already holds" in again.stderr and "--force" in again.stderr
    assert cli(s3, "shard", source, prefix, "--max-shard-size", "2MB", "--force").returncode == 0

    local = tmp_path / "merged.safetensors"
    r = cli(s3, "merge", f"{prefix}model.safetensors.index.json", local)
    assert r.returncode == 0, r.stderr
    assert local.read_bytes() == source.read_bytes()  # shard then merge gives the same file back

    r = cli(s3, "merge", prefix, f"s3://{bucket}/merged/model.safetensors", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["output"] == f"s3://{bucket}/merged/model.safetensors"
    assert s3.get(bucket, "merged/model.safetensors") == source.read_bytes()
    assert s3.uploads(bucket) == []

    own = cli(s3, "merge", prefix, f"{prefix}{names[0]}")
    assert own.returncode == 2 and "input" in own.stderr
    assert s3.get(bucket, f"sharded/{names[0]}")[:8] != b""  # the shard is untouched


@pytest.mark.slow
def test_convert_and_metadata_output_to_s3(s3: MotoS3, source: Path, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    checkpoint = tmp_path / "model.pt"
    torch.save({"w": torch.arange(12, dtype=torch.float32).reshape(3, 4), "b": torch.ones(4)}, checkpoint)
    local = tmp_path / "converted.safetensors"
    assert cli(s3, "convert", checkpoint, local).returncode == 0
    r = cli(s3, "convert", checkpoint, f"s3://{bucket}/converted.safetensors", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verified"] is True  # read back from the store and compared
    assert s3.get(bucket, "converted.safetensors") == local.read_bytes()

    edited = tmp_path / "edited.safetensors"
    assert cli(s3, "metadata", source, "set", "owner=me", "--output", edited).returncode == 0
    r = cli(s3, "metadata", source, "set", "owner=me", "--output", f"s3://{bucket}/edited.safetensors")
    assert r.returncode == 0, r.stderr
    assert s3.get(bucket, "edited.safetensors") == edited.read_bytes()
    with safe_open(f"s3://{bucket}/edited.safetensors", "np", storage_options=s3.options()) as f:
        assert f.metadata() == {"format": "np", "owner": "me"}
    assert s3.uploads(bucket) == []


def test_http_output_is_refused_with_a_clear_message(s3: MotoS3, source: Path) -> None:
    r = cli(s3, "merge", source, "https://example.invalid/out.safetensors")
    assert r.returncode == 2
    assert "read-only" in r.stderr and "https://example.invalid/out.safetensors" in r.stderr
