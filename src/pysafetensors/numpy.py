"""numpy face: save, save_file, load, load_file (upstream-compatible), save_sharded.

Every format dtype loads: BF16 and the F8 kinds as ml_dtypes types, C64 as complex64, and
the packed sub-byte F4/F6 unpacked to one ml_dtypes element per byte (``float4_e2m1fn``,
``float6_e2m3fn``, ``float6_e3m2fn``), packed again on save, so round trips are exact.
Arrays from ``load_file`` with the default mmap backend are read-only zero-copy views of
the file; ``backend="pread"`` gives writable arrays in fresh memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._adapters import numpy as _adapter
from ._face import Face, declare
from ._lazy import lazy_attributes
from .errors import UnknownDtype
from .format.dtypes import by_code
from .handle import safe_open  # noqa: F401 - upstream's module has it

if TYPE_CHECKING:
    from ._api import TensorSpec, deserialize, serialize, serialize_file  # noqa: F401 - upstream's module has them

__all__ = ["load", "load_file", "save", "save_file", "save_sharded"]

# Upstream's module has these too.  They load on first use, as from the package root: reading
# needs none of them.
_FROM_API = ("TensorSpec", "deserialize", "serialize", "serialize_file")
__getattr__, __dir__ = lazy_attributes(__name__, globals(), dict.fromkeys(_FROM_API, "._api"), _FROM_API, ())


def _getdtype(dtype_str: str) -> np.dtype[Any]:
    """The numpy dtype a header code (``"F32"``) loads as; KeyError for an unknown code, as
    upstream's table lookup.  Sub-byte codes give their unpacked one-element-per-byte type."""
    try:
        return _adapter.numpy_dtype(by_code(dtype_str))
    except UnknownDtype:
        raise KeyError(dtype_str) from None


def _storage_id(array: Any) -> int | None:
    if not isinstance(array, np.ndarray):
        return None
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    # Arrays over one foreign buffer (np.frombuffer of the same bytes) share it, too.
    return id(root.base) if root.base is not None else id(root)


save, save_file, save_sharded, load, load_file = declare(
    __name__, _adapter, framework="np", what="arrays", face=Face, argument="tensor_dict", storage_id=_storage_id,
    docs={
        "save": """Serialize arrays to safetensors bytes.  Fortran-order, strided and big-endian
    arrays are written in logical C order, little-endian; the inputs are never modified.""",
        "save_file": """Save arrays to ``filename`` atomically, streaming one array at a time; ``durable=True``
    fsyncs before the rename (default: ``PYSAFETENSORS_DURABLE``, else off).  ``filename``
    may be an fsspec URL (``s3://...``; ``storage_options`` for its filesystem): streamed to
    the store, published only when complete.""",
        "load": """Load arrays from safetensors bytes (zero-copy, read-only views of ``data``).""",
        "load_file": """Load every array of a file, in file order (``threads``: parallel pread reads;
    ``storage_options`` for a remote ``filename``).""",
        "save_sharded": """Save arrays as a Hugging Face sharded checkpoint in ``directory`` (a path, or an fsspec
    URL prefix such as ``s3://bucket/ckpt/`` with ``storage_options`` for its filesystem).

    ``model-00001-of-00003.safetensors`` ... plus ``model.safetensors.index.json`` (a single
    shard is a plain ``model.safetensors``).  ``max_shard_size`` is bytes or "5GB"/"500MB"
    (decimal units); shards are filled greedily in key order and arrays viewing one buffer
    stay together.  Returns the index path (or the single file's path).""",
    },
)
