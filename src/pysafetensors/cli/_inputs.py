"""The one place the CLI opens its inputs: :func:`pysafetensors.tools.checkpoint.open_checkpoint`
with the options the command line gave (``--timeout`` for http(s) URLs).

An input is a local file, an ``http(s)://`` or fsspec URL, a ``*.safetensors.index.json``
(local or URL), a local directory holding a checkpoint, or a pipe (``/dev/stdin``); the
commands see one logical checkpoint (:class:`Input`, the tools' Checkpoint).  The commands that
read GGUF too (inspect, id, diff, stats) open with ``gguf=True`` and hand what they get to the
tools, which take either kind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, overload

from ..io.registry import url_scheme
from ..tools.checkpoint import (
    Checkpoint,
    GGUFCheckpoint,
    RangedBytes,
    TensorBytes,
    is_sharded_path,
    open_checkpoint,
)

Input = Checkpoint

_TIMEOUT: ContextVar[float | None] = ContextVar("pysafetensors_cli_timeout", default=None)


@contextmanager
def command_options(timeout: float | None) -> Iterator[None]:
    """Options of one command-line run that every input it opens gets (set by cli/main.py)."""
    token = _TIMEOUT.set(timeout)
    try:
        yield
    finally:
        _TIMEOUT.reset(token)


def storage_options_for(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The storage options this run gives ``path``: ``timeout`` for an http(s) URL."""
    timeout = _TIMEOUT.get()
    if timeout is not None and url_scheme(os.fspath(path)) in ("http", "https"):
        return {"timeout": timeout}
    return {}


@overload
def open_input(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None, *,
               gguf: Literal[False] = False, gguf_layout: bool = True) -> Checkpoint: ...
@overload
def open_input(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None, *,
               gguf: bool, gguf_layout: bool = True) -> Checkpoint | GGUFCheckpoint: ...
def open_input(path: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None, *,
               gguf: bool = False, gguf_layout: bool = True) -> Checkpoint | GGUFCheckpoint:
    """Open a file, URL, index JSON, checkpoint directory or pipe as one :class:`Input`
    (with ``gguf``, a GGUF file as a GGUFCheckpoint; without, a GGUF file is refused;
    ``gguf_layout=False``: a GGUF's header alone, its data layout unchecked, for ``id``)."""
    options = {**storage_options_for(path), **(storage_options or {})}
    return open_checkpoint(path, options or None, gguf=gguf, gguf_layout=gguf_layout)


__all__ = ["GGUFCheckpoint", "Input", "RangedBytes", "TensorBytes", "command_options", "is_sharded_path", "open_input",
           "storage_options_for"]
