"""GGUF -> safetensors, streamed a few megabytes at a time.

The output's layout is planned from the GGUF header alone (names, dtypes, shapes) and its
header written first (:class:`~pysafetensors.writer.IncrementalWriter`); then each tensor is
read, dequantized (gguf-py), cast and written in chunks of whole rows (or, for un-permuted q/k
weights, whole attention heads), so peak memory is a chunk, not a tensor and never the model.
The file appears only when complete (temp file + rename; a URL output is staged locally and
uploaded all or nothing).  GGUF metadata is kept as
``gguf.<key>`` string entries of ``__metadata__`` (numbers in decimal, booleans
``true``/``false``, arrays as JSON) plus ``gguf.version``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._adapters.numpy import numpy_dtype
from ..errors import GGUFError, GGUFUnsupported
from ..format.dtypes import BY_CODE, DType
from ..io.redact import redact_url
from ..writer import IncrementalWriter
from .header import GGUFArray, GGUFHeader, GGUFNumbers
from .hf_bytes import mapped_bytes
from .hf_map import HFMapping, MappedTensor, plan_hf
from .reader import GGUFFile, value_dtype
from .types import PLAIN_TYPES, ValueType
from .values import joined_text

DTYPES = ("f32", "f16", "bf16", "keep")
#: elements decoded and written at a time (rounded to whole rows or heads): 8 MiB of float32
CHUNK_ELEMENTS = 1 << 21


@dataclass
class GGUFConversion:
    """What a conversion wrote: tensor count, bytes, and with ``--hf-names`` what the mapping did."""

    output: str
    tensors: int = 0
    bytes_written: int = 0
    renamed: int = 0
    #: GGUF names written as they are (no Hugging Face name for them)
    unmapped: list[str] = field(default_factory=list)
    #: output names whose q/k rows were put back in Hugging Face order
    unpermuted: list[str] = field(default_factory=list)
    #: output name -> the layout change undone (``T``, ``minus1``, ``split``...: :data:`~.hf_tables.OPS`)
    layout_changes: dict[str, str] = field(default_factory=dict)
    #: GGUF name -> why it was not written (a tensor llama.cpp generated that the checkpoint lacks)
    dropped: dict[str, str] = field(default_factory=dict)
    #: output name -> why its rows were written in GGUF order although llama.cpp may have
    #: rearranged them (q/k of an architecture not known either way, rows that do not split)
    left_in_gguf_order: dict[str, str] = field(default_factory=dict)
    #: a caveat on the whole file (an architecture without a table: gguf-py's names, not checked)
    warning: str | None = None
    dtype: str = "f32"
    architecture: str | None = None


_SEPARATORS = (",", ":")
#: items of a numeric array written as JSON at a time (a bounded number of Python objects)
_CHUNK = 1 << 16


def metadata_string(value_type: ValueType, value: Any) -> str:
    """A GGUF metadata value as a safetensors metadata string."""
    if value_type is ValueType.STRING:
        return str(value)
    if isinstance(value, GGUFArray):
        return _json_array(value)
    if value_type is ValueType.BOOL:
        value = bool(value)
    return json.dumps(value, ensure_ascii=False, separators=_SEPARATORS)


def _json_array(array: GGUFArray) -> str:
    """``json.dumps`` of the array as a list, compact; a numeric one a chunk of items at a time."""
    items = array.items
    if isinstance(items, GGUFNumbers):
        parts = [json.dumps(items[lo : lo + _CHUNK], separators=_SEPARATORS)[1:-1]
                 for lo in range(0, len(items), _CHUNK)]
    elif array.item_type is ValueType.ARRAY:  # items made when read: their text joined a chunk at a time
        return "[" + joined_text(items, _json_array, ",") + "]"
    else:
        return json.dumps(list(items), ensure_ascii=False, separators=_SEPARATORS)
    return "[" + ",".join(parts) + "]"


def gguf_metadata(header: GGUFHeader) -> dict[str, str]:
    meta = {f"gguf.{k}": metadata_string(f.type, f.value) for k, f in header.fields.items()}
    meta["gguf.version"] = str(header.version)
    return meta


def output_code(type_name: str, dtype: str, tensor: str, values: DType) -> str:
    """The safetensors dtype code a GGML type converts to under ``--dtype`` (``values``: the
    dtype of the values written, which a layout change may make other than the type's own)."""
    upper = type_name.upper()
    if dtype == "keep":
        if upper not in PLAIN_TYPES:
            raise GGUFUnsupported(
                f"tensor {tensor!r} is quantized ({type_name}); --dtype keep writes only F32/F16/BF16/F64/"
                "I8-I64 tensors: choose --dtype f32, f16 or bf16 to dequantize it",
                tensor=tensor,
                ggml_type=type_name,
            )
        return values.code
    if upper in PLAIN_TYPES and upper.startswith("I"):
        return upper  # integer tensors (token ids, positions) are not floats to cast
    return dtype.upper()  # f32, f16, bf16: the dtype codes F32, F16, BF16


def cast_values(values: Any, to: Any) -> Any:
    """``values`` (numpy) cast to the numpy dtype ``to``.  A float32 NaN cast to bfloat16 keeps its
    sign and the top of its payload, quieted (the top 16 bits with the quiet bit set, as the x86
    and Arm bfloat16 conversion instructions do), where ml_dtypes makes every NaN 0x7FC0/0xFFC0."""
    import numpy as np

    with np.errstate(invalid="ignore"):  # NaN (and inf to an integer-less float type) is cast on purpose
        out = values.astype(to)
    if values.dtype == np.float32 and to.itemsize == 2 and to.kind == "V":  # bfloat16 (ml_dtypes)
        nan = np.isnan(values)
        if nan.any():
            top = (values.view(np.uint32)[nan] >> 16).astype(np.uint16)
            out.view(np.uint16)[nan] = top | np.uint16(0x0040)
    return out


@dataclass(frozen=True)
class _Planned:
    tensor: MappedTensor
    dtype: DType


def plan_tensors(header: GGUFHeader, hf: bool) -> HFMapping:
    """The output tensors: the Hugging Face checkpoint (:func:`~.hf_map.plan_hf`) with ``hf``,
    else every tensor under its GGUF name, as stored."""
    if hf:
        return plan_hf(header)
    return HFMapping(header.architecture, [MappedTensor(t.name, t.name, t.shape, dtype=value_dtype(t))
                                           for t in header.tensors])


def _plan(gguf: GGUFFile, dtype: str, hf: bool, report: GGUFConversion) -> list[_Planned]:
    mapping = plan_tensors(gguf.header, hf)
    report.unmapped = list(mapping.unmapped) if hf else []
    report.dropped = dict(mapping.dropped)
    report.left_in_gguf_order = dict(mapping.left_in_gguf_order)
    report.warning = mapping.warning
    planned: list[_Planned] = []
    taken: dict[str, str] = {}
    for t in mapping.tensors:
        info = gguf.info(t.source)
        if info.ggml_type is None:
            raise GGUFUnsupported(f"tensor {info.name!r} has unknown GGML type {info.type_id}: it cannot be "
                                  "converted", tensor=info.name, type_id=info.type_id)
        code = output_code(info.type_name, dtype, info.name, t.dtype)
        if t.name in taken:
            raise GGUFError(f"tensors {taken[t.name]!r} and {t.source!r} would both be written as {t.name!r}",
                            tensor=t.source)
        taken[t.name] = t.source
        if t.name != t.source:
            report.renamed += 1
        if t.op in ("q", "k"):
            report.unpermuted.append(t.name)
        elif t.op:
            report.layout_changes[t.name] = t.op
        planned.append(_Planned(t, BY_CODE[code]))
    return planned


def convert_gguf(
    gguf: GGUFFile,
    output: str | os.PathLike[str],
    *,
    dtype: str = "f32",
    hf: bool = False,
    progress: Callable[[int], None] | None = None,
    durable: bool | None = None,
    metadata: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> GGUFConversion:
    """Write every tensor of ``gguf`` to ``output`` as safetensors (atomic: temp file + rename).

    ``output`` may be an fsspec URL (``s3://bucket/model.safetensors``, ``memory://...``;
    ``storage_options`` for its filesystem, as for reading): the incremental writer stages the
    file in a local temp file and uploads it when complete, all or nothing, as ``convert_file``
    and ``open_writer`` do (the output is byte-identical to a local conversion).

    Args:
        dtype: ``f32``/``f16``/``bf16`` dequantize float tensors to that type (integer tensors
            keep theirs); ``keep`` writes plain tensors as they are and refuses quantized ones
            (before anything is written).
        hf: write the Hugging Face checkpoint the file was converted from, by the architecture's
            table (:mod:`pysafetensors.gguf.hf_tables`): its names, and every layout change
            llama.cpp made undone (q/k rows, transposes, ``w + 1`` norms, stacked experts split,
            fused q/k/v regrouped...; ``layout_changes``).  Tensors llama.cpp generated are left
            out (``dropped``), names with no rule keep their GGUF name (``unmapped``), tensors
            written as stored although llama.cpp may have rearranged them are listed in
            ``left_in_gguf_order``; an architecture without a table gets gguf-py's names and
            ``warning`` says so.
        progress: called with the output byte count of each chunk as it is written.
        metadata: extra ``__metadata__`` entries, added to (and winning over) the ``gguf.*`` ones.
    """
    import numpy as np

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    report = GGUFConversion(redact_url(os.fspath(output)), dtype=dtype, architecture=gguf.header.architecture)
    planned = _plan(gguf, dtype, hf, report)
    meta = {**gguf_metadata(gguf.header), **(metadata or {})}
    specs = {p.tensor.name: (p.dtype, p.tensor.shape) for p in planned}
    with IncrementalWriter(output, specs, meta, durable=durable, storage_options=storage_options) as writer:
        for p in planned:
            out_type = numpy_dtype(p.dtype)
            values = mapped_bytes(gguf, p.tensor)
            in_type = numpy_dtype(values.dtype)
            unit = max(values.unit, 1)
            step = max(CHUNK_ELEMENTS // unit, 1) * unit
            offset = 0
            for e0 in range(0, values.n, step):
                e1 = min(e0 + step, values.n)
                chunk = np.frombuffer(values[e0 * values.itemsize : e1 * values.itemsize], dtype=in_type)
                out = chunk if chunk.dtype == out_type else cast_values(chunk, out_type)
                writer.write_chunk(p.tensor.name, offset, out.view(np.uint8))
                offset += out.nbytes
                if progress is not None:
                    progress(out.nbytes)
            report.tensors += 1
            report.bytes_written += offset
    return report


__all__ = ["CHUNK_ELEMENTS", "DTYPES", "GGUFConversion", "convert_gguf", "gguf_metadata", "metadata_string",
           "output_code"]
