"""Framework adapters, one module each, imported only when a framework is asked for.

An adapter module provides:
  NAME                               framework name used in messages
  check_device(device) -> None       raise InvalidDevice for devices it cannot use
  from_raw(raw, device) -> tensor    a RawTensor as the framework's tensor
  get_slice(file, name, index, device) -> tensor
  to_write_item(name, obj) -> WriteItem
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..errors import InvalidFramework

# safe_open framework name -> adapter module (case-sensitive, as upstream).
FRAMEWORKS: dict[str, str] = {
    "pt": "torch",
    "torch": "torch",
    "pytorch": "torch",
    "np": "numpy",
    "numpy": "numpy",
    "jax": "jax",
    "flax": "jax",
    "tf": "tensorflow",
    "tensorflow": "tensorflow",
    "paddle": "paddle",
    "mlx": "mlx",
}


def load_adapter(framework: str) -> ModuleType:
    """The adapter module for a safe_open framework name."""
    module = FRAMEWORKS.get(framework) if isinstance(framework, str) else None
    if module is None:
        raise InvalidFramework(f"framework {framework} is invalid", framework=framework)
    return importlib.import_module(f"{__name__}.{module}")
