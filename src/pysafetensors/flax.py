"""flax/jax face: save, save_file, load, load_file (upstream-compatible), save_sharded.

Arrays load onto the CPU device; every dtype XLA has loads (bfloat16, float8, float4 as
ml_dtypes types), without ``jax_enable_x64`` 64-bit types load as jax's 32-bit ones (as
upstream).  CPU arrays are saved without a copy and the caller's dict is left untouched.
"""

from __future__ import annotations

from . import numpy  # noqa: F401 - upstream's module has it
from ._adapters import jax as _adapter
from ._face import Face, declare
from .handle import safe_open  # noqa: F401 - upstream's module has it

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]

save, save_file, save_sharded, load, load_file = declare(
    __name__, _adapter, framework="flax", what="jax arrays", face=Face
)
