"""mlx face: save, save_file, load, load_file (upstream-compatible), save_sharded.

Every dtype mlx has loads, float64 included (kept as float64, where upstream narrows it);
mlx copies on load (it owns its memory) and saving views the arrays without a copy.  The
caller's dict is left untouched.
"""

from __future__ import annotations

from . import numpy  # noqa: F401 - upstream's module has it
from ._adapters import mlx as _adapter
from ._face import Face, declare
from .handle import safe_open  # noqa: F401 - upstream's module has it

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]

save, save_file, save_sharded, load, load_file = declare(
    __name__, _adapter, framework="mlx", what="mlx arrays", face=Face
)
