"""Fixtures of the remote tests: a checkpoint to serve over HTTP (``tensors``, ``blob``); for the tests
that write to URLs, moto's S3 on loopback, a store to write to (each test once on S3, once on
memory://) and the writer's parts shrunk to S3's smallest."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from s3_servers import MIN_PART, MotoS3, Store

from pysafetensors.io import remote_sinks
from pysafetensors.numpy import save


@pytest.fixture(scope="module")
def tensors() -> dict[str, np.ndarray]:
    """A checkpoint bigger than the first ranged read (PREFETCH), so reading it takes several."""
    rng = np.random.default_rng(1)
    return {"big": rng.standard_normal((512, 256)).astype(np.float32), "small": np.arange(6, dtype=np.int16)}


@pytest.fixture(scope="module")
def blob(tensors: dict[str, np.ndarray]) -> bytes:
    return save(tensors)


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3]:
    with MotoS3() as server:
        yield server


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parts of S3's smallest size (5 MiB), so that a few MiB of tensors make a multipart upload."""
    monkeypatch.setattr(remote_sinks, "PART_SIZE", MIN_PART)


@pytest.fixture(params=["s3", "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from Store.for_param(request)


@pytest.fixture(scope="module")
def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "big": rng.standard_normal((1536, 1024)).astype(np.float32),  # 6 MiB: more than one part
        "ids": np.arange(1000, dtype=np.int64),
        "h16": rng.standard_normal((7, 9)).astype(np.float16),
    }
