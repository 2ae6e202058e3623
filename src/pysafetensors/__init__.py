"""pysafetensors: a pure-Python implementation of the safetensors format.

``import pysafetensors as safetensors`` is a drop-in for the upstream package's API.
Importing this package imports no framework (numpy is loaded lazily too).
"""

from __future__ import annotations

from ._api import SafetensorsWriter, TensorSpec, deserialize, open_writer, serialize, serialize_file
from .errors import SafetensorError
from .handle import _safe_open_handle, safe_open

__version__ = "0.1.0"

__all__ = [
    "SafetensorError",
    "SafetensorsWriter",
    "TensorSpec",
    "__version__",
    "_safe_open_handle",
    "deserialize",
    "open_writer",
    "safe_open",
    "serialize",
    "serialize_file",
]
