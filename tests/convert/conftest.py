"""Fixtures shared by the conversion tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def writer_calls(monkeypatch):
    """Records every open of the output (the real writer still runs): the writer preallocates
    the declared output size, so a refusal of a hostile size must come before it."""
    from pysafetensors.convert import api

    calls: list = []
    real = api.open_writer

    def spy(path, *args, **kwargs):
        calls.append(os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(api, "open_writer", spy)
    return calls
