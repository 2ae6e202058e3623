"""Differences between two checkpoints: structure, metadata, tensor bytes and (streamed) values.

What was compared, and the verdict, are decided here once (:class:`DiffResult`'s
``compared``, ``verdict``, ``tensor_verdicts``); the CLI's text, JSON and Markdown, the viewer
and its exported report print them and never a stronger word.  Nothing is called identical
unless its bytes were compared and are equal:

* ``compared="bytes"`` (the default for two local checkpoints): each tensor both hold with the
  same dtype and shape has its bytes compared, streamed in chunks of :data:`BYTE_CHUNK` and
  stopping at the first chunk that differs: ``"identical"`` or ``"values differ"``.
* ``compared="values"`` (``values=True``, a tolerance, or a GGUF against a safetensors
  checkpoint): the value comparison below, per tensor ``"identical"`` (same dtype, every bit
  equal, stored bytes read), ``"values equal"`` (equal, but what was compared is not the stored
  bytes: dequantized GGUF values, or two dtypes), ``"within tolerance"`` or ``"values differ"``.
* ``compared="structure"`` (a URL input without ``values``, or ``structure_only``): names,
  dtypes, shapes and metadata only; each such tensor is ``"values not compared"`` and, when
  nothing else differs, the verdict is ``"same structure, values not compared"``.

The overall verdict is ``"different"`` (anything added, removed, changed or differing),
``"same structure, values not compared"``, ``"equal within tolerance"``, ``"values equal"``
(every tensor's values equal, but not every stored byte or the metadata was compared), or
``"identical"`` (same tensors, same bytes, same metadata; the files may still order their
tensors or pad their headers differently).

Values are compared chunk by chunk (bounded memory whatever the tensor size):

* Integer and bool tensors (either dtype) are compared exactly in integer arithmetic: the
  differing count is exact and ``max_abs_diff`` is an exact Python int (``2**53 + 1`` vs
  ``2**53`` differ by 1; U64 near 2**64 too).  With tolerances, ``|a - b|`` (exact) is held to
  ``atol + rtol * |b|``.
* Exact mode (no tolerance) with equal float dtypes compares bit patterns: ``-0.0`` differs from
  ``0.0``, identical NaNs match.  Otherwise floats are compared by value in float64
  (complex128): NaN equals NaN, ``|a-b| <= atol + rtol*|b|``.
* ``max_abs_diff`` of floats is ``inf`` where one side is infinite or NaN and the other is not
  (``inf`` vs ``-inf`` included).  Cosine similarity is over the finite pairs, computed on
  values scaled by powers of two, so it stays defined for huge finite values; pairs holding the
  same non-finite value on both sides are left out, and any other non-finite pair (``inf`` vs
  ``-inf``, ``inf`` or NaN vs a number) makes it None (undefined), never a misleading 1.0.

Either side may be a GGUF file (:class:`GGUFDiffResult`).  A tensor's dtype is then its GGML
type (``Q8_0``), its shape PyTorch's order (GGUF's dims reversed), and its values the
dequantized ones (gguf-py), streamed a few rows at a time.  Two GGUF files compare by name,
with typed metadata; by default their tensors' stored (quantized) bytes are compared, so
``"identical"`` means the same blocks.  With ``values`` the dequantized values are compared,
and equal ones are ``"values equal"``: different blocks can decode to the same numbers.

A GGUF against a safetensors checkpoint (either order) is the check after quantizing: GGUF
names are mapped to Hugging Face names with gguf-py's tensor-name map for the file's
``general.architecture`` (when that matches more of the other side's names than the
names as they are), the rows llama.cpp permutes in the q/k projections are put back
(:func:`~pysafetensors.gguf.names.qk_order`; those it cannot vouch for are listed in
``left_in_gguf_order``), and metadata is not compared (the two formats' metadata say different things).
There the stored bytes of the two formats cannot be compared (rows permuted, blocks vs
floats): a local pair compares the values of the tensors of the same type and shape exactly
(bit for bit, stopping at the first differing chunk), so equal ones are ``"values equal"``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from ..format.header import TensorInfo
from ..gguf.convert import metadata_string
from ..gguf.hf_bytes import mapped_bytes, reads_as_stored
from ..gguf.hf_map import MappedTensor, plan_hf
from ..gguf.names import hf_candidates
from ..gguf.reader import value_dtype
from ..io.protocols import ViewSource, capabilities
from ._base import JsonResult, Progress, no_progress
from ._chunks import iter_chunks
from .checkpoint import (
    AnyCheckpoint,
    Checkpoint,
    GGUFCheckpoint,
    TensorBytes,
    ValueTensor,
    missing,
    open_checkpoint,
    stream_tensors,
)
from .pairing import Item, RegionView, Span, differing_spans, equal_bytes, hold, stream_pair

_INTEGER_KINDS = ("int", "uint", "bool")

# What was compared (DiffResult.compared).
STRUCTURE, BYTES, VALUES = "structure", "bytes", "values"
# A tensor's verdict (the tensors both hold with the same dtype and shape; ValueDiff.verdict too).
IDENTICAL = "identical"
VALUES_EQUAL = "values equal"
WITHIN_TOLERANCE = "within tolerance"
VALUES_DIFFER = "values differ"
VALUES_NOT_COMPARED = "values not compared"
TENSOR_VERDICTS = (VALUES_DIFFER, WITHIN_TOLERANCE, VALUES_EQUAL, IDENTICAL, VALUES_NOT_COMPARED)
# The checkpoints' verdict (DiffResult.verdict); IDENTICAL and VALUES_EQUAL too.
DIFFERENT = "different"
EQUAL_WITHIN_TOLERANCE = "equal within tolerance"
SAME_STRUCTURE = "same structure, values not compared"

#: bytes compared at once by the byte comparison (it stops at the first chunk that differs)
BYTE_CHUNK = 4 << 20

#: called with each tensor of one side and its bytes as a values diff streams it (the viewer's
#: report computes every tensor's stats in the same pass)
Visit = Callable[[ValueTensor, TensorBytes], None]


@dataclass
class TensorDesc(JsonResult):
    name: str
    dtype: str
    shape: list[int]
    nbytes: int


@dataclass
class TensorChange(JsonResult):
    name: str
    a: TensorDesc
    b: TensorDesc
    changes: list[str]  # among "dtype", "shape", "nbytes"


@dataclass
class ValueDiff(JsonResult):
    name: str
    compared: bool
    elements: int = 0
    differing: int = 0
    max_abs_diff: float | int | None = None  # an exact int for integer tensors
    cosine_similarity: float | None = None
    reason: str | None = None  # why a tensor was not compared
    verdict: str = VALUES_NOT_COMPARED  # one of TENSOR_VERDICTS


@dataclass
class DiffResult(JsonResult):
    """Two checkpoints compared.  ``compared`` says what was (``structure``, ``bytes`` or
    ``values``), ``verdict`` the answer in words, ``same`` the same as a boolean: True when
    nothing compared differs (``identical``, ``values equal``, ``equal within tolerance``),
    False when something does, None when values were not compared and nothing else differs.
    ``tensor_verdicts`` holds the verdict of every tensor both hold with the same dtype and
    shape (``tensors_same_structure`` of them), ``verdict_counts`` their tally."""

    a: str
    b: str
    same: bool | None
    compared: str = STRUCTURE
    verdict: str = SAME_STRUCTURE
    tensors_added: list[TensorDesc] = field(default_factory=list)
    tensors_removed: list[TensorDesc] = field(default_factory=list)
    tensors_changed: list[TensorChange] = field(default_factory=list)
    tensors_same_structure: int = 0
    verdict_counts: dict[str, int] = field(default_factory=dict)
    tensor_verdicts: dict[str, str] = field(default_factory=dict)
    metadata_added: dict[str, str] = field(default_factory=dict)
    metadata_removed: dict[str, str] = field(default_factory=dict)
    metadata_changed: dict[str, dict[str, str]] = field(default_factory=dict)
    values: list[ValueDiff] | None = None
    rtol: float | None = None
    atol: float | None = None

    def gguf_part(self) -> GGUFDiffResult | None:
        """This result with its GGUF fields (a diff with a GGUF side), else None."""
        return None


@dataclass
class GGUFDiffResult(DiffResult):
    """A diff with a GGUF side: which formats, and how GGUF names were matched."""

    def gguf_part(self) -> GGUFDiffResult | None:
        return self

    formats: list[str] = field(default_factory=list)  # of a and b: "gguf" or "safetensors"
    metadata_compared: bool = True  # False between a GGUF and a safetensors checkpoint
    architecture: str | None = None  # general.architecture of the GGUF whose names were mapped
    names_mapped: int = 0  # GGUF names shown as their Hugging Face names
    unmapped: list[str] = field(default_factory=list)  # GGUF names gguf-py could not map (kept as they are)
    unpermuted: list[str] = field(default_factory=list)  # q/k tensors whose rows were put back in HF order
    #: shown name -> why its rows are compared in GGUF order although llama.cpp may have rearranged them
    left_in_gguf_order: dict[str, str] = field(default_factory=dict)
    #: shown name -> the layout change llama.cpp made that was undone before comparing (``T``, ``split``...)
    layout_changes: dict[str, str] = field(default_factory=dict)
    #: GGUF name -> why it is left out of the comparison (a tensor llama.cpp generated)
    dropped: dict[str, str] = field(default_factory=dict)
    #: a caveat on the mapping (an architecture without a table: gguf-py's names, not checked)
    warning: str | None = None


_R = TypeVar("_R", bound=DiffResult)


def _concluded(r: _R) -> _R:
    """``r`` with its verdict decided from the structure, the metadata and ``tensor_verdicts``
    (the one place a verdict is made: see the module docstring)."""
    counts = Counter(r.tensor_verdicts.values())
    r.verdict_counts = {v: counts[v] for v in TENSOR_VERDICTS if counts[v]}
    structural = (r.tensors_added or r.tensors_removed or r.tensors_changed
                  or r.metadata_added or r.metadata_removed or r.metadata_changed)
    if structural or counts[VALUES_DIFFER]:
        r.verdict = DIFFERENT
    elif counts[VALUES_NOT_COMPARED]:
        r.verdict = SAME_STRUCTURE
    elif counts[WITHIN_TOLERANCE]:
        r.verdict = EQUAL_WITHIN_TOLERANCE
    elif counts[VALUES_EQUAL] or not getattr(r, "metadata_compared", True):
        r.verdict = VALUES_EQUAL
    else:
        r.verdict = IDENTICAL
    r.same = None if r.verdict == SAME_STRUCTURE else r.verdict != DIFFERENT
    return r


def _tensor_verdict(differing: int, bit_equal: bool, decoded: bool, tolerant: bool) -> str:
    """A compared tensor's verdict: IDENTICAL only when its stored bytes were compared and are
    equal (same dtype, every bit; not dequantized GGUF values)."""
    if differing:
        return VALUES_DIFFER
    if bit_equal and not decoded:
        return IDENTICAL
    if bit_equal or not tolerant:
        return VALUES_EQUAL  # decoded values equal bit for bit, or two dtypes equal in value
    return WITHIN_TOLERANCE


def _desc(t: TensorInfo) -> TensorDesc:
    """A tensor as the diff lists it: its stored type (a GGUF tensor's GGML type), shape and stored bytes."""
    return TensorDesc(t.name, t.type, list(t.shape), t.nbytes)


class _Cosine:
    """Running dot product and norms of the finite pairs, scaled by powers of two (no overflow).

    A pair with a non-finite value is left out when both sides hold the same value (``inf`` and
    ``inf``, NaN and NaN); any other (``inf`` vs ``-inf``, ``inf`` or NaN vs a number) makes the
    similarity undefined (None): the finite pairs alone would call opposite vectors identical.
    """

    def __init__(self) -> None:
        self.dot = self.na = self.nb = 0.0
        self.ea: int | None = None  # side a's values are held as x * 2**-ea
        self.eb: int | None = None
        self.undefined = False

    @staticmethod
    def _exp(x: Any, np: Any) -> int | None:
        if not x.size:
            return None
        amax = float(np.max(np.abs(x)))
        return math.frexp(amax)[1] if amax > 0 else None

    def add(self, fa: Any, fb: Any, np: Any) -> None:
        finite = np.isfinite(fa) & np.isfinite(fb)
        if not finite.all():
            odd = ~finite
            a, b = fa[odd], fb[odd]
            if not ((a == b) | (np.isnan(a) & np.isnan(b))).all():
                self.undefined = True
            fa, fb = np.where(finite, fa, 0), np.where(finite, fb, 0)
        ea, eb = self._exp(fa, np), self._exp(fb, np)
        if ea is not None and (self.ea is None or ea > self.ea):
            if self.ea is not None:
                self.dot, self.na = math.ldexp(self.dot, self.ea - ea), math.ldexp(self.na, 2 * (self.ea - ea))
            self.ea = ea
        if eb is not None and (self.eb is None or eb > self.eb):
            if self.eb is not None:
                self.dot, self.nb = math.ldexp(self.dot, self.eb - eb), math.ldexp(self.nb, 2 * (self.eb - eb))
            self.eb = eb
        sa = np.ldexp(1.0, -(self.ea or 0))
        sb = np.ldexp(1.0, -(self.eb or 0))
        ya, yb = fa * sa, fb * sb
        self.dot += float(np.vdot(ya, yb).real)
        self.na += float(np.vdot(ya, ya).real)
        self.nb += float(np.vdot(yb, yb).real)

    def value(self) -> float | None:
        if self.undefined:
            return None
        denom = math.sqrt(self.na) * math.sqrt(self.nb)
        if denom == 0 or not math.isfinite(denom):
            return None  # undefined for an all-zero tensor
        return max(-1.0, min(1.0, self.dot / denom))  # rounding can step just past +-1


def _int_view(x: Any, np: Any) -> Any:
    return x.view(np.uint8) if x.dtype == np.bool_ else x


def _int_abs_diff(xa: Any, xb: Any, np: Any) -> Any:
    """Exact ``|a - b|`` of two integer arrays: uint64, or Python ints (object) past 64 bits."""
    signed_a, signed_b = xa.dtype.kind == "i", xb.dtype.kind == "i"
    if not signed_a and not signed_b:
        a, b = xa.astype(np.uint64), xb.astype(np.uint64)
    elif signed_a and signed_b or (xb if signed_a else xa).dtype.itemsize < 8:
        a, b = xa.astype(np.int64), xb.astype(np.int64)  # int64 holds every value of both
    else:  # a U64 against a signed dtype: the difference may need 65 bits
        return np.abs(xa.astype(object) - xb.astype(object))
    # The true difference of two int64/uint64 values fits in uint64; modular uint64
    # subtraction of the larger minus the smaller gives it exactly.
    ua, ub = a.view(np.uint64), b.view(np.uint64)
    return np.where(a >= b, ua - ub, ub - ua)


class _Compare:
    """Running comparison of one tensor pair, chunk by chunk."""

    def __init__(self, ta: ValueTensor, tb: ValueTensor, rtol: float | None, atol: float | None) -> None:
        self.integer = ta.dtype.kind in _INTEGER_KINDS and tb.dtype.kind in _INTEGER_KINDS
        self.tolerant = rtol is not None or atol is not None
        self.same_dtype = ta.dtype == tb.dtype
        self.exact_bits = self.same_dtype and not self.tolerant
        self.bit_equal = self.same_dtype  # every chunk so far equal bit for bit
        self.rtol, self.atol = rtol or 0.0, atol or 0.0
        self.differing = 0
        self.max_abs: float | int = 0 if self.integer else 0.0
        self.cosine = _Cosine()

    def add(self, xa: Any, xb: Any) -> None:
        import numpy as np

        with np.errstate(all="ignore"):
            chunk_equal = self.same_dtype and bool(np.array_equal(xa.view(np.uint8), xb.view(np.uint8)))
            self.bit_equal = self.bit_equal and chunk_equal
            if self.integer:
                self._add_int(_int_view(xa, np), _int_view(xb, np), np)
            else:
                self._add_float(xa, xb, np, chunk_equal)

    def _add_int(self, xa: Any, xb: Any, np: Any) -> None:
        d = _int_abs_diff(xa, xb, np)
        if d.size:
            self.max_abs = max(self.max_abs, int(d.max()))
        if self.tolerant:
            bound = self.atol + self.rtol * np.abs(xb.astype(np.float64))
            self.differing += int(np.count_nonzero((d != 0) & ~(d.astype(np.float64) <= bound)))
        else:
            self.differing += int(np.count_nonzero(d != 0))
        self.cosine.add(xa.astype(np.float64), xb.astype(np.float64), np)

    def _add_float(self, xa: Any, xb: Any, np: Any, chunk_equal: bool) -> None:
        work = np.complex128 if np.iscomplexobj(xa) or np.iscomplexobj(xb) else np.float64
        fa, fb = xa.astype(work), xb.astype(work)
        if chunk_equal:
            self.cosine.add(fa, fa, np)  # an identical chunk: only the norms are needed
            return
        if self.exact_bits:  # -0.0 != 0.0, equal NaNs match
            ua = xa.view(f"u{xa.dtype.itemsize}") if xa.dtype.itemsize > 1 else xa.view(np.uint8)
            ub = xb.view(f"u{xb.dtype.itemsize}") if xb.dtype.itemsize > 1 else xb.view(np.uint8)
            self.differing += int(np.count_nonzero(ua != ub))
        same = (fa == fb) | (np.isnan(fa) & np.isnan(fb))
        d = np.where(same, 0.0, np.abs(fa - fb))
        # NaN against a number, or inf - inf of opposite signs: infinitely apart.
        np.nan_to_num(d, copy=False, nan=math.inf, posinf=math.inf)
        if d.size:
            self.max_abs = max(self.max_abs, float(d.max()))
        if not self.exact_bits:
            if not self.tolerant:
                self.differing += int(d.size - np.count_nonzero(same))
            else:
                close = np.isclose(fa, fb, rtol=self.rtol, atol=self.atol, equal_nan=True)
                self.differing += int(np.count_nonzero(~(close | same)))
        self.cosine.add(fa, fb, np)


def compare_values(
    ta: ValueTensor, da: TensorBytes, tb: ValueTensor, db: TensorBytes,
    rtol: float | None = None, atol: float | None = None, bar: Any = None,
) -> ValueDiff:
    """Compare two tensors' values (see the module docstring for the rules and the verdict)."""
    if ta.shape != tb.shape:
        return ValueDiff(ta.name, False, reason="shapes differ")
    n = ta.nelements
    cmp = _Compare(ta, tb, rtol, atol)
    for xa, xb in zip(iter_chunks(da, ta.dtype, n), iter_chunks(db, tb.dtype, n)):
        cmp.add(xa, xb)
        if bar is not None:
            bar.update(xa.size * ta.dtype.bits // 8)
    decoded = ta.decoded or tb.decoded
    return ValueDiff(ta.name, True, n, cmp.differing, cmp.max_abs if n else None, cmp.cosine.value(),
                     verdict=_tensor_verdict(cmp.differing, cmp.bit_equal, decoded, cmp.tolerant))


def tensor_value_diff(
    a: AnyCheckpoint, b: AnyCheckpoint, name: str, rtol: float | None = None, atol: float | None = None
) -> ValueDiff:
    """One tensor's value comparison (the viewer's on-demand diff), reading only its bytes.
    ``name`` is the name :func:`diff_files` shows (with a GGUF side, a Hugging Face name when
    GGUF names were mapped)."""
    (ta, da), (tb, db) = value_pair(a, b, name)
    return dataclasses.replace(compare_values(ta, da, tb, db, rtol, atol), name=name)


def value_pair(a: AnyCheckpoint, b: AnyCheckpoint, name: str
               ) -> tuple[tuple[ValueTensor, TensorBytes], tuple[ValueTensor, TensorBytes]]:
    """Tensor ``name``, as :func:`diff_files` shows it, in each checkpoint: its header entry and
    its values (a GGUF name mapped to the Hugging Face one and llama's q/k rows put back, as the
    diff does), for a caller that computes several things from one pair (the viewer)."""
    if a.format == b.format:  # the same names on both sides: nothing to map
        return (a.info(name), a.data(name)), (b.info(name), b.data(name))
    sa, sb, _ = _sides(a, b)
    for side in (sa, sb):
        if name not in side.own:
            raise missing(side.ckpt.path, name)
    (_, ta, da), = _side_stream(sa).items([name])
    (_, tb, db), = _side_stream(sb).items([name])
    return (ta, da), (tb, db)


def shown_names(a: AnyCheckpoint, b: AnyCheckpoint) -> tuple[dict[str, str], dict[str, str]]:
    """Each checkpoint's tensor names as :func:`diff_files` shows them (name -> shown name):
    the same names, except a GGUF compared with a safetensors checkpoint, whose names may be
    mapped to Hugging Face ones."""
    sa, sb, _ = _sides(a, b)
    return {own: shown for shown, own in sa.own.items()}, {own: shown for shown, own in sb.own.items()}


def _check_tolerance(name: str, v: float | None) -> None:
    if v is not None and (not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v)):
        raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")


def diff_files(
    a: AnyCheckpoint | str,
    b: AnyCheckpoint | str,
    values: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    progress: Progress = no_progress,
    *,
    structure_only: bool = False,
    visit: tuple[Visit, Visit] | None = None,
) -> DiffResult:
    """Compare two checkpoints; the result says what was compared and the verdict (see the
    module docstring).

    By default two local checkpoints have their tensor bytes compared and a URL input only its
    structure; ``values`` streams both to compare tensor values (a tolerance, ``rtol``/``atol``,
    implies it); ``structure_only`` reads no tensor byte.  ``visit`` (with ``values``): a
    callable per side, given every tensor of that side and its bytes (held in memory when read
    over the network) in the one pass that compares them.  Either checkpoint may be a GGUF
    file (see the module docstring): the result is a :class:`GGUFDiffResult`.
    """
    _check_tolerance("rtol", rtol)
    _check_tolerance("atol", atol)
    values = values or rtol is not None or atol is not None
    if structure_only and values:
        raise ValueError("structure_only compares no values: it cannot go with values, rtol or atol")
    if visit is not None and not values:
        raise ValueError("visit needs values=True: only a values diff reads every tensor")
    if isinstance(a, (str, os.PathLike)):
        with open_checkpoint(a, gguf=True) as opened:
            return diff_files(opened, b, values, rtol, atol, progress, structure_only=structure_only, visit=visit)
    if isinstance(b, (str, os.PathLike)):
        with open_checkpoint(b, gguf=True) as opened:
            return diff_files(a, opened, values, rtol, atol, progress, structure_only=structure_only, visit=visit)
    if a.format == "gguf" or b.format == "gguf":
        return _diff_gguf(a, b, _mode(a, b, values, structure_only), values, rtol, atol, progress, visit)
    sa, sb = _Stream.of(a), _Stream.of(b)
    ta, tb = sa.infos, sb.infos
    r = DiffResult(a.path, b.path, None, rtol=rtol, atol=atol)
    r.tensors_added = [_desc(tb[n]) for n in sorted(set(tb) - set(ta))]
    r.tensors_removed = [_desc(ta[n]) for n in sorted(set(ta) - set(tb))]
    common = sorted(set(ta) & set(tb))
    for name in common:
        x, y = ta[name], tb[name]
        changes = [k for k, u, v in (("dtype", x.dtype, y.dtype), ("shape", x.shape, y.shape),
                                     ("nbytes", x.nbytes, y.nbytes)) if u != v]
        if changes:
            r.tensors_changed.append(TensorChange(name, _desc(x), _desc(y), changes))
    ma, mb = a.metadata or {}, b.metadata or {}
    r.metadata_added = {k: mb[k] for k in sorted(set(mb) - set(ma))}
    r.metadata_removed = {k: ma[k] for k in sorted(set(ma) - set(mb))}
    r.metadata_changed = {k: {"a": ma[k], "b": mb[k]} for k in sorted(set(ma) & set(mb)) if ma[k] != mb[k]}
    _compare_tensors(r, sa, sb, _mode(a, b, values, structure_only), values, progress, visit)
    return _concluded(r)


def _mode(a: AnyCheckpoint, b: AnyCheckpoint, values: bool, structure_only: bool) -> str:
    """What a diff compares: values when asked; else the bytes of two local checkpoints (their
    values, exactly, for a GGUF against a safetensors checkpoint: their bytes cannot match);
    else (a URL, or ``structure_only``) the structure alone."""
    if values:
        return VALUES
    if structure_only or not (a.local and b.local):
        return STRUCTURE
    return VALUES if a.format != b.format else BYTES


@dataclass
class _Stream:
    """One side of a diff as the comparison reads it, by the names the diff shows (``key``)."""

    ckpt: AnyCheckpoint
    order: list[str]  # every key, in file order
    own: dict[str, str] | None = None  # key -> the checkpoint's name (None: the same)
    #: key -> how a GGUF tensor is read as the Hugging Face tensor it maps to (a mapped GGUF side)
    mapped: dict[str, MappedTensor] = field(default_factory=dict)
    mapped_file: GGUFCheckpoint | None = None  # that GGUF (a mapped side)
    infos: dict[str, TensorInfo] = field(default_factory=dict)  # a Checkpoint's tensors, in file order
    file_of: dict[str, int] = field(default_factory=dict)  # a Checkpoint's tensor -> its file's position

    @classmethod
    def of(cls, ckpt: Checkpoint) -> _Stream:
        infos: dict[str, TensorInfo] = {}
        file_of: dict[str, int] = {}
        for i in range(len(ckpt.files)):
            for t in ckpt.file.part_tensors(i):
                infos[t.name] = t
                file_of[t.name] = i
        return cls(ckpt, list(infos), infos=infos, file_of=file_of)

    def region_view(self) -> RegionView | None:
        """``view(file, offset, length)`` over a local Checkpoint's mapped data regions, or None."""
        if self.ckpt.format != "safetensors" or not self.ckpt.local:
            return None
        regions = self.ckpt.data_regions()
        if not all(capabilities(f.source).view for f, _, _ in regions):
            return None
        views = [(cast(ViewSource, f.source), start) for f, start, _ in regions]
        return lambda i, offset, length: views[i][0].view(views[i][1] + offset, length)

    def name(self, key: str) -> str:
        return self.own[key] if self.own is not None else key

    def items(self, keys: list[str]) -> Iterator[Item]:
        """``(key, tensor, values)`` for each key, in the order given, read ahead over the network."""
        names = [self.name(k) for k in keys]
        pairs: Iterator[tuple[ValueTensor, TensorBytes]]
        if self.mapped_file is not None:
            pairs = mapped_values(self.mapped_file, [self.mapped[k] for k in keys])
        else:
            pairs = iter(stream_tensors(self.ckpt, names))
        return ((k, t, d) for k, (t, d) in zip(keys, pairs))

    def values(self, key: str) -> TensorBytes:
        """One tensor's values (a GGUF's dequantized, in Hugging Face row order when mapped)."""
        if self.mapped_file is not None:
            data: TensorBytes = mapped_bytes(self.mapped_file.file, self.mapped[key])
            return data
        return self.ckpt.data(self.name(key))

    def stored(self, key: str) -> TensorBytes | None:
        """One tensor's bytes as stored; None for a GGUF tensor of a type this version does not
        know (where its bytes end is unknown)."""
        return self.ckpt.stored(self.name(key))

    def nbytes(self, key: str) -> int:
        if key in self.mapped:
            m = self.mapped[key]
            return int(m.dtype.nbytes(math.prod(m.shape)))
        t = self.ckpt.info(self.name(key))
        return int(t.dtype.nbytes(t.nelements))


def _compare_tensors(r: DiffResult, sa: _Stream, sb: _Stream, mode: str, metrics: bool, progress: Progress,
                     visit: tuple[Visit, Visit] | None) -> None:
    """Fill ``r.compared``, ``r.tensors_same_structure``, ``r.tensor_verdicts`` and, with
    ``metrics`` (a values diff asked for), ``r.values``: every tensor both hold compared, with
    its differing count, largest difference and cosine similarity."""
    r.compared = mode
    changed = {c.name for c in r.tensors_changed}
    in_b = set(sb.order)
    same = [k for k in sa.order if k in in_b and k not in changed]  # a's file order
    r.tensors_same_structure = len(same)
    verdicts: dict[str, str] = {}
    if mode == STRUCTURE:
        verdicts = dict.fromkeys(same, VALUES_NOT_COMPARED)
    elif not metrics:  # equal or not, stopping at the first chunk that differs
        verdicts = _compare_bytes(sa, sb, same, mode, progress)
    else:
        common = [k for k in sa.order if k in in_b]
        in_both = set(common)
        keys_a = sa.order if visit is not None else common
        keys_b = sb.order if visit is not None else [k for k in sb.order if k in in_both]
        diffs: list[ValueDiff] = []
        total = 0 if visit is not None else sum(sa.nbytes(k) for k in common)
        with progress(total, "comparing") as bar:

            def on_pair(key: str, ta: ValueTensor, da: TensorBytes, tb: ValueTensor, db: TensorBytes) -> None:
                v = compare_values(ta, da, tb, db, r.rtol, r.atol, bar if visit is None else None)
                diffs.append(dataclasses.replace(v, name=key) if v.name != key else v)

            visit_a, visit_b = visit or (None, None)
            stream_pair(sa.items(keys_a), sb.items(keys_b), set(keys_a), set(keys_b), sb.values, on_pair,
                        visit_a, visit_b, keep=hold if visit is not None else _as_is, b_mapped=sb.ckpt.local)
        r.values = sorted(diffs, key=lambda v: v.name)
        in_same = set(same)
        verdicts = {v.name: v.verdict for v in r.values if v.name in in_same}
    r.tensor_verdicts = dict(sorted(verdicts.items()))


def _as_is(data: TensorBytes) -> TensorBytes:
    return data


def _compare_bytes(sa: _Stream, sb: _Stream, keys: list[str], mode: str, progress: Progress) -> dict[str, str]:
    """Each key's verdict from its bytes as stored (``mode`` BYTES) or its values' bytes (VALUES:
    a GGUF against a safetensors checkpoint), compared in chunks up to the first that differs;
    two mapped safetensors checkpoints in runs of back-to-back tensors (:func:`differing_spans`)."""
    view_a, view_b = sa.region_view(), sb.region_view()
    if mode == BYTES and view_a is not None and view_b is not None:
        spans = []
        for k in keys:
            x, y = sa.infos[k], sb.infos[k]
            spans.append(Span(k, sa.file_of[k], x.begin, sb.file_of[k], y.begin, x.nbytes))
        with progress(sum(s.length for s in spans), "comparing") as bar:
            differ = differing_spans(spans, view_a, view_b, BYTE_CHUNK, bar)
        return {k: VALUES_DIFFER if k in differ else IDENTICAL for k in keys}
    verdicts: dict[str, str] = {}
    pairs: list[tuple[str, TensorBytes, TensorBytes]] = []
    for k in keys:
        da, db = (sa.stored(k), sb.stored(k)) if mode == BYTES else (sa.values(k), sb.values(k))
        if da is None or db is None:
            verdicts[k] = VALUES_NOT_COMPARED  # a GGUF type whose bytes cannot be told apart
        else:
            pairs.append((k, da, db))
    equal = IDENTICAL if mode == BYTES else VALUES_EQUAL
    with progress(sum(len(da) for _, da, _ in pairs), "comparing") as bar:
        for k, da, db in pairs:
            verdicts[k] = equal if equal_bytes(da, db, BYTE_CHUNK, bar) else VALUES_DIFFER
    return verdicts


# --- with a GGUF side ----------------------------------------------------------------------


@dataclass
class _Side:
    """One checkpoint as a diff sees it: tensors under the names shown, in file order."""

    ckpt: AnyCheckpoint
    own: dict[str, str]  # shown name -> the checkpoint's name (a GGUF source tensor for a mapped side)
    descs: dict[str, TensorDesc]  # by shown name
    mapped: dict[str, MappedTensor] = field(default_factory=dict)  # shown name -> how a GGUF tensor is read
    left: dict[str, str] = field(default_factory=dict)  # shown name -> why its rows stay in GGUF order
    layout: dict[str, str] = field(default_factory=dict)  # shown name -> the layout change undone
    dropped: dict[str, str] = field(default_factory=dict)  # GGUF name -> why it is not compared
    warning: str | None = None  # the mapping's caveat (no table for the architecture)
    mapped_file: GGUFCheckpoint | None = None  # the GGUF read under Hugging Face names (a mapped side)


def mapped_values(ckpt: GGUFCheckpoint, tensors: list[MappedTensor]) -> Iterator[tuple[ValueTensor, TensorBytes]]:
    """Each mapped GGUF tensor's values, in the order given, under its Hugging Face name.  Tensors
    read as stored come through the checkpoint's stream (small ones read ahead together on a remote
    source); the others are computed from their GGUF tensors (:mod:`pysafetensors.gguf.hf_bytes`)."""
    direct = [t for t in tensors if reads_as_stored(t)]
    streamed = stream_tensors(ckpt, [t.source for t in direct], {t.source: t.heads for t in direct if t.heads})
    for t in tensors:
        data = next(streamed)[1] if reads_as_stored(t) else mapped_bytes(ckpt.file, t)
        yield MappedValue(t.name, t.dtype, t.shape), data


@dataclass(frozen=True)
class MappedValue:
    """A GGUF tensor as the Hugging Face tensor it maps to (:class:`ValueTensor`)."""

    name: str
    dtype: Any
    shape: tuple[int, ...]

    @property
    def nelements(self) -> int:
        return math.prod(self.shape)

    @property
    def type(self) -> str:
        return str(self.dtype.code)

    @property
    def decoded(self) -> bool:
        return True


def _plain_side(ckpt: AnyCheckpoint) -> _Side:
    descs = {t.name: _desc(t) for t in ckpt.tensors}
    return _Side(ckpt, {n: n for n in descs}, descs)


def _mapped_side(ckpt: GGUFCheckpoint, other: set[str]) -> tuple[_Side, list[str]]:
    """The GGUF's tensors as the Hugging Face checkpoint they map to (:func:`plan_hf`: the
    architecture's table; without one, of the names gguf-py knows for a tensor, the one ``other``
    holds), when that matches more of ``other`` than the GGUF names do."""
    plain = _plain_side(ckpt)
    mapping = plan_hf(ckpt.header)
    candidates = hf_candidates(ckpt.header)
    mapped: dict[str, MappedTensor] = {}
    planned: dict[str, str] = {}  # shown name -> the name plan_hf gave
    for t in mapping.tensors:
        held = [c for c in candidates.get(t.source, []) if c in other] if t.name not in other else []
        if held and t.piece is None:
            # Another checkpoint layout gguf-py knows (Meta's layers.N.attention.wq): that layout is
            # what llama.cpp stored, so the values are compared as they are.
            info = ckpt.file.info(t.source)
            t = MappedTensor(held[0], t.source, info.shape, dtype=value_dtype(info))
        shown = t.name
        if shown in mapped:  # two GGUF names for one HF name: keep the second as it is
            shown = t.source
        mapped[shown] = dataclasses.replace(t, name=shown)
        planned[shown] = t.name
    if len(other & set(mapped)) <= len(other & set(plain.own)):
        return plain, []
    descs = {}
    for shown, t in mapped.items():
        source = plain.descs[t.source]
        share = t.piece[1] if t.piece is not None else 1  # a slice of a split tensor: its share of the bytes
        descs[shown] = TensorDesc(shown, source.dtype, list(t.shape), source.nbytes // share)
    left = {shown: mapping.left_in_gguf_order[name] for shown, name in planned.items()
            if name in mapping.left_in_gguf_order}
    layout = {shown: t.op for shown, t in mapped.items() if t.op and t.op not in ("q", "k")}
    side = _Side(ckpt, {shown: t.source for shown, t in mapped.items()}, descs, mapped, left, layout,
                 dict(mapping.dropped), mapping.warning, ckpt)
    return side, mapping.unmapped


def _sides(a: AnyCheckpoint, b: AnyCheckpoint) -> tuple[_Side, _Side, list[str]]:
    """Both sides; a GGUF against a safetensors checkpoint under Hugging Face names when they
    match more (with the GGUF names gguf-py could not map)."""
    sa, sb = _plain_side(a), _plain_side(b)
    unmapped: list[str] = []
    if a.format == "gguf" and b.format != "gguf":
        sa, unmapped = _mapped_side(a, set(sb.own))
    elif b.format == "gguf" and a.format != "gguf":
        sb, unmapped = _mapped_side(b, set(sa.own))
    return sa, sb, unmapped


def _typed_metadata(ckpt: GGUFCheckpoint) -> dict[str, tuple[str, str]]:
    return {k: (f.type_name, metadata_string(f.type, f.value)) for k, f in ckpt.header.fields.items()}


def _diff_gguf(a: AnyCheckpoint, b: AnyCheckpoint, mode: str, values: bool, rtol: float | None, atol: float | None,
               progress: Progress, visit: tuple[Visit, Visit] | None) -> GGUFDiffResult:
    r = GGUFDiffResult(a.path, b.path, None, rtol=rtol, atol=atol,
                       formats=[a.format, b.format])
    sa, sb, r.unmapped = _sides(a, b)
    for side in (sa, sb):
        if side.mapped_file is not None:
            r.architecture = side.mapped_file.header.architecture
            r.names_mapped = sum(1 for shown, name in side.own.items() if shown != name)
            r.unpermuted = sorted(shown for shown, t in side.mapped.items() if t.op in ("q", "k"))
            r.left_in_gguf_order = dict(sorted(side.left.items()))
            r.layout_changes = dict(sorted(side.layout.items()))
            r.dropped = side.dropped
            r.warning = side.warning
    da, db = sa.descs, sb.descs
    r.tensors_added = [db[n] for n in sorted(set(db) - set(da))]
    r.tensors_removed = [da[n] for n in sorted(set(da) - set(db))]
    common = sorted(set(da) & set(db))
    for name in common:
        x, y = da[name], db[name]
        changes = [k for k in ("dtype", "shape", "nbytes") if getattr(x, k) != getattr(y, k)]
        if changes:
            r.tensors_changed.append(TensorChange(name, x, y, changes))
    if a.format == "gguf" and b.format == "gguf":
        ma, mb = _typed_metadata(a), _typed_metadata(b)
        r.metadata_added = {k: mb[k][1] for k in sorted(set(mb) - set(ma))}
        r.metadata_removed = {k: ma[k][1] for k in sorted(set(ma) - set(mb))}
        for k in sorted(set(ma) & set(mb)):
            (ta, va), (tb, vb) = ma[k], mb[k]
            if (ta, va) != (tb, vb):
                r.metadata_changed[k] = {"a": va, "b": vb} if ta == tb else {"a": f"{va} ({ta})", "b": f"{vb} ({tb})"}
    else:
        r.metadata_compared = False
    _compare_tensors(r, _side_stream(sa), _side_stream(sb), mode, values, progress, visit)
    return _concluded(r)


def _side_stream(side: _Side) -> _Stream:
    return _Stream(side.ckpt, list(side.own), side.own, side.mapped, side.mapped_file)
