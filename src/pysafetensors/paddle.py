"""paddle face: save, save_file, load, load_file (upstream-compatible).

``load`` and ``load_file`` take a device (``cpu``, ``cuda``/``cuda:N`` = paddle ``gpu:N``,
``xpu:N``, ``npu:N``...); one paddle or the machine lacks is an InvalidDevice error.  CPU
tensors share the file's copy-on-write map through DLPack where the buffer allows it.
Non-contiguous tensors are saved in logical order (upstream refuses them); the caller's dict
is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _face
from ._adapters import paddle as _adapter

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]
_KIND = "paddle.Tensor"


def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialize paddle tensors to safetensors bytes."""
    return _face.save(_adapter, _KIND, tensors, metadata)


def save_file(
    tensors: Mapping[str, Any], filename: str | os.PathLike[str], metadata: Mapping[str, str] | None = None
) -> None:
    """Save paddle tensors to ``filename`` atomically."""
    _face.save_file(_adapter, _KIND, tensors, filename, metadata)


save_sharded = _face.make_save_sharded(_adapter, _KIND, "paddle tensors", __name__)


def load(data: bytes, device: Any = "cpu") -> dict[str, Any]:
    """Load paddle tensors from safetensors bytes onto ``device``."""
    return _face.load(_adapter, data, device)


def load_file(filename: str | os.PathLike[str], device: Any = "cpu", *, backend: str | None = None) -> dict[str, Any]:
    """Load every tensor of a file as paddle tensors on ``device``, in file order."""
    return _face.load_file("paddle", filename, device, backend)
