"""tensorflow face: save, save_file, load, load_file (upstream-compatible), save_sharded.

Tensors load on the CPU; every dtype tensorflow has loads (bfloat16, float8, float4 included);
aligned buffers of DLPack types are shared with the file rather than copied.  CPU tensors and
variables are saved without a copy and the caller's dict is left untouched.
"""

from __future__ import annotations

from . import numpy  # noqa: F401 - upstream's module has it
from ._adapters import tensorflow as _adapter
from ._face import Face, declare
from .handle import safe_open  # noqa: F401 - upstream's module has it

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]

save, save_file, save_sharded, load, load_file = declare(
    __name__, _adapter, framework="tf", what="tf.Tensors", face=Face
)
