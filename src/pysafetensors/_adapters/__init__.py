"""Framework adapters, one module each, imported only when a framework is asked for.

Every adapter module implements :class:`Adapter` (a module satisfies a Protocol through its
module-level names): ``safe_open`` and the faces call only these.  numpy and torch also provide
``format_dtype(value) -> DType | None`` for the dtype objects their writers accept.

``write_item_of`` and ``dtype_of_object`` pick the adapter for an object by the package its
type comes from, so the writer layer below never looks at framework types itself.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from ..errors import InvalidFramework
from ..format.dtypes import DType

if TYPE_CHECKING:
    from .._device import Device
    from ..reader import RawTensor, TensorFile
    from ..writer import WriteItem


@runtime_checkable
class Adapter(Protocol):
    """What a framework adapter module provides (one signature per function).

    ``NAME`` is the framework's name in messages.  ``check_device`` raises InvalidDevice for a
    device the framework cannot use (never for the CPU: ``safe_open`` relies on it); ``from_raw`` turns a RawTensor into the framework's
    tensor on ``device``; ``get_slice`` reads only the bytes ``index`` selects from tensor
    ``name`` of ``file``; ``to_write_item`` describes one of the framework's tensors for the
    writer (raising SerializeError/UnsupportedValue for what it cannot save).
    """

    NAME: str

    def check_device(self, device: Device, /) -> None: ...

    def from_raw(self, raw: RawTensor, device: Device, /) -> Any: ...

    def get_slice(self, file: TensorFile, name: str, index: Any, device: Device, /) -> Any: ...

    def to_write_item(self, name: str, obj: Any, /) -> WriteItem: ...


# safe_open framework name -> adapter module (case-sensitive, as upstream), each named after
# the framework's package, which it imports.
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


def adapter_name(framework: str) -> str:
    """The adapter module's name for a safe_open framework name (InvalidFramework for any other)."""
    module = FRAMEWORKS.get(framework) if isinstance(framework, str) else None
    if module is None:
        raise InvalidFramework(f"framework {framework} is invalid", framework=framework)
    return module


def load_adapter(framework: str) -> Adapter:
    """The adapter module for a safe_open framework name."""
    return cast(Adapter, importlib.import_module(f"{__name__}.{adapter_name(framework)}"))


def needed_at_open(framework: str) -> bool:
    """Whether ``safe_open`` imports ``framework``'s adapter as it opens (InvalidFramework for an
    unknown name): when the framework's package is not imported yet, so that a missing framework
    fails at open, as upstream's does.  Otherwise nothing the import does can fail, and the
    adapter is imported on first use (a handle opened for keys, metadata or slice shapes never
    needs it), or at open to check a device other than the CPU, which every adapter accepts.
    """
    return sys.modules.get(adapter_name(framework)) is None


# Top-level package of an object's type -> adapter module that can write it.
_OWNERS: dict[str, str] = {
    "numpy": "numpy",
    "torch": "torch",
    "jax": "jax",
    "jaxlib": "jax",
    "tensorflow": "tensorflow",
    "paddle": "paddle",
    "mlx": "mlx",
}
# ... and the packages whose dtype objects the writers accept.
_DTYPE_OWNERS: dict[str, str] = {"numpy": "numpy", "ml_dtypes": "numpy", "torch": "torch"}


def _owner(cls: type, owners: dict[str, str]) -> ModuleType | None:
    module = owners.get(str(getattr(cls, "__module__", "") or "").partition(".")[0])
    return None if module is None else importlib.import_module(f"{__name__}.{module}")


def write_item_of(name: str, obj: Any) -> WriteItem | None:
    """``obj`` as a WriteItem through the adapter of the framework it belongs to (dtype, file
    shape, bytes on demand); None when no framework owns it (bytes, memoryview, array.array...)."""
    adapter = _owner(type(obj), _OWNERS)
    return None if adapter is None else adapter.to_write_item(name, obj)


def dtype_of_object(value: Any) -> DType | None:
    """A numpy dtype / scalar type (ml_dtypes included) or a torch dtype as a format dtype;
    None for anything else."""
    adapter = _owner(value if isinstance(value, type) else type(value), _DTYPE_OWNERS)
    return None if adapter is None else adapter.format_dtype(value)


if TYPE_CHECKING:  # mypy checks that every adapter module has Adapter's signatures
    from . import jax, mlx, numpy, paddle, tensorflow, torch

    _ADAPTERS: tuple[Adapter, ...] = (jax, mlx, numpy, paddle, tensorflow, torch)
