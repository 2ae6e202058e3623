"""weight-inspect's structural ID of a GGUF file: ``wi:gguf:<version>:<8 hex>``.

The ID is the SHA-256 of a compact JSON document built from the header alone (metadata and
tensor descriptions, no tensor data), so two files with the same structure and metadata get
the same ID wherever they are and however they were written.  Each metadata value is first
turned into a canonical string (below), which keeps integer types, float bit patterns and
string escapes exact.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

from .header import GGUFArray, GGUFHeader, GGUFNumbers
from .types import ValueType
from .values import joined_text

#: GGML types weight-inspect has no name for, named as it names them (``unknown_<id>``), so that a
#: file holding them gets weight-inspect's ID: NVFP4 (40), which its type table predates
WI_UNKNOWN_TYPES = frozenset({40})
#: bytes per element for the types weight-inspect counts; every other (quantized) type counts 0
_ELEMENT_BYTES = {"f32": 4, "i32": 4, "f16": 2, "i16": 2, "bf16": 2, "i8": 1, "i64": 8, "f64": 8}
#: str.translate table: C0 controls and DEL as \u00XX; the quote, the backslash, \n, \r and \t as short escapes
_ESCAPES = {c: f"\\u{c:04x}" for c in (*range(0x20), 0x7F)} | {
    ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def _escape(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


#: items of a numeric array turned into text at a time (a bounded number of Python objects)
_CHUNK = 1 << 16


def canonical_value(value_type: ValueType, value: Any) -> str:
    """The canonical string of one metadata value (recursing into arrays)."""
    if value_type is ValueType.ARRAY:
        assert isinstance(value, GGUFArray)
        items = value.items
        if isinstance(items, GGUFNumbers):
            parts = [",".join(_canonical_numbers(value.item_type, items[lo : lo + _CHUNK]))
                     for lo in range(0, len(items), _CHUNK)]
            return "[" + ",".join(parts) + "]"
        # Strings, or arrays (made as they are read): their text joined a chunk at a time.
        return "[" + joined_text(items, lambda item: canonical_value(value.item_type, item), ",") + "]"
    if value_type is ValueType.STRING:
        return _escape(value)
    if value_type is ValueType.BOOL:
        return "true" if value else "false"
    if value_type is ValueType.FLOAT64:
        return str(struct.unpack("<Q", struct.pack("<d", value))[0])
    if value_type is ValueType.FLOAT32:  # kept as f64 by that tool: the widened value's bits
        return "f32:" + str(struct.unpack("<Q", struct.pack("<d", float(value)))[0])
    return str(int(value))


def _canonical_numbers(value_type: ValueType, values: list[Any]) -> list[str]:
    """:func:`canonical_value` of each of ``values`` (numbers or booleans of one type)."""
    if value_type is ValueType.BOOL:
        return ["true" if v else "false" for v in values]
    if value_type in (ValueType.FLOAT32, ValueType.FLOAT64):
        n = len(values)
        bits = struct.unpack(f"<{n}Q", struct.pack(f"<{n}d", *values))  # float32 widened, as above
        prefix = "f32:" if value_type is ValueType.FLOAT32 else ""
        return [prefix + str(b) for b in bits]
    return [str(int(v)) for v in values]


@dataclass(frozen=True)
class GGUFIdentity:
    """The full SHA-256 and the short ``wi:gguf:<version>:<8 hex>`` form."""

    sha256: str
    short: str
    version: int


def identity_document(header: GGUFHeader) -> bytes:
    """The exact bytes that are hashed."""
    metadata = {k: canonical_value(f.type, f.value) for k, f in sorted(header.fields.items())}
    tensors = {}
    for t in sorted(header.tensors, key=lambda t: t.name):
        dtype = f"unknown_{t.type_id}" if t.type_id in WI_UNKNOWN_TYPES else t.type_name
        tensors[t.name] = {
            "name": t.name,
            "dtype": dtype,
            "shape": list(t.dims),
            "byte_length": t.n_elements * _ELEMENT_BYTES.get(dtype, 0),
        }
    doc = {"format": "gguf", "gguf_version": header.version, "metadata": metadata, "tensors": tensors}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def gguf_identity(header: GGUFHeader) -> GGUFIdentity:
    digest = hashlib.sha256(identity_document(header)).hexdigest()
    return GGUFIdentity(digest, f"wi:gguf:{header.version}:{digest[:8]}", header.version)


__all__ = ["WI_UNKNOWN_TYPES", "GGUFIdentity", "canonical_value", "gguf_identity", "identity_document"]
