"""Saving to URLs: every writer to moto's S3 (on loopback) and to memory://, byte-identical to
a local save, streamed, all or nothing; sharded saves to a URL prefix read back as one checkpoint.

Parts are 5 MiB here (S3's smallest) so that a few MiB of tensors make a multipart upload.
"""

from __future__ import annotations

import os
import secrets
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import fsspec
import numpy as np
import pytest
import torch
from s3_servers import MotoS3

from pysafetensors import open_writer, safe_open, serialize_file
from pysafetensors.errors import IncompleteWrite, UnwritableTarget, WriteError
from pysafetensors.format.dtypes import by_code
from pysafetensors.io import remote_sinks
from pysafetensors.io.remote_prefix import pending_uploads, remove_stale_uploads
from pysafetensors.numpy import load_file
from pysafetensors.numpy import save_file as np_save_file
from pysafetensors.numpy import save_sharded as np_save_sharded
from pysafetensors.writer import WriteItem, write_file

PART = 5 << 20


@pytest.fixture(autouse=True)
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_sinks, "PART_SIZE", PART)


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3]:
    with MotoS3() as server:
        yield server


class Store:
    """One place to write to (a fresh S3 bucket or memory:// directory) and to look into."""

    def __init__(self, kind: str, s3: MotoS3 | None) -> None:
        self.kind = kind
        self.s3 = s3
        if kind == "s3":
            assert s3 is not None
            self.bucket = s3.new_bucket()
            self.root = f"s3://{self.bucket}"
            self.options: dict[str, Any] | None = s3.options()
        else:
            self.bucket = f"pst-{uuid.uuid4().hex[:12]}"
            self.root = f"memory://{self.bucket}"
            self.options = None

    def url(self, key: str) -> str:
        return f"{self.root}/{key}"

    def listing(self, prefix: str = "") -> list[str]:
        """Every file under the store's root (recursively), as keys relative to it."""
        if self.s3 is not None:
            return self.s3.keys(self.bucket, prefix)
        fs = fsspec.filesystem("memory")
        found = fs.find(f"/{self.bucket}/{prefix}") if fs.exists(f"/{self.bucket}") else []
        return sorted(str(p).split(f"/{self.bucket}/", 1)[1] for p in found)

    def get(self, key: str) -> bytes:
        if self.s3 is not None:
            return self.s3.get(self.bucket, key)
        return bytes(fsspec.filesystem("memory").cat_file(f"/{self.bucket}/{key}"))

    def pending(self) -> list[dict[str, Any]]:
        return self.s3.uploads(self.bucket) if self.s3 is not None else []

    def cleanup(self) -> None:
        if self.kind == "memory":
            fs = fsspec.filesystem("memory")
            if fs.exists(f"/{self.bucket}"):
                fs.rm(f"/{self.bucket}", recursive=True)


@pytest.fixture(params=["s3", "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    s3 = request.getfixturevalue("s3") if request.param == "s3" else None
    st = Store(request.param, s3)
    yield st
    st.cleanup()


@pytest.fixture(scope="module")
def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "big": rng.standard_normal((1536, 1024)).astype(np.float32),  # 6 MiB: more than one part
        "ids": np.arange(1000, dtype=np.int64),
        "h16": rng.standard_normal((7, 9)).astype(np.float16),
    }


def _local(tmp_path: Any, name: str) -> str:
    return os.path.join(os.fspath(tmp_path), name)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


# --- every writer: byte-identical to a local save ----------------------------------------------


def _flax_save_file() -> Callable[..., None]:
    import pysafetensors.flax

    return pysafetensors.flax.save_file


def _mlx_save_file() -> Callable[..., None]:
    import pysafetensors.mlx

    return pysafetensors.mlx.save_file


def _torch_tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def _writers(arrays: dict[str, np.ndarray]) -> dict[str, Callable[[str, Any], None]]:
    """name -> save(target, storage_options) writing the same tensors each time."""
    import jax.numpy as jnp
    import mlx.core as mx

    from pysafetensors import torch as pt

    meta = {"format": "pt", "note": "remote"}

    def incremental(target: str, options: Any) -> None:
        specs = {k: (v.dtype, v.shape) for k, v in arrays.items()}
        with open_writer(target, specs, meta, storage_options=options) as w:
            for name in sorted(arrays, reverse=True):  # any order: the incremental writer stages locally
                w.write(name, arrays[name])

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.big = torch.nn.Parameter(torch.from_numpy(arrays["big"]))
            self.register_buffer("ids", torch.from_numpy(arrays["ids"]))
            self.register_buffer("h16", torch.from_numpy(arrays["h16"]))

    model = Model()
    return {
        "serialize_file": lambda t, o: serialize_file(dict(arrays), t, meta, storage_options=o),
        "numpy.save_file": lambda t, o: np_save_file(arrays, t, meta, storage_options=o),
        "torch.save_file": lambda t, o: pt.save_file(_torch_tensors(arrays), t, meta, storage_options=o),
        "torch.save_model": lambda t, o: pt.save_model(model, t, meta, storage_options=o),
        "flax.save_file": lambda t, o: _flax_save_file()({k: jnp.asarray(v) for k, v in arrays.items()}, t, meta,
                                                         storage_options=o),
        "mlx.save_file": lambda t, o: _mlx_save_file()({k: mx.array(v) for k, v in arrays.items()}, t, meta,
                                                       storage_options=o),
        "open_writer": incremental,
    }


WRITERS = ["serialize_file", "numpy.save_file", "torch.save_file", "torch.save_model", "flax.save_file",
           "mlx.save_file", "open_writer"]


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_round_trips_byte_identical_to_a_local_save(
    writer: str, store: Store, arrays: dict[str, np.ndarray], tmp_path: Any
) -> None:
    save = _writers(arrays)[writer]
    local = _local(tmp_path, "local.safetensors")
    save(local, None)
    save(store.url("dir/model.safetensors"), store.options)
    assert store.get("dir/model.safetensors") == _read(local)
    assert store.listing() == ["dir/model.safetensors"]  # no temp object left beside it
    assert store.pending() == []
    with safe_open(store.url("dir/model.safetensors"), "np", storage_options=store.options) as f:
        assert f.keys() == sorted(arrays)
        for name, value in arrays.items():
            np.testing.assert_array_equal(f.get_tensor(name), value)


def test_s3_save_is_a_multipart_upload_streamed_while_writing(s3: MotoS3, arrays: dict[str, np.ndarray]) -> None:
    """Parts reach the store while later tensors are still to come: the file is never held whole."""
    bucket = s3.new_bucket()
    seen: list[int] = []

    def later() -> memoryview:
        uploads = s3.uploads(bucket)
        assert len(uploads) == 1 and uploads[0]["Key"] == "m.safetensors"
        deadline = time.monotonic() + 60  # parts upload in the background: wait for them to land
        while sum(p["Size"] for p in s3.parts(bucket, uploads[0])) < 3 * PART and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(sum(p["Size"] for p in s3.parts(bucket, uploads[0])))
        assert s3.keys(bucket) == []  # nothing visible before the commit
        return memoryview(np.arange(1000, dtype=np.float32))

    # Both F32, so the layout (dtype rank, then name) writes "a" first.
    items = [WriteItem("a", by_code("F32"), (4 * 1024 * 1024,), lambda: np.ones(4 * 1024 * 1024, np.float32)),
             WriteItem("b", by_code("F32"), (1000,), later)]
    write_file(items, f"s3://{bucket}/m.safetensors", storage_options=s3.options())
    assert seen == [3 * PART]  # 16 MiB written: three whole parts were on the server before the rest existed
    assert s3.uploads(bucket) == [] and s3.keys(bucket) == ["m.safetensors"]
    with safe_open(f"s3://{bucket}/m.safetensors", "np", storage_options=s3.options()) as f:
        assert f.get_tensor("b").tolist() == list(range(1000))


def test_tensors_made_on_demand_are_alive_one_at_a_time(store: Store) -> None:
    """The save's memory is one tensor plus the upload's buffers: the tensor written before is
    released before the next one is made (tensors of 16 MiB, written one per batch)."""
    n = 4 * 1024 * 1024
    alive: list[weakref.ref[np.ndarray]] = []

    def make(i: int) -> Callable[[], np.ndarray]:
        def get_bytes() -> np.ndarray:
            assert [r for r in alive if r() is not None] == [], f"tensor {i}: an earlier tensor is still held"
            a = np.full(n, i, np.float32)
            alive.append(weakref.ref(a))
            return a

        return get_bytes

    write_file([WriteItem(f"t{i}", by_code("F32"), (n,), make(i)) for i in range(3)], store.url("lazy.safetensors"),
               storage_options=store.options)
    with safe_open(store.url("lazy.safetensors"), "np", storage_options=store.options) as f:
        assert [float(f.get_slice(f"t{i}")[n - 1]) for i in range(3)] == [0.0, 1.0, 2.0]


def test_small_s3_save_is_one_put_and_empty_files_work(s3: MotoS3, tmp_path: Any) -> None:
    bucket = s3.new_bucket()
    for name, tensors in {"small": {"x": np.arange(3, dtype=np.int32)}, "empty": {}}.items():
        np_save_file(tensors, f"s3://{bucket}/{name}.safetensors", storage_options=s3.options(), durable=True)
        np_save_file(tensors, _local(tmp_path, f"{name}.safetensors"))
        assert s3.get(bucket, f"{name}.safetensors") == _read(_local(tmp_path, f"{name}.safetensors"))
    assert s3.uploads(bucket) == []


def test_part_size_grows_to_stay_under_the_part_limit() -> None:
    from pysafetensors.io.remote_sinks import MAX_PARTS, part_size

    assert part_size(None) == part_size(10) == remote_sinks.PART_SIZE
    for total in (10**9, 200 * 10**9, 5 * 2**40):
        size = part_size(total)
        assert size % (1 << 20) == 0 and size >= remote_sinks.PART_SIZE
        assert -(-total // size) < MAX_PARTS


# --- all or nothing ---------------------------------------------------------------------------


def _failing_items(arrays: dict[str, np.ndarray], error: BaseException) -> list[WriteItem]:
    """A first tensor large enough to start a multipart upload, then one whose buffer raises."""

    def boom() -> Any:
        raise error

    return [WriteItem("a", by_code("F32"), (4 * 1024 * 1024,), lambda: np.zeros(4 * 1024 * 1024, np.float32)),
            WriteItem("b", by_code("F32"), (10,), boom)]


@pytest.mark.parametrize("error", [RuntimeError("buffer exploded"), KeyboardInterrupt()])
def test_a_save_failing_half_way_leaves_no_object_and_no_upload(
    store: Store, arrays: dict[str, np.ndarray], error: BaseException
) -> None:
    with pytest.raises(type(error)):
        write_file(_failing_items(arrays, error), store.url("m.safetensors"), storage_options=store.options)
    assert store.listing() == []
    assert store.pending() == []


def test_an_existing_object_is_replaced_only_on_success(store: Store, arrays: dict[str, np.ndarray]) -> None:
    url = store.url("m.safetensors")
    np_save_file({"old": np.arange(5)}, url, storage_options=store.options)
    before = store.get("m.safetensors")
    with pytest.raises(RuntimeError):
        write_file(_failing_items(arrays, RuntimeError("no")), url, storage_options=store.options)
    assert store.get("m.safetensors") == before and store.listing() == ["m.safetensors"]
    np_save_file(arrays, url, storage_options=store.options)
    with safe_open(url, "np", storage_options=store.options) as f:
        assert f.keys() == sorted(arrays)


def test_incremental_writer_to_a_url_is_all_or_nothing(store: Store) -> None:
    url = store.url("inc.safetensors")
    specs: dict[str, Any] = {"a": ("F32", (2,)), "b": ("F32", (2,))}
    with pytest.raises(IncompleteWrite), open_writer(url, specs, storage_options=store.options) as w:
        w.write("a", np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="stop"), open_writer(url, {"a": ("F32", (2,))}, storage_options=store.options) as w:
        w.write("a", np.zeros(2, np.float32))
        raise ValueError("stop")
    assert store.listing() == [] and store.pending() == []


# --- sharded ---------------------------------------------------------------------------------


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
    local = _local(tmp_path, "sharded")
    np_save_sharded(arrays, local, max_shard_size=4 << 20, metadata={"run": "7"})
    returned = np_save_sharded(arrays, store.url("ck/"), max_shard_size=4 << 20, metadata={"run": "7"},
                               storage_options=store.options)
    assert returned == store.url("ck/model.safetensors.index.json")
    assert store.listing() == [f"ck/{n}" for n in _listing(local)]
    for name in _listing(local):
        assert store.get(f"ck/{name}") == _read(os.path.join(local, name)), name
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


# --- targets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["https://example.invalid/m.safetensors", "http://127.0.0.1:9/m.safetensors"])
def test_http_targets_are_not_writable(url: str, arrays: dict[str, np.ndarray]) -> None:
    from pysafetensors.torch import save_sharded

    for save in (lambda: np_save_file(arrays, url), lambda: serialize_file(dict(arrays), url),
                 lambda: open_writer(url, {"a": ("F32", (1,))}),
                 lambda: save_sharded(_torch_tensors(arrays), url.rsplit("/", 1)[0] + "/ck/")):
        with pytest.raises(UnwritableTarget, match="read-only"):
            save()


def test_a_local_path_with_a_colon_is_a_path(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    t = {"x": np.arange(4, dtype=np.float32)}
    for name in ("a:b.safetensors", "memory:x.safetensors", "s3:bucket.safetensors"):
        np_save_file(t, name)
        assert os.path.isfile(os.path.join(tmp_path, name))
        np.testing.assert_array_equal(load_file(name)["x"], t["x"])
    np_save_file(t, f"file://{tmp_path}/via-url.safetensors")
    assert os.path.isfile(os.path.join(tmp_path, "via-url.safetensors"))


def test_a_url_naming_a_directory_is_refused(store: Store) -> None:
    np_save_file({"x": np.ones(2)}, store.url("d/inner.safetensors"), storage_options=store.options)
    for target in (store.url("d"), store.url("d/")):
        with pytest.raises(WriteError, match="directory"):
            np_save_file({"x": np.ones(2)}, target, storage_options=store.options)
    assert store.listing() == ["d/inner.safetensors"]


def test_durable_save_to_a_url_is_confirmed_by_the_store(store: Store, arrays: dict[str, np.ndarray]) -> None:
    np_save_file(arrays, store.url("d.safetensors"), durable=True, storage_options=store.options)
    with safe_open(store.url("d.safetensors"), "np", storage_options=store.options) as f:
        np.testing.assert_array_equal(f.get_tensor("big"), arrays["big"])


# --- what killed writers leave ----------------------------------------------------------------


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
