"""flax/jax face: save, save_file, load, load_file (upstream-compatible).

Arrays load onto the CPU device; every dtype XLA has loads (bfloat16, float8, float4 as
ml_dtypes types), without ``jax_enable_x64`` 64-bit types load as jax's 32-bit ones (as
upstream).  CPU arrays are saved without a copy and the caller's dict is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _face
from ._adapters import jax as _adapter

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]
_KIND = "jax.Array"


def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialize jax arrays to safetensors bytes."""
    return _face.save(_adapter, _KIND, tensors, metadata)


def save_file(
    tensors: Mapping[str, Any], filename: str | os.PathLike[str], metadata: Mapping[str, str] | None = None
) -> None:
    """Save jax arrays to ``filename`` atomically."""
    _face.save_file(_adapter, _KIND, tensors, filename, metadata)


save_sharded = _face.make_save_sharded(_adapter, _KIND, "jax arrays", __name__)


def load(data: bytes) -> dict[str, Any]:
    """Load jax arrays (on CPU) from safetensors bytes."""
    return _face.load(_adapter, data)


def load_file(filename: str | os.PathLike[str], *, backend: str | None = None) -> dict[str, Any]:
    """Load every tensor of a file as jax arrays (on CPU), in file order."""
    return _face.load_file("flax", filename, backend=backend)
