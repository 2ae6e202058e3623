"""Framework adapters, one module each, imported only when a framework is asked for.

Every adapter module implements :class:`Adapter` (a module satisfies a Protocol through its
module-level names): ``safe_open`` and the faces call only these.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from ..errors import InvalidFramework

if TYPE_CHECKING:
    from .._device import Device
    from ..reader import RawTensor, TensorFile
    from ..writer import WriteItem


@runtime_checkable
class Adapter(Protocol):
    """What a framework adapter module provides (one signature per function).

    ``NAME`` is the framework's name in messages.  ``check_device`` raises InvalidDevice for a
    device the framework cannot use; ``from_raw`` turns a RawTensor into the framework's
    tensor on ``device``; ``get_slice`` reads only the bytes ``index`` selects from tensor
    ``name`` of ``file``; ``to_write_item`` describes one of the framework's tensors for the
    writer (raising SerializeError/UnsupportedValue for what it cannot save).
    """

    NAME: str

    def check_device(self, device: Device, /) -> None: ...

    def from_raw(self, raw: RawTensor, device: Device, /) -> Any: ...

    def get_slice(self, file: TensorFile, name: str, index: Any, device: Device, /) -> Any: ...

    def to_write_item(self, name: str, obj: Any, /) -> WriteItem: ...


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


def load_adapter(framework: str) -> Adapter:
    """The adapter module for a safe_open framework name."""
    module = FRAMEWORKS.get(framework) if isinstance(framework, str) else None
    if module is None:
        raise InvalidFramework(f"framework {framework} is invalid", framework=framework)
    return cast(Adapter, importlib.import_module(f"{__name__}.{module}"))


if TYPE_CHECKING:  # mypy checks that every adapter module has Adapter's signatures
    from . import jax, mlx, numpy, paddle, tensorflow, torch

    _ADAPTERS: tuple[Adapter, ...] = (jax, mlx, numpy, paddle, tensorflow, torch)
