"""Saves to S3 that break: the server refusing a part or the completion, and a writer killed
with SIGKILL in the middle of a multipart upload (moto's S3 on loopback, a real subprocess).

What must hold: no object appears (an existing one is left as it was); every upload the
writer could abort is aborted.  A killed writer cannot abort its own upload: its parts stay
listed as a pending multipart upload until ``remove_stale_uploads`` (or an S3 lifecycle rule)
aborts it, which the SIGKILL test does and checks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
import pytest
from s3_servers import MIN_PART as PART
from s3_servers import MotoS3, RefusingProxy, query

from pysafetensors.errors import WriteError
from pysafetensors.io.remote_prefix import pending_uploads, remove_stale_uploads
from pysafetensors.numpy import save, save_file, save_sharded

pytestmark = pytest.mark.usefixtures("small_parts")
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return {"w": np.random.default_rng(3).standard_normal(4 * 1024 * 1024).astype(np.float32)}  # 16 MiB: 3+ parts


def _refusing(s3: MotoS3, rule: Any) -> RefusingProxy:
    return RefusingProxy(f"127.0.0.1:{s3.port}", rule)


@pytest.mark.parametrize(
    "what, rule",
    [
        ("the second part", lambda method, path: method == "PUT" and query(path).get("partNumber") == "2"),
        ("the completion", lambda method, path: method == "POST" and "uploadId" in query(path)),
    ],
)
def test_a_refusal_leaves_no_object_and_no_pending_upload(
    s3: MotoS3, tensors: dict[str, np.ndarray], what: str, rule: Any
) -> None:
    bucket = s3.new_bucket()
    with _refusing(s3, rule) as proxy:
        with pytest.raises(WriteError, match=rf"s3://{bucket}/m\.safetensors.*refused by the test proxy"):
            save_file(tensors, f"s3://{bucket}/m.safetensors", storage_options=s3.options(proxy.endpoint))
        assert len(proxy.refused) == 1, what
    assert s3.keys(bucket) == []
    assert s3.uploads(bucket) == []  # aborted (through the proxy, which let the abort pass)


def test_a_refused_part_leaves_the_existing_object_as_it_was(s3: MotoS3, tensors: dict[str, np.ndarray]) -> None:
    bucket = s3.new_bucket()
    old = {"old": np.arange(10, dtype=np.int64)}
    save_file(old, f"s3://{bucket}/m.safetensors", storage_options=s3.options())
    def refuse_third_part(method: str, path: str) -> bool:
        return method == "PUT" and query(path).get("partNumber") == "3"

    with _refusing(s3, refuse_third_part) as proxy, pytest.raises(WriteError):
        save_file(tensors, f"s3://{bucket}/m.safetensors", storage_options=s3.options(proxy.endpoint))
    assert s3.get(bucket, "m.safetensors") == save(old)
    assert s3.uploads(bucket) == []


def test_a_refusal_in_a_sharded_save_leaves_nothing(s3: MotoS3, tensors: dict[str, np.ndarray]) -> None:
    bucket = s3.new_bucket()
    two = {"a": tensors["w"], "b": tensors["w"][: 2 * 1024 * 1024].copy()}
    def refuse_second_shard(method: str, path: str) -> bool:
        return method == "PUT" and "00002-of-00002" in path and query(path).get("partNumber") == "2"

    with _refusing(s3, refuse_second_shard) as proxy:
        with pytest.raises(WriteError):
            save_sharded(two, f"s3://{bucket}/ck/", max_shard_size="10MB", storage_options=s3.options(proxy.endpoint))
        assert len(proxy.refused) == 1
    assert s3.keys(bucket) == [] and s3.uploads(bucket) == []


_KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import pysafetensors.io.remote_sinks as remote_sinks
    from pysafetensors.format.dtypes import by_code
    from pysafetensors.writer import WriteItem, write_file

    remote_sinks.PART_SIZE = 5 << 20
    endpoint, url = sys.argv[1], sys.argv[2]
    opts = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}

    def stall():
        print("uploading", flush=True)  # 16 MiB written: three parts sent; the parent kills us here
        time.sleep(120)
        raise SystemExit("not killed")

    n = 4 * 1024 * 1024
    items = [WriteItem("a", by_code("F32"), (n,), lambda: np.ones(n, np.float32)),
             WriteItem("b", by_code("F32"), (16,), stall)]
    write_file(items, url, storage_options=opts)
    """
)


def test_a_writer_killed_mid_upload_never_shows_an_object(s3: MotoS3, tmp_path: Any) -> None:
    """SIGKILL cannot be caught: the object never appears, the parts stay as a pending upload
    (listed) until remove_stale_uploads aborts it."""
    bucket = s3.new_bucket()
    url = f"s3://{bucket}/ck/m.safetensors"
    script = os.path.join(os.fspath(tmp_path), "writer.py")
    with open(script, "w", encoding="utf-8") as fh:
        fh.write(_KILLED_WRITER)
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen([sys.executable, script, s3.endpoint, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "uploading", proc.stderr.read() if proc.stderr else ""
        uploads = s3.uploads(bucket)
        assert [u["Key"] for u in uploads] == ["ck/m.safetensors"]
        deadline = time.monotonic() + 60  # the parts upload in the writer's background: let them land
        while sum(p["Size"] for p in s3.parts(bucket, uploads[0])) < 3 * PART and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sum(p["Size"] for p in s3.parts(bucket, uploads[0])) == 3 * PART
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    time.sleep(0.2)
    assert s3.keys(bucket) == []  # no torn object, ever
    left = pending_uploads(f"s3://{bucket}/ck/", s3.options())
    assert [u["UploadId"] for u in left] == [u["UploadId"] for u in uploads]  # honest: the parts remain
    removed = remove_stale_uploads(f"s3://{bucket}/ck/", older_than=0, storage_options=s3.options())
    assert removed == [f"multipart upload {uploads[0]['UploadId']} of {url}"]
    assert s3.uploads(bucket) == [] and s3.keys(bucket) == []


@pytest.mark.parametrize("durable", [False, True])
def test_durable_save_asks_the_store_for_the_object_after_the_commit(
    s3: MotoS3, tensors: dict[str, np.ndarray], durable: bool
) -> None:
    bucket = s3.new_bucket()
    with RefusingProxy(f"127.0.0.1:{s3.port}", lambda method, path: False) as proxy:
        save_file(tensors, f"s3://{bucket}/m.safetensors", durable=durable, storage_options=s3.options(proxy.endpoint))
    key = f"/{bucket}/m.safetensors"
    completed = [i for i, r in enumerate(proxy.seen) if r.startswith(f"POST {key}?") and "uploadId" in query(r)]
    assert len(completed) == 1
    after = [r for r in proxy.seen[completed[0] + 1 :] if r.split("?")[0] in (f"HEAD {key}", f"GET {key}")]
    assert bool(after) == durable  # durable: the object is looked up once the commit is acknowledged
    assert s3.get(bucket, "m.safetensors") == save(tensors)


def test_durable_save_fails_when_the_store_reports_another_size(s3: MotoS3, tensors: dict[str, np.ndarray]) -> None:
    bucket = s3.new_bucket()
    lying = RefusingProxy(f"127.0.0.1:{s3.port}", lambda method, path: False, head_length="0")
    with lying, pytest.raises(WriteError, match="store reports 0 bytes after the commit, 16777296 were written"):
        save_file(tensors, f"s3://{bucket}/m.safetensors", durable=True, storage_options=s3.options(lying.endpoint))
