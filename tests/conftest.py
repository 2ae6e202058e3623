"""Shared fixtures."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def tmp_file(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(os.fspath(tmp_path), "t.safetensors")
