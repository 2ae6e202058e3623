"""Tensor bytes as bounded chunks of numpy elements: the one memory bound of every streamed tool.

``CHUNK_ELEMENTS`` caps the elements handled at once: 2M x 8 bytes (float64 working copies) =
16 MiB per array (32 MiB complex128), so the temporaries of a two-file comparison are a few
such arrays whatever the tensor size.  Remote inputs read ahead by the same
budget (:func:`read_ahead_bytes`), so one knob bounds memory.  Both are read at call time, so
tests can shrink them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..format.dtypes import DType

CHUNK_ELEMENTS = 1 << 21


def read_ahead_bytes() -> int:
    """Bytes fetched per request when small tensors are read back to back from a remote input."""
    return CHUNK_ELEMENTS * 8


def iter_chunks(data: Any, dtype: DType, nelements: int, step: int | None = None) -> Iterator[Any]:
    """The tensor's elements as flat numpy arrays of at most ``step`` elements each.

    ``data`` is a buffer or anything sliceable by byte range (a remote tensor's RangedBytes
    reads just that range).  Each chunk views ``data[lo:hi]`` (unpacked to one code per
    element for F4/F6), so memory stays bounded by the chunk size whatever the tensor size.
    """
    import numpy as np

    from .._adapters.numpy import numpy_dtype, unpack

    step = step or CHUNK_ELEMENTS
    nd = numpy_dtype(dtype)
    bits = dtype.bits
    for start in range(0, nelements, step):
        count = min(step, nelements - start)
        lo, hi = start * bits // 8, (start + count) * bits // 8
        piece = data[lo:hi]
        if dtype.packed:
            yield unpack(piece, dtype, count).view(nd)
        else:
            yield np.frombuffer(piece, dtype=nd)
