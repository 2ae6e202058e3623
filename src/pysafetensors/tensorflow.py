"""tensorflow face: save, save_file, load, load_file (upstream-compatible).

Tensors load on the CPU; every dtype tensorflow has loads (bfloat16, float8, float4 included);
aligned buffers of DLPack types are shared with the file rather than copied.  CPU tensors and
variables are saved without a copy and the caller's dict is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _face
from ._adapters import tensorflow as _adapter

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]
_KIND = "tf.Tensor"


def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialize tf.Tensors to safetensors bytes."""
    return _face.save(_adapter, _KIND, tensors, metadata)


def save_file(
    tensors: Mapping[str, Any], filename: str | os.PathLike[str], metadata: Mapping[str, str] | None = None
) -> None:
    """Save tf.Tensors to ``filename`` atomically."""
    _face.save_file(_adapter, _KIND, tensors, filename, metadata)


save_sharded = _face.make_save_sharded(_adapter, _KIND, "tf.Tensors", __name__)


def load(data: bytes) -> dict[str, Any]:
    """Load tf.Tensors (on CPU) from safetensors bytes."""
    return _face.load(_adapter, data)


def load_file(filename: str | os.PathLike[str], *, backend: str | None = None) -> dict[str, Any]:
    """Load every tensor of a file as tf.Tensors (on CPU), in file order."""
    return _face.load_file("tf", filename, backend=backend)
