"""A failed S3 save whose abort fails too (security round 3, item 7): the upload stays pending,
its parts billed, and the error must say so: the upload id and the command that removes it.
moto's S3 on loopback behind a proxy that refuses a part (or the completion) and every
AbortMultipartUpload; the test then runs the command's request itself and the upload is gone."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from s3_servers import MotoS3, RefusingProxy, query

from pysafetensors.errors import UploadNotAborted, WriteError
from pysafetensors.io.remote_sinks import RemoteFileSink
from pysafetensors.numpy import save_file

pytestmark = pytest.mark.usefixtures("small_parts")
SRC = Path(__file__).resolve().parent.parent.parent / "src"
COMMAND = re.compile(r"`aws s3api abort-multipart-upload --bucket (\S+) --key (\S+) --upload-id (\S+)`")


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    return {"w": np.random.default_rng(5).standard_normal(4 * 1024 * 1024).astype(np.float32)}  # 16 MiB: 4 parts


def _aborts(method: str, path: str) -> bool:
    return method == "DELETE" and "uploadId" in query(path)


RULES = {
    "the second part": lambda m, p: _aborts(m, p) or (m == "PUT" and query(p).get("partNumber") == "2"),
    "the completion": lambda m, p: _aborts(m, p) or (m == "POST" and "uploadId" in query(p)),
}


def _left_behind(s3: MotoS3, bucket: str, message: str) -> dict[str, Any]:
    """The one pending upload, checked against what the message says, then removed the way it says."""
    pending = s3.uploads(bucket)
    assert len(pending) == 1, pending
    upload = pending[0]
    m = COMMAND.search(message)
    assert m is not None, message
    b, k, u = (shlex.split(g)[0] for g in m.groups())
    assert (b, k, u) == (bucket, upload["Key"], upload["UploadId"]), (m.groups(), upload)
    assert f"the multipart upload {u} of s3://{bucket}/{k} could not be aborted" in message
    s3.client().abort_multipart_upload(Bucket=b, Key=k, UploadId=u)  # what the printed command does
    assert s3.uploads(bucket) == []
    return upload


@pytest.mark.parametrize("what", sorted(RULES))
def test_the_error_names_the_upload_left_behind(s3: MotoS3, tensors: dict[str, np.ndarray], what: str) -> None:
    bucket = s3.new_bucket()
    with RefusingProxy(f"127.0.0.1:{s3.port}", RULES[what]) as proxy:
        with pytest.raises(UploadNotAborted) as info:
            save_file(tensors, f"s3://{bucket}/dir/m.safetensors", storage_options=s3.options(proxy.endpoint))
        assert any(r.startswith("DELETE") for r in proxy.refused), proxy.refused
    e = info.value
    assert isinstance(e, WriteError) and "refused by the test proxy" in str(e)  # the save's own failure first
    assert str(e).index("refused by the test proxy") < str(e).index("could not be aborted")
    upload = _left_behind(s3, bucket, str(e))
    assert (e.bucket, e.key, e.upload_id) == (bucket, "dir/m.safetensors", upload["UploadId"])  # type: ignore[attr-defined]
    assert s3.keys(bucket) == []  # and no object: nothing was published


def test_an_abort_for_another_reason_leaves_a_note_and_a_warning(s3: MotoS3) -> None:
    """A save abandoned by an error of the caller's (or Ctrl-C) keeps that error; it gains a note
    (Python 3.11+) and a warning naming the upload; an explicit abort() raises UploadNotAborted."""
    bucket = s3.new_bucket()
    part = np.zeros(6 << 20, np.uint8)  # more than one part: the upload has begun
    with RefusingProxy(f"127.0.0.1:{s3.port}", _aborts) as proxy:
        options = s3.options(proxy.endpoint)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(ValueError, match="the caller's own") as info, \
                    RemoteFileSink(f"s3://{bucket}/a.safetensors", storage_options=options) as sink:
                sink.write([part])
                raise ValueError("the caller's own error")
        said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(said) == 1 and "could not be aborted" in said[0], said
        if sys.version_info >= (3, 11):
            assert any("could not be aborted" in n for n in info.value.__notes__)
        _left_behind(s3, bucket, said[0])

        sink = RemoteFileSink(f"s3://{bucket}/b.safetensors", storage_options=options)
        sink.write([part])
        with pytest.raises(UploadNotAborted) as explicit:
            sink.abort()
        _left_behind(s3, bucket, str(explicit.value))


def test_the_cli_prints_the_upload_and_the_command(s3: MotoS3, tmp_path: Path) -> None:
    bucket = s3.new_bucket()
    src = tmp_path / "m.npz"
    np.savez(src, w=np.random.default_rng(2).standard_normal(3 << 20).astype(np.float32))  # 12 MiB
    rule = RULES["the second part"]
    with RefusingProxy(f"127.0.0.1:{s3.port}", rule) as proxy:
        env = {**os.environ, **s3.environment(), "AWS_ENDPOINT_URL": proxy.endpoint, "PYTHONPATH": str(SRC)}
        # The subprocess's parts are the default 8 MiB: 12 MiB makes two, the second refused.
        r = subprocess.run([sys.executable, "-m", "pysafetensors", "convert", str(src), f"s3://{bucket}/m.safetensors"],
                           capture_output=True, text=True, env=env, check=False, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "refused by the test proxy" in r.stderr and "could not be aborted" in r.stderr
    _left_behind(s3, bucket, r.stderr)
