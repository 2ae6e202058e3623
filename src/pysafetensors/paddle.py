"""paddle face: save, save_file, load, load_file (upstream-compatible), save_sharded.

``load`` and ``load_file`` take a device (``cpu``, ``cuda``/``cuda:N`` = paddle ``gpu:N``,
``xpu:N``, ``npu:N``...); one paddle or the machine lacks is an InvalidDevice error.  CPU
tensors share the file's copy-on-write map through DLPack where the buffer allows it.
Non-contiguous tensors are saved in logical order (upstream refuses them); the caller's dict
is left untouched.
"""

from __future__ import annotations

from . import numpy  # noqa: F401 - upstream's module has it
from ._adapters import paddle as _adapter
from ._api import TensorSpec, deserialize, serialize, serialize_file  # noqa: F401 - upstream's module has them
from ._face import OnDeviceFace, declare
from .handle import safe_open  # noqa: F401 - upstream's module has it

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]

save, save_file, save_sharded, load, load_file = declare(
    __name__, _adapter, framework="paddle", what="paddle tensors", face=OnDeviceFace
)
