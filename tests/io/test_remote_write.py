"""Saving to URLs: every writer to moto's S3 (on loopback) and to memory://, byte-identical to
a local save, streamed, all or nothing; targets that are not writable.  (Sharded saves to a URL
prefix: test_remote_write_sharded.py.)

Parts are 5 MiB here (S3's smallest) so that a few MiB of tensors make a multipart upload.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _helpers import require
from s3_servers import MIN_PART as PART
from s3_servers import MotoS3, Store

from pysafetensors import open_writer, safe_open, serialize_file
from pysafetensors.errors import IncompleteWrite, UnwritableTarget, WriteError
from pysafetensors.format.dtypes import by_code
from pysafetensors.io import remote_sinks
from pysafetensors.numpy import load_file
from pysafetensors.numpy import save_file as np_save_file
from pysafetensors.writer import WriteItem, write_file

pytestmark = pytest.mark.usefixtures("small_parts")


def _local(tmp_path: Any, name: str) -> str:
    return os.path.join(os.fspath(tmp_path), name)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


# --- every writer: byte-identical to a local save ----------------------------------------------


def _torch_tensors(arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    torch = require("torch")
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def _torch_model(arrays: dict[str, np.ndarray]) -> Any:
    torch = require("torch")

    class Model(torch.nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.big = torch.nn.Parameter(torch.from_numpy(arrays["big"]))
            self.register_buffer("ids", torch.from_numpy(arrays["ids"]))
            self.register_buffer("h16", torch.from_numpy(arrays["h16"]))

    return Model()


def _writer(name: str, arrays: dict[str, np.ndarray]) -> Callable[[str, Any], None]:
    """save(target, storage_options) writing the same tensors each time, with the writer ``name``;
    a writer whose framework is not installed skips its own test (with the install hint)."""
    meta = {"format": "pt", "note": "remote"}

    def incremental(target: str, options: Any) -> None:
        specs = {k: (v.dtype, v.shape) for k, v in arrays.items()}
        with open_writer(target, specs, meta, storage_options=options) as w:
            for key in sorted(arrays, reverse=True):  # any order: the incremental writer stages locally
                w.write(key, arrays[key])

    if name == "serialize_file":
        return lambda t, o: serialize_file(dict(arrays), t, meta, storage_options=o)
    if name == "numpy.save_file":
        return lambda t, o: np_save_file(arrays, t, meta, storage_options=o)
    if name == "open_writer":
        return incremental
    if name == "torch.save_file":
        tensors = _torch_tensors(arrays)
        save_file = require("pysafetensors.torch").save_file
        return lambda t, o: save_file(tensors, t, meta, storage_options=o)
    if name == "torch.save_model":
        model = _torch_model(arrays)
        save_model = require("pysafetensors.torch").save_model
        return lambda t, o: save_model(model, t, meta, storage_options=o)
    if name == "flax.save_file":
        jnp = require("jax.numpy", "jax")
        flax_save = require("pysafetensors.flax").save_file
        jax_arrays = {k: jnp.asarray(v) for k, v in arrays.items()}
        return lambda t, o: flax_save(jax_arrays, t, meta, storage_options=o)
    assert name == "mlx.save_file"
    mx = require("mlx.core", "mlx")
    mlx_save = require("pysafetensors.mlx").save_file
    mlx_arrays = {k: mx.array(v) for k, v in arrays.items()}
    return lambda t, o: mlx_save(mlx_arrays, t, meta, storage_options=o)


WRITERS = ["serialize_file", "numpy.save_file", "torch.save_file", "torch.save_model", "flax.save_file",
           "mlx.save_file", "open_writer"]


@pytest.mark.parametrize("writer", WRITERS)
def test_every_writer_round_trips_byte_identical_to_a_local_save(
    writer: str, store: Store, arrays: dict[str, np.ndarray], tmp_path: Any
) -> None:
    save = _writer(writer, arrays)
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
