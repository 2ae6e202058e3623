"""A GGUF's tensors as the Hugging Face checkpoint they came from: planned from the header by the
architecture's table (:mod:`pysafetensors.gguf.hf_tables`), read a chunk at a time.

:func:`plan_hf` turns a header into :class:`MappedTensor` s: the Hugging Face name, the output
shape and the layout change of each (one GGUF tensor may give several, as stacked experts do),
with what was left out (``dropped``), written under its GGUF name (``unmapped``) or written in
GGUF order although llama.cpp may have rearranged it (``left_in_gguf_order``).  An architecture
without a table gets gguf-py's names (:func:`pysafetensors.gguf.names.hf_names`) and the q/k
rules of :mod:`pysafetensors.gguf.names`, and ``warning`` says so.

:class:`MappedBytes` gives one mapped tensor's values as bytes that decode on slicing, like
:class:`~pysafetensors.gguf.reader.DecodedBytes`: ``convert`` writes them chunk by chunk and
``diff`` compares them chunk by chunk.  A chunk decodes only the stored rows it needs, except
for a transposed tensor, which is decoded whole once (gpt2's Conv1D weights: one matrix).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from math import prod
from typing import TYPE_CHECKING, Any

from ..format.dtypes import BY_CODE, DType
from .header import GGUFArray, GGUFHeader, GGUFTensorInfo
from .hf_tables import NOT_MAPPED, OPS, TABLES, ArchTable, Rule
from .names import hf_names, qk_order
from .reader import value_dtype

if TYPE_CHECKING:
    from .reader import GGUFFile

#: ops that compute each value from one stored value
ELEMENTWISE = frozenset({"minus1", "log_neg"})
_BLOCK = re.compile(r"(?:[a-z]+\.)?blk\.(\d+)\.")


@dataclass(frozen=True)
class MappedTensor:
    """One output tensor: its name, the GGUF tensor it comes from, its shape, and the layout
    change (an :data:`~pysafetensors.gguf.hf_tables.OPS` key) with what that change needs:
    ``heads`` for q/k rows, ``piece`` (index, count) for a slice of a split tensor, ``params``
    for the q/k/v regrouping of bloom (n_head) and falcon (n_head, n_head_kv)."""

    name: str
    source: str
    shape: tuple[int, ...]
    op: str = ""
    dtype: DType = field(default_factory=lambda: BY_CODE["F32"])  # of the values (before --dtype)
    heads: int | None = None
    piece: tuple[int, int] | None = None
    params: tuple[int, ...] = ()

    @property
    def nelements(self) -> int:
        return prod(self.shape)


@dataclass
class HFMapping:
    """What :func:`plan_hf` decided for a file."""

    architecture: str | None
    tensors: list[MappedTensor] = field(default_factory=list)
    #: whether the architecture's table was used (False: gguf-py's names, see ``warning``)
    table: bool = False
    unmapped: list[str] = field(default_factory=list)
    #: GGUF name -> why it is not written (a tensor llama.cpp generates that the checkpoint lacks)
    dropped: dict[str, str] = field(default_factory=dict)
    #: output name -> why its values are as llama.cpp stored them although it may have rearranged them
    left_in_gguf_order: dict[str, str] = field(default_factory=dict)
    #: a whole-file caveat: the architecture has no table (names from gguf-py, not checked)
    warning: str | None = None

    @property
    def renamed(self) -> int:
        return sum(1 for t in self.tensors if t.name != t.source)


@cache
def _compiled(rule: Rule) -> re.Pattern[str]:
    pattern = re.escape(rule.gguf).replace(r"\{N\}", r"(?P<N>\d+)").replace(r"\{S\}", r"(?P<S>\.weight|\.bias)")
    return re.compile(pattern)


def _fill(template: str, groups: dict[str, str], e: int | None = None) -> str:
    out = template.replace("{N}", groups.get("N") or "").replace("{S}", groups.get("S") or "")
    return out if e is None else out.replace("{E}", str(e))


def _number(value: Any, block: int) -> int | None:
    """A count from the header: a number, or the block's item of a per-layer array."""
    if isinstance(value, GGUFArray):
        if not 0 <= block < len(value):
            return None
        value = value.items[block]
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _values_dtype(info: GGUFTensorInfo, op: str) -> DType:
    dtype = value_dtype(info)
    if op in ELEMENTWISE and dtype.code == "BF16":
        return BY_CODE["F32"]  # as gguf-py decodes BF16, then the arithmetic (transformers does the same)
    return dtype


def _shape_after(op: str, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The output shape of ``op`` on ``shape`` (None: the op does not apply to that shape)."""
    if op == "T":
        return shape[::-1] if len(shape) == 2 else None
    if op == "unsqueeze1":
        return (shape[0], 1, shape[1]) if len(shape) == 2 else shape if len(shape) == 3 else None
    if op == "row_vector":
        return (1, shape[0]) if len(shape) == 1 else shape
    return shape


class _Planner:
    def __init__(self, header: GGUFHeader, table: ArchTable) -> None:
        self.header = header
        self.table = table
        self.arch = table.arch
        self.names = {t.name for t in header.tensors}

    def count(self, key: str, block: int) -> int | None:
        return _number(self.header.value(f"{self.arch}.{key}"), block)

    def rule_for(self, name: str) -> tuple[Rule, dict[str, str]] | None:
        for rule in self.table.rules:
            m = _compiled(rule).fullmatch(name)
            if m is None:
                continue
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
            if rule.present is not None and _fill(rule.present, groups) not in self.names:
                continue
            if rule.absent is not None and _fill(rule.absent, groups) in self.names:
                continue
            return rule, groups
        return None

    def plan(self, out: HFMapping) -> None:
        for info in self.header.tensors:
            dropped = self.table.dropped.get(info.name)
            if dropped is not None:
                out.dropped[info.name] = dropped
                continue
            found = self.rule_for(info.name)
            if found is None:
                out.unmapped.append(info.name)
                out.tensors.append(MappedTensor(info.name, info.name, info.shape, dtype=value_dtype(info)))
                continue
            rule, groups = found
            self.add(out, info, rule, groups)

    def add(self, out: HFMapping, info: GGUFTensorInfo, rule: Rule, groups: dict[str, str]) -> None:
        name, op, shape = _fill(rule.hf, groups), rule.op, info.shape
        block = int(groups.get("N", "0"))
        if op == "split":
            if len(shape) < 2:
                self.keep(out, info, name, f"{info.name}: {len(shape)}-D, not a stack of slices to split")
                return
            dtype = value_dtype(info)
            for e in range(shape[0]):
                out.tensors.append(MappedTensor(_fill(rule.hf, groups, e), info.name, shape[1:], op, dtype,
                                                piece=(e, shape[0])))
            return
        new_shape = _shape_after(op, shape)
        if new_shape is None:
            self.keep(out, info, name, f"{info.name}: shape {list(shape)} is not one {op!r} applies to")
            return
        heads: int | None = None
        params: tuple[int, ...] = ()
        if op in ("q", "k"):
            heads, why = self.qk_heads(op, block, shape)
            if heads is None:
                self.keep(out, info, name, why)
                return
        elif op in ("bloom_qkv", "falcon_qkv"):
            found = self.qkv_params(op, block, shape)
            if isinstance(found, str):
                self.keep(out, info, name, found)
                return
            params = found
        out.tensors.append(MappedTensor(name, info.name, new_shape, op, _values_dtype(info, op), heads, None, params))

    def keep(self, out: HFMapping, info: GGUFTensorInfo, name: str, why: str) -> None:
        """Write the tensor under its Hugging Face name as stored, and say why."""
        out.tensors.append(MappedTensor(name, info.name, info.shape, dtype=value_dtype(info)))
        out.left_in_gguf_order[name] = f"{why}: left as llama.cpp stored it"

    def qk_heads(self, op: str, block: int, shape: tuple[int, ...]) -> tuple[int | None, str]:
        n_head = self.count("attention.head_count", block)
        n_kv = self.count("attention.head_count_kv", block)
        heads = n_head if op == "q" else (n_kv if n_kv else n_head)
        if not heads or heads < 0:
            return None, f"{self.arch}.attention.head_count gives no head count for block {block}"
        if not shape or shape[0] % (2 * heads):
            return None, f"{shape[0] if shape else 0} rows do not split into {heads} heads of row pairs"
        return heads, ""

    def qkv_params(self, op: str, block: int, shape: tuple[int, ...]) -> tuple[int, ...] | str:
        n_head = self.count("attention.head_count", block)
        n_embd = self.count("embedding_length", block)
        if not n_head or not n_embd or n_embd % n_head or not shape:
            return f"{self.arch}.attention.head_count / embedding_length do not give the head size"
        head_dim = n_embd // n_head
        if op == "bloom_qkv":
            if shape[0] != 3 * n_embd:
                return f"{shape[0]} rows are not q, k and v of {n_embd}"
            return (n_head, head_dim)
        n_kv = self.count("attention.head_count_kv", block) or 1
        if n_head % n_kv or shape[0] != (n_head + 2 * n_kv) * head_dim:
            return f"{shape[0]} rows are not {n_head} q heads and {n_kv} k and v heads of {head_dim}"
        return (n_head, head_dim, n_kv)


def plan_hf(header: GGUFHeader) -> HFMapping:
    """The Hugging Face checkpoint of this file's tensors (see the module docstring)."""
    arch = header.architecture
    table = TABLES.get(arch or "")
    out = HFMapping(arch)
    if table is not None:
        out.table = True
        _Planner(header, table).plan(out)
        return out
    if arch in NOT_MAPPED:
        out.warning = f"architecture {arch!r} is not mapped ({NOT_MAPPED[arch]}): names from gguf-py's map"
    else:
        out.warning = (f"architecture {arch!r} is not one transformers' GGUF loader reads: names from gguf-py's "
                       "map, layout changes other than llama's q/k permutation not undone")
    names = hf_names(header)
    out.unmapped = list(names.unmapped)
    heads, left = qk_order(header, names.hf)
    for info in header.tensors:
        name = names.hf.get(info.name, info.name)
        h = heads.get(info.name)
        out.tensors.append(MappedTensor(name, info.name, info.shape, "q" if h else "", value_dtype(info), h))
        if info.name in left:
            out.left_in_gguf_order[name] = f"{info.name}: {left[info.name]}"
    return out


def describe_op(op: str) -> str:
    return OPS.get(op, op)


# --- reading ---------------------------------------------------------------------------------


def _qkv_rows(t: MappedTensor) -> Any:
    """For bloom/falcon's fused q/k/v: the stored row of each output row."""
    import numpy as np

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
        self.rows: Any = _qkv_rows(t) if t.op in ("bloom_qkv", "falcon_qkv") else None
        if t.op == "T":
            self.unit = max(self.n, 1)
        elif self.rows is not None:
            self.unit = self.row_len * (t.params[1] * (3 if t.op == "bloom_qkv" else t.params[0] // t.params[2] + 2))
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

        op = self.t.op
        if op == "T":
            src_shape = self.t.shape[::-1]
            whole = self._source(0, self.n).reshape(src_shape).T
            out = np.ascontiguousarray(whole).reshape(-1)[e0:e1]
        elif self.rows is not None:
            k = self.row_len
            r0, r1 = e0 // k, -(-e1 // k)
            out = self._gathered(r0, r1).reshape(-1)[e0 - r0 * k : e1 - r0 * k]
        else:
            out = self._source(e0, e1)
        if op in ELEMENTWISE:
            if out.dtype.itemsize == 2 and out.dtype != np.float16:  # bfloat16: as gguf-py decodes it
                out = out.astype(np.float32)
            one = out.dtype.type(1)
            out = out - one if op == "minus1" else np.log(-out)
        return out

    def __getitem__(self, key: slice) -> Any:
        import numpy as np

        if not isinstance(key, slice):
            raise TypeError("MappedBytes supports byte-range slices only")
        start, stop, step = key.indices(self.length)
        if step != 1:
            raise ValueError("MappedBytes slices must be contiguous")
        if stop <= start:
            return np.empty(0, dtype=np.uint8)
        e0, e1 = start // self.itemsize, -(-stop // self.itemsize)
        out = np.ascontiguousarray(self.values(e0, e1)).view(np.uint8)
        skew = start - e0 * self.itemsize
        return out[skew : skew + (stop - start)]


def mapped_bytes(file: GGUFFile, t: MappedTensor, stored: Any = None) -> Any:
    """The values of ``t`` as sliceable bytes: the GGUF tensor's own
    :class:`~pysafetensors.gguf.reader.DecodedBytes` where nothing but its name (or its q/k row
    order, or its shape) changes, else a :class:`MappedBytes`."""
    if t.op in ("", "q", "k", "unsqueeze1", "row_vector") and t.piece is None:
        return file.decoded(t.source, t.heads, stored)
    return MappedBytes(file, t, stored)


__all__ = ["ELEMENTWISE", "HFMapping", "MappedBytes", "MappedTensor", "describe_op", "mapped_bytes", "plan_hf"]
