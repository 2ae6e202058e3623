"""pysafetensors: a pure-Python implementation of the safetensors format.

``import pysafetensors as safetensors`` is a drop-in for the upstream package's API, and
``pysafetensors.install_as_safetensors()`` makes ``import safetensors`` itself give this
package, for libraries that import it.  Importing this package imports no framework.
"""

from __future__ import annotations

from ._alias import install_as_safetensors, uninstall_as_safetensors
from ._api import SafetensorsWriter, TensorSpec, deserialize, open_writer, serialize, serialize_file
from ._version import __version__
from .errors import SafetensorError
from .handle import _safe_open_handle, safe_open

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
