"""The one place optional dependencies are imported."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import MissingDependency


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise MissingDependency naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependency(module, extra) from e


def optional(module: str) -> ModuleType | None:
    """Import ``module`` if it is installed, else None: for accelerators the library works without."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
