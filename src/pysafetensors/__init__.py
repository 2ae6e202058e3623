"""pysafetensors: a pure-Python implementation of the safetensors format.

``import pysafetensors as safetensors`` is a drop-in for the upstream package's API, and
``pysafetensors.install_as_safetensors()`` makes ``import safetensors`` itself give this
package, for libraries that import it.  Importing this package imports no framework.

The public names are loaded on first use (PEP 562 module ``__getattr__``): ``import
pysafetensors`` alone costs almost nothing, so ``pysafetensors --version`` and ``--help`` start
without importing numpy or the format core; ``from pysafetensors import safe_open``,
``pysafetensors.safe_open`` and ``dir(pysafetensors)`` work as for eagerly imported names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_attributes
from ._version import __version__

if TYPE_CHECKING:  # the names as type checkers and IDEs see them (the same objects, imported eagerly)
    from ._alias import install_as_safetensors, uninstall_as_safetensors
    from ._api import TensorSpec, deserialize, serialize, serialize_file
    from ._incremental import SafetensorsWriter, open_writer
    from .errors import SafetensorError
    from .handle import _safe_open_handle, safe_open

# public name -> the module (relative to this package) that defines it
_LAZY: dict[str, str] = {
    "install_as_safetensors": "._alias",
    "uninstall_as_safetensors": "._alias",
    "SafetensorsWriter": "._incremental",
    "TensorSpec": "._api",
    "deserialize": "._api",
    "open_writer": "._incremental",
    "serialize": "._api",
    "serialize_file": "._api",
    "SafetensorError": ".errors",
    "_safe_open_handle": ".handle",
    "safe_open": ".handle",
}

# Subpackages and modules reachable as attributes (``pysafetensors.io.open_source``) without
# importing them first, as when the package imported them eagerly.  Framework faces are not
# listed: ``hasattr(pysafetensors, "torch")`` must not import a framework face.
_SUBMODULES = frozenset({
    "cli", "convert", "distributed", "errors", "format", "gguf", "handle", "io", "reader", "run", "sharded",
    "staging", "tools", "view", "writer",
})

__all__ = [
    "SafetensorError",
    "SafetensorsWriter",
    "TensorSpec",
    "__version__",
    "_safe_open_handle",
    "deserialize",
    "install_as_safetensors",
    "open_writer",
    "safe_open",
    "serialize",
    "serialize_file",
    "uninstall_as_safetensors",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY, __all__, _SUBMODULES)
