"""A GGUF's tensors as the Hugging Face checkpoint they came from: planned from the header by the
architecture's table (:mod:`pysafetensors.gguf.hf_tables`), read a chunk at a time.

:func:`plan_hf` turns a header into :class:`MappedTensor` s: the Hugging Face name, the output
shape and the layout change of each (one GGUF tensor may give several, as stacked experts do),
with what was left out (``dropped``), written under its GGUF name (``unmapped``) or written in
GGUF order although llama.cpp may have rearranged it (``left_in_gguf_order``).  An architecture
without a table gets gguf-py's names (:func:`pysafetensors.gguf.names.hf_names`) and the q/k
rules of :mod:`pysafetensors.gguf.names`, and ``warning`` says so.

:mod:`pysafetensors.gguf.hf_bytes` reads the values of each mapped tensor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from math import prod
from typing import Any

from ..format.dtypes import BY_CODE, DType
from .header import GGUFArray, GGUFHeader, GGUFTensorInfo
from .hf_tables import NOT_MAPPED, TABLES, ArchTable, Rule
from .names import hf_names, qk_order
from .reader import value_dtype

#: ops that compute each value from one stored value
ELEMENTWISE = frozenset({"minus1", "log_neg"})
#: ops that put the rows (first dimension) in another order, by an index computed from the header
ROW_ORDERS = frozenset({"bloom_qkv", "falcon_qkv", "v_rows", "v_rows_tail", "h_rows"})
#: ops that only change the shape, or the rows' order the way DecodedBytes undoes (q/k heads)
DIRECT = frozenset({"", "q", "k", "unsqueeze1", "row_vector"})
SSM_ORDERS = {"v_rows": "value", "v_rows_tail": "value", "h_rows": "head", "v_cols": "value"}


def op_parts(op: str) -> tuple[str, ...]:
    """The :data:`~.hf_tables.OPS` an op string combines (``log_neg+h_rows``)."""
    return tuple(op.split("+")) if op else ()
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
    if ELEMENTWISE.intersection(op_parts(op)) and dtype.code == "BF16":
        return BY_CODE["F32"]  # as gguf-py decodes BF16, then the arithmetic (transformers does the same)
    return dtype


def _shape_after(op: str, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The output shape of ``op`` on ``shape`` (None: the op does not apply to that shape)."""
    parts = op_parts(op)
    if "v_cols" in parts and len(shape) != 2:
        return None
    if "T" in parts:
        return shape[::-1] if len(shape) == 2 else None
    if "unsqueeze1" in parts:
        return (shape[0], 1, shape[1]) if len(shape) == 2 else shape if len(shape) == 3 else None
    if "row_vector" in parts:
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

    def mtp_blocks(self) -> int:
        """The first block of the multi-token-prediction blocks (past the last one: none)."""
        blocks = self.count("block_count", 0) or 0
        n_mtp = self.count(self.table.mtp_key, 0) if self.table.mtp_key else None
        return blocks - n_mtp if n_mtp and 0 < n_mtp <= blocks else 1 << 62

    def plan(self, out: HFMapping) -> None:
        first_mtp = self.mtp_blocks()
        for info in self.header.tensors:
            m = _BLOCK.match(info.name)
            if m is not None and int(m.group(1)) >= first_mtp:
                out.dropped[info.name] = ("a multi-token-prediction block (the model's block_count includes "
                                          f"{self.table.mtp_key}), which transformers has no module for")
                continue
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
        elif (fused := op in ("bloom_qkv", "falcon_qkv")) or SSM_ORDERS.keys() & set(op_parts(op)):
            found = self.qkv_params(op, block, shape) if fused else self.ssm_params(op, block, shape)
            if isinstance(found, str):
                self.keep(out, info, name, found)
                return
            params = found
        out.tensors.append(MappedTensor(name, info.name, new_shape, op, _values_dtype(info, op), heads, None, params))

    def keep(self, out: HFMapping, info: GGUFTensorInfo, name: str, why: str) -> None:
        """Write the tensor under its Hugging Face name as stored, and say why."""
        out.tensors.append(MappedTensor(name, info.name, info.shape, dtype=value_dtype(info)))
        out.left_in_gguf_order[name] = f"{why}: left as llama.cpp stored it"

    def ssm_params(self, op: str, block: int, shape: tuple[int, ...]) -> tuple[int, ...] | str:
        """(key heads, value heads per key head, rows per head, rows before them) of a linear-attention
        tensor whose value heads llama.cpp tiled (``v0k0 v0k1 v1k0 v1k1``) where the model groups
        them by key head (``v0k0 v1k0 v0k1 v1k1``)."""
        n_k = self.count("ssm.group_count", block)
        n_v = self.count("ssm.time_step_rank", block)
        inner = self.count("ssm.inner_size", block)
        key_dim = self.count("ssm.state_size", block)
        if not n_k or not n_v or not inner or n_v % n_k or inner % n_v or not shape:
            return f"{self.arch}.ssm.group_count / time_step_rank / inner_size do not give the value heads"
        part = next(p for p in op_parts(op) if p in SSM_ORDERS)
        per = 1 if SSM_ORDERS[part] == "head" else inner // n_v
        offset = 2 * (key_dim or 0) * n_k if part == "v_rows_tail" else 0
        size = shape[-1] if part == "v_cols" else shape[0]
        if size != offset + n_v * per:
            return f"{size} rows or columns are not {offset} + {n_v} value heads of {per}"
        return (n_k, n_v // n_k, per, offset)

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


__all__ = ["DIRECT", "ELEMENTWISE", "ROW_ORDERS", "SSM_ORDERS", "HFMapping", "MappedTensor", "op_parts", "plan_hf"]
