"""The values of a GGUF tensor mapped to Hugging Face (:mod:`pysafetensors.gguf.hf_map`), read a
chunk at a time.

:class:`MappedBytes` gives one mapped tensor's values as bytes that decode on slicing, like
:class:`~pysafetensors.gguf.reader.DecodedBytes`: ``convert`` writes them chunk by chunk and
``diff`` compares them chunk by chunk.  A chunk decodes only the stored rows it needs (rows put
in another order are read as one span when that is at most twice what is needed, else run by
run), except for a transposed tensor, which is decoded whole once (gpt2's Conv1D weights: one
matrix).  Values are computed as transformers computes them: float16 in float16, the rest
(bfloat16 included, as gguf-py decodes it) in float32.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING, Any

from .hf_map import DIRECT, ELEMENTWISE, ROW_ORDERS, SSM_ORDERS, MappedTensor, op_parts
from .types import byte_range

if TYPE_CHECKING:
    from .reader import GGUFFile


def _grouped_from_tiled(n_k: int, per_k: int, size: int, offset: int) -> Any:
    """transformers' ``TiledToGroupedRows``: the stored index of each output index (after ``offset``
    indices kept in place)."""
    import numpy as np

    tiled_from_grouped = np.arange(n_k * per_k * size).reshape(n_k, per_k, size).transpose(1, 0, 2).reshape(-1)
    return np.concatenate([np.arange(offset), np.argsort(tiled_from_grouped, kind="stable") + offset])


def _row_index(t: MappedTensor) -> Any:
    """For a regrouped tensor: the stored row of each output row."""
    import numpy as np

    if SSM_ORDERS.keys() & set(op_parts(t.op)) - {"v_cols"}:
        return _grouped_from_tiled(*t.params)
    if t.op == "bloom_qkv":  # stored [q; k; v], each head after head; the model interleaves per head
        n_head, head_dim = t.params
        n_embd = n_head * head_dim
        idx = (np.arange(3)[None, :, None] * n_embd + np.arange(n_head)[:, None, None] * head_dim
               + np.arange(head_dim)[None, None, :])
        return idx.reshape(-1)
    n_head, head_dim, n_kv = t.params  # stored [all q; all k; all v]; the model groups per kv head
    per = n_head // n_kv
    rows = []
    for g in range(n_kv):
        for s in range(per):
            rows.append((g * per + s) * head_dim)
        rows.append((n_head + g) * head_dim)
        rows.append((n_head + n_kv + g) * head_dim)
    return (np.asarray(rows)[:, None] + np.arange(head_dim)[None, :]).reshape(-1)


class MappedBytes:
    """One mapped tensor's values, as bytes of ``dtype`` in C order of ``shape``, that decode on
    slicing (``[lo:hi]``).  ``unit``: the elements a slice is widened to (slices on it decode
    nothing twice)."""

    def __init__(self, file: GGUFFile, t: MappedTensor, stored: Any = None) -> None:
        self.t = t
        self.src = file.decoded(t.source, t.heads, stored)
        self.dtype = t.dtype
        self.itemsize = self.dtype.itemsize
        self.n = t.nelements
        self.length = self.n * self.itemsize
        self.base = t.piece[0] * self.n if t.piece is not None else 0  # a slice's first source element
        shape = file.info(t.source).shape
        self.row_len = prod(shape[1:]) if shape else 1  # elements per first-dimension index
        parts = op_parts(t.op)
        self.parts = parts
        self.rows: Any = _row_index(t) if ROW_ORDERS.intersection(parts) else None
        self.cols: Any = _grouped_from_tiled(*t.params) if "v_cols" in parts else None
        if "T" in parts:
            self.unit = max(self.n, 1)
        elif "bloom_qkv" in parts or "falcon_qkv" in parts:
            self.unit = self.row_len * (t.params[1] * (3 if "bloom_qkv" in parts else t.params[0] // t.params[2] + 2))
        elif self.rows is not None:
            self.unit = self.row_len * t.params[2]  # a head's rows
        elif self.cols is not None:
            self.unit = self.row_len
        else:
            self.unit = self.src.unit

    def __len__(self) -> int:
        return self.length

    def _source(self, e0: int, e1: int) -> Any:
        import numpy as np

        from .._adapters.numpy import numpy_dtype

        size = self.src.itemsize
        raw = self.src[(self.base + e0) * size : (self.base + e1) * size]
        return np.frombuffer(raw, dtype=numpy_dtype(self.src.dtype)) if len(raw) else np.empty(0, numpy_dtype(
            self.src.dtype))

    def _gathered(self, r0: int, r1: int) -> Any:
        """Output rows ``[r0, r1)`` of a regrouped tensor: the stored rows they come from, read
        as one span when that is at most twice what is needed, else run by run."""
        import numpy as np

        idx = self.rows[r0:r1]
        k = self.row_len
        lo, hi = int(idx.min()), int(idx.max()) + 1
        if hi - lo <= 2 * len(idx):
            return self._source(lo * k, hi * k).reshape(hi - lo, k)[idx - lo]
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        parts = [self._source(int(run[0]) * k, (int(run[-1]) + 1) * k).reshape(-1, k)
                 for run in np.split(idx, breaks)]
        return np.concatenate(parts)

    def values(self, e0: int, e1: int) -> Any:
        """Output elements ``[e0, e1)`` (flat, C order), as numpy of ``dtype``."""
        import numpy as np

        parts = self.parts
        if "T" in parts:
            src_shape = self.t.shape[::-1]
            whole = self._source(0, self.n).reshape(src_shape).T
            out = np.ascontiguousarray(whole).reshape(-1)[e0:e1]
        elif self.rows is not None:
            k = self.row_len
            r0, r1 = e0 // k, -(-e1 // k)
            out = self._gathered(r0, r1).reshape(-1)[e0 - r0 * k : e1 - r0 * k]
        elif self.cols is not None:
            k = self.row_len
            r0, r1 = e0 // k, -(-e1 // k)
            out = self._source(r0 * k, r1 * k).reshape(r1 - r0, k)[:, self.cols].reshape(-1)[e0 - r0 * k : e1 - r0 * k]
        else:
            out = self._source(e0, e1)
        if ELEMENTWISE.intersection(parts):
            if out.dtype.itemsize == 2 and out.dtype != np.float16:  # bfloat16: as gguf-py decodes it
                out = out.astype(np.float32)
            one = out.dtype.type(1)
            out = out - one if "minus1" in parts else np.log(-out)
        return out

    def __getitem__(self, key: slice) -> Any:
        import numpy as np

        start, stop = byte_range(key, self.length, "MappedBytes")
        if stop == start:
            return np.empty(0, dtype=np.uint8)
        e0, e1 = start // self.itemsize, -(-stop // self.itemsize)
        out = np.ascontiguousarray(self.values(e0, e1)).view(np.uint8)
        skew = start - e0 * self.itemsize
        return out[skew : skew + (stop - start)]


def reads_as_stored(t: MappedTensor) -> bool:
    """Whether ``t``'s values are its GGUF tensor's decoded values as they come (only its name or
    shape changes, or its q/k rows, which DecodedBytes puts back)."""
    return DIRECT.issuperset(op_parts(t.op)) and t.piece is None


def mapped_bytes(file: GGUFFile, t: MappedTensor, stored: Any = None) -> Any:
    """The values of ``t`` as sliceable bytes: the GGUF tensor's own
    :class:`~pysafetensors.gguf.reader.DecodedBytes` where nothing but its name (or its q/k row
    order, or its shape) changes, else a :class:`MappedBytes`."""
    if reads_as_stored(t):
        return file.decoded(t.source, t.heads, stored)
    return MappedBytes(file, t, stored)


__all__ = ["MappedBytes", "mapped_bytes", "reads_as_stored"]
