"""Shared fixtures."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# CI replays the same examples every run (HYPOTHESIS_PROFILE=ci in .ci/run), as it replays the
# same fuzz seeds, so a red CI always reproduces; a plain `make test` explores new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "explore"))


@pytest.fixture
def tmp_file(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(os.fspath(tmp_path), "t.safetensors")
