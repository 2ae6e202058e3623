"""Sharded saves to a URL prefix (moto's S3 on loopback and memory://): read back as one checkpoint,
overwritten and failing all or nothing; the uploads killed writers leave are cleared."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
import torch
from s3_servers import Store

from pysafetensors import safe_open
from pysafetensors.format.dtypes import by_code
from pysafetensors.io.remote_prefix import pending_uploads, remove_stale_uploads
from pysafetensors.numpy import save_sharded as np_save_sharded
from pysafetensors.writer import WriteItem

pytestmark = pytest.mark.usefixtures("small_parts")


def _torch_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


@pytest.fixture
def fixed_checkpoint_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """The random checkpoint id made the same, so two sharded saves can be compared byte for byte."""
    real = secrets.token_hex
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: "c0ffee" * 5 + "00" if n == 16 else real(n))


def _listing(directory: str) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.usefixtures("fixed_checkpoint_id")
def test_save_sharded_to_a_url_prefix_reads_as_one_checkpoint(
    store: Store, arrays: dict[str, np.ndarray], tmp_path: Any
) -> None:
    local = os.path.join(os.fspath(tmp_path), "sharded")
    np_save_sharded(arrays, local, max_shard_size=4 << 20, metadata={"run": "7"})
    returned = np_save_sharded(arrays, store.url("ck/"), max_shard_size=4 << 20, metadata={"run": "7"},
                               storage_options=store.options)
    assert returned == store.url("ck/model.safetensors.index.json")
    assert store.listing() == [f"ck/{n}" for n in _listing(local)]
    for name in _listing(local):
        assert store.get(f"ck/{name}") == Path(local, name).read_bytes(), name
    for url in (store.url("ck/"), store.url("ck"), store.url("ck/model.safetensors.index.json")):
        with safe_open(url, "np", storage_options=store.options) as f:
            assert f.keys() == sorted(arrays) and f.metadata()["run"] == "7"
            for name, value in arrays.items():
                np.testing.assert_array_equal(f.get_tensor(name), value)
    assert store.pending() == []


def test_torch_save_sharded_to_a_url(store: Store, arrays: dict[str, np.ndarray]) -> None:
    from pysafetensors.torch import load_file as pt_load_file
    from pysafetensors.torch import save_sharded

    tensors = _torch_tensors(arrays)
    save_sharded(tensors, store.url("pt"), max_shard_size="3MB", storage_options=store.options)
    with safe_open(store.url("pt/"), "pt", storage_options=store.options) as f:
        assert all(torch.equal(f.get_tensor(k), v) for k, v in tensors.items())
    if store.kind == "memory":
        assert torch.equal(pt_load_file(store.url("pt/"))["ids"], tensors["ids"])


def test_overwriting_a_sharded_checkpoint_on_a_store(store: Store, arrays: dict[str, np.ndarray]) -> None:
    """Same shard names (staged, then copied in), another count (stale shards removed), one file."""
    def saved(limit: int | str) -> list[str]:
        np_save_sharded(arrays, store.url("ck"), max_shard_size=limit, storage_options=store.options)
        with safe_open(store.url("ck/"), "np", storage_options=store.options) as f:
            assert all(np.array_equal(f.get_tensor(k), v) for k, v in arrays.items())
        assert store.pending() == []
        return [k.split("/", 1)[1] for k in store.listing("ck/")]

    two = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"]
    assert saved(4 << 20) == two
    first = store.get("ck/model.safetensors.index.json")
    assert saved(4 << 20) == two  # every name taken: staged under a hidden prefix, then moved in
    assert store.get("ck/model.safetensors.index.json") != first  # a new checkpoint id
    assert saved(1000) == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)] + ["model.safetensors.index.json"]
    assert saved("1GB") == ["model.safetensors"]


def test_a_failing_sharded_save_leaves_the_prefix_as_it_was(store: Store, arrays: dict[str, np.ndarray]) -> None:
    from pysafetensors.sharded import write_sharded

    def items(fail: bool) -> list[WriteItem]:
        def late() -> Any:
            if fail:
                raise RuntimeError("second shard broke")
            return memoryview(arrays["ids"])

        return [WriteItem("a", by_code("F32"), (1536, 1024), lambda: memoryview(arrays["big"])),
                WriteItem("b", by_code("I64"), (1000,), late)]

    with pytest.raises(RuntimeError):  # fresh prefix: the first shard written is removed again
        write_sharded(items(True), store.url("ck"), max_shard_size=4 << 20, storage_options=store.options)
    assert store.listing() == [] and store.pending() == []
    write_sharded(items(False), store.url("ck"), max_shard_size=4 << 20, storage_options=store.options)
    before = {k: store.get(k) for k in store.listing()}
    with pytest.raises(RuntimeError):  # over an existing checkpoint: staged files dropped, old one intact
        write_sharded(items(True), store.url("ck"), max_shard_size=4 << 20, storage_options=store.options)
    assert {k: store.get(k) for k in store.listing()} == before and store.pending() == []
    with safe_open(store.url("ck/"), "np", storage_options=store.options) as f:
        assert f.get_tensor("b").tolist() == list(range(1000))


def test_remove_stale_uploads_clears_orphans_and_keeps_live_saves(store: Store) -> None:
    from pysafetensors.io.sinks import staging_name, temp_name

    fs = fsspec.filesystem("memory") if store.kind == "memory" else None
    orphan_tmp, orphan_stage = temp_name("m.safetensors"), staging_name("model")
    if store.s3 is not None:
        client = store.s3.client()
        client.put_object(Bucket=store.bucket, Key=f"ck/{orphan_tmp}", Body=b"x")
        client.put_object(Bucket=store.bucket, Key=f"ck/{orphan_stage}/model-00001-of-00002.safetensors", Body=b"x")
        client.create_multipart_upload(Bucket=store.bucket, Key="ck/model-00002-of-00002.safetensors")
        client.put_object(Bucket=store.bucket, Key="ck/keep.safetensors", Body=b"x")
    else:
        assert fs is not None
        fs.pipe(f"/{store.bucket}/ck/{orphan_tmp}", b"x")
        fs.pipe(f"/{store.bucket}/ck/{orphan_stage}/model-00001-of-00002.safetensors", b"x")
        fs.pipe(f"/{store.bucket}/ck/keep.safetensors", b"x")
    first = remove_stale_uploads(store.url("ck"), storage_options=store.options)
    # The objects were just made: younger than the default day, so kept.  moto dates every
    # multipart upload in 2010, so on S3 the pending upload is already old enough to abort.
    assert len(store.listing("ck/")) == 3
    if store.kind == "s3":
        assert len(first) == 1 and first[0].startswith("multipart upload ") and store.pending() == []
    else:
        assert first == []
    removed = remove_stale_uploads(store.url("ck/"), older_than=0, storage_options=store.options)
    assert sorted(removed) == sorted([store.url(f"ck/{orphan_tmp}"), store.url(f"ck/{orphan_stage}")])
    assert store.listing("ck/") == ["ck/keep.safetensors"]
    assert pending_uploads(store.url("ck"), store.options) == [] and store.pending() == []


def test_metadata_edit_refuses_a_sharded_url_prefix(store: Store, arrays: dict[str, np.ndarray]) -> None:
    from pysafetensors.errors import InvalidMetadata
    from pysafetensors.tools.metadata import edit_metadata

    np_save_sharded(arrays, store.url("ck"), max_shard_size=4 << 20, storage_options=store.options)
    before = store.listing()
    with pytest.raises(InvalidMetadata, match="shard by shard"):
        edit_metadata(store.url("ck/"), "set", {"k": "v"}, output=store.url("out.safetensors"),
                      storage_options=store.options, output_storage_options=store.options)
    assert store.listing() == before
