"""GGUF -> safetensors, streamed one tensor at a time.

The output's layout is planned from the GGUF header alone (names, dtypes, shapes), then each
tensor is read, dequantized (gguf-py) and cast only when the writer reaches it, so peak memory
is about the largest tensor, not the model.  GGUF metadata is kept as ``gguf.<key>`` string
entries of ``__metadata__`` (numbers in decimal, booleans ``true``/``false``, arrays as JSON).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._adapters.numpy import numpy_dtype
from ..errors import GGUFUnsupported
from ..format.dtypes import BY_CODE
from ..writer import WriteItem, write_file
from .header import GGUFArray, GGUFHeader
from .names import hf_names, qk_heads, unpermute_qk
from .reader import GGUFFile
from .types import PLAIN_TYPES, ValueType

DTYPES = ("f32", "f16", "bf16", "keep")
_FLOAT_CODES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
_INTEGER_CODES = frozenset({"I8", "I16", "I32", "I64"})


@dataclass
class GGUFConversion:
    """What a conversion wrote: tensor count, bytes, the names it could not map back."""

    output: str
    tensors: int = 0
    bytes_written: int = 0
    renamed: int = 0
    unmapped: list[str] = field(default_factory=list)
    unpermuted: list[str] = field(default_factory=list)


def metadata_string(value_type: ValueType, value: Any) -> str:
    """A GGUF metadata value as a safetensors metadata string."""
    if value_type is ValueType.STRING:
        return str(value)
    return json.dumps(_plain(value_type, value), ensure_ascii=False, separators=(",", ":"))


def _plain(value_type: ValueType, value: Any) -> Any:
    if isinstance(value, GGUFArray):
        return [_plain(value.item_type, v) for v in value.items]
    if value_type is ValueType.BOOL:
        return bool(value)
    return value


def gguf_metadata(header: GGUFHeader) -> dict[str, str]:
    meta = {f"gguf.{k}": metadata_string(f.type, f.value) for k, f in header.fields.items()}
    meta["gguf.version"] = str(header.version)
    return meta


def output_code(type_name: str, dtype: str, tensor: str) -> str:
    """The safetensors dtype code a GGML type converts to under ``--dtype``."""
    upper = type_name.upper()
    if dtype == "keep":
        if upper not in PLAIN_TYPES:
            raise GGUFUnsupported(
                f"tensor {tensor!r} is quantized ({type_name}); --dtype keep writes only F32/F16/BF16/F64/"
                "I8-I64 tensors: choose --dtype f32, f16 or bf16 to dequantize it",
                tensor=tensor,
            )
        return PLAIN_TYPES[upper]
    if upper in PLAIN_TYPES and PLAIN_TYPES[upper] in _INTEGER_CODES:
        return PLAIN_TYPES[upper]  # integer tensors (token ids, positions) are not floats to cast
    return _FLOAT_CODES[dtype]


def convert_gguf(
    gguf: GGUFFile,
    output: str | os.PathLike[str],
    *,
    dtype: str = "f32",
    hf: bool = False,
    progress: Callable[[int], None] | None = None,
    durable: bool | None = None,
) -> GGUFConversion:
    """Write every tensor of ``gguf`` to ``output`` as safetensors (atomic: temp file + rename).

    Args:
        dtype: ``f32``/``f16``/``bf16`` dequantize float tensors to that type; ``keep`` writes
            plain tensors as they are and refuses quantized ones.
        hf: use Hugging Face names where gguf-py knows the architecture, undoing llama.cpp's
            q/k permutation; names it cannot map keep their GGUF name (listed in ``unmapped``).
        progress: called with each tensor's output byte count as it is written.
    """
    import numpy as np

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    header = gguf.header
    report = GGUFConversion(os.fspath(output))
    mapping = hf_names(header) if hf else None
    if mapping is not None:
        report.unmapped = list(mapping.unmapped)
    items: list[WriteItem] = []
    for info in header.tensors:
        code = output_code(info.type_name, dtype, info.name)
        out_dtype = BY_CODE[code]
        out_name = mapping.hf.get(info.name, info.name) if mapping is not None else info.name
        heads = qk_heads(header, info.name) if mapping is not None and out_name != info.name else None
        if out_name != info.name:
            report.renamed += 1
        if heads is not None:
            report.unpermuted.append(out_name)

        def get_bytes(info: Any = info, out_dtype: Any = out_dtype, heads: int | None = heads) -> Any:
            values = gguf.array(info.name)
            if heads is not None:
                values = unpermute_qk(values, heads)
            out = np.ascontiguousarray(values.astype(numpy_dtype(out_dtype), copy=False))
            if progress is not None:
                progress(out.nbytes)
            report.tensors += 1
            report.bytes_written += out.nbytes
            return out.reshape(-1).view(np.uint8)

        items.append(WriteItem(out_name, out_dtype, tuple(info.shape), get_bytes))
    write_file(items, output, gguf_metadata(header), durable=durable)
    return report


__all__ = ["DTYPES", "GGUFConversion", "convert_gguf", "gguf_metadata", "metadata_string", "output_code"]
