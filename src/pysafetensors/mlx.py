"""mlx face: save, save_file, load, load_file (upstream-compatible).

Every dtype mlx has loads, float64 included (kept as float64, where upstream narrows it);
mlx copies on load (it owns its memory) and saving views the arrays without a copy.  The
caller's dict is left untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import _face
from ._adapters import mlx as _adapter

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]
_KIND = "mx.array"


def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialize mlx arrays to safetensors bytes."""
    return _face.save(_adapter, _KIND, tensors, metadata)


def save_file(
    tensors: Mapping[str, Any], filename: str | os.PathLike[str], metadata: Mapping[str, str] | None = None
) -> None:
    """Save mlx arrays to ``filename`` atomically."""
    _face.save_file(_adapter, _KIND, tensors, filename, metadata)


save_sharded = _face.make_save_sharded(_adapter, _KIND, "mlx arrays", __name__)


def load(data: bytes) -> dict[str, Any]:
    """Load mlx arrays from safetensors bytes."""
    return _face.load(_adapter, data)


def load_file(filename: str | os.PathLike[str], *, backend: str | None = None) -> dict[str, Any]:
    """Load every tensor of a file as mlx arrays, in file order."""
    return _face.load_file("mlx", filename, backend=backend)
