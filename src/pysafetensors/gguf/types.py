"""GGUF's two type tables: metadata value types and GGML tensor types.

These are facts of the file format (llama.cpp's ``ggml.h`` / gguf-py's ``constants.py``): the
header parser needs them to know how many bytes each field and tensor takes, with or without
the ``gguf`` extra installed.  A test checks the GGML table against gguf-py's
``GGML_QUANT_SIZES`` so the two cannot drift apart; dequantizing is left to gguf-py.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from ..format._frame import GGUF_MAGIC

MAGIC = GGUF_MAGIC
DEFAULT_ALIGNMENT = 32
VERSIONS = (1, 2, 3)


class ValueType(IntEnum):
    """The type tag of a metadata value (and of an array's items)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


#: struct format of each fixed-size value type (little-endian).
SCALAR_FORMATS: dict[ValueType, str] = {
    ValueType.UINT8: "B",
    ValueType.INT8: "b",
    ValueType.UINT16: "H",
    ValueType.INT16: "h",
    ValueType.UINT32: "I",
    ValueType.INT32: "i",
    ValueType.FLOAT32: "f",
    ValueType.BOOL: "?",
    ValueType.UINT64: "Q",
    ValueType.INT64: "q",
    ValueType.FLOAT64: "d",
}
SCALAR_SIZES: dict[ValueType, int] = {t: struct.calcsize("<" + f) for t, f in SCALAR_FORMATS.items()}


@dataclass(frozen=True)
class GGMLType:
    """One GGML tensor type: ``block_elements`` values are stored in ``block_bytes`` bytes."""

    id: int
    name: str  # as llama.cpp spells it: F32, Q4_K, BF16...
    block_elements: int
    block_bytes: int

    @property
    def lower(self) -> str:
        return self.name.lower()


_QK_K = 256

_GGML_ROWS: tuple[tuple[int, str, int, int], ...] = (
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 2 + 16),
    (3, "Q4_1", 32, 2 + 2 + 16),
    (6, "Q5_0", 32, 2 + 4 + 16),
    (7, "Q5_1", 32, 2 + 2 + 4 + 16),
    (8, "Q8_0", 32, 2 + 32),
    (9, "Q8_1", 32, 4 + 4 + 32),
    (10, "Q2_K", 256, 2 + 2 + _QK_K // 16 + _QK_K // 4),
    (11, "Q3_K", 256, 2 + _QK_K // 4 + _QK_K // 8 + 12),
    (12, "Q4_K", 256, 2 + 2 + _QK_K // 2 + 12),
    (13, "Q5_K", 256, 2 + 2 + _QK_K // 2 + _QK_K // 8 + 12),
    (14, "Q6_K", 256, 2 + _QK_K // 2 + _QK_K // 4 + _QK_K // 16),
    (15, "Q8_K", 256, 4 + _QK_K + _QK_K // 8),
    (16, "IQ2_XXS", 256, 2 + _QK_K // 4),
    (17, "IQ2_XS", 256, 2 + _QK_K // 4 + _QK_K // 32),
    (18, "IQ3_XXS", 256, 2 + _QK_K // 4 + _QK_K // 8),
    (19, "IQ1_S", 256, 2 + _QK_K // 8 + _QK_K // 16),
    (20, "IQ4_NL", 32, 2 + 16),
    (21, "IQ3_S", 256, 2 + _QK_K // 4 + _QK_K // 8 + _QK_K // 32 + 4),
    (22, "IQ2_S", 256, 2 + _QK_K // 4 + _QK_K // 16),
    (23, "IQ4_XS", 256, 2 + 2 + _QK_K // 2 + _QK_K // 64),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, _QK_K // 8 + _QK_K // 16 + _QK_K // 32),
    (30, "BF16", 1, 2),
    (34, "TQ1_0", 256, 2 + 4 * 13),
    (35, "TQ2_0", 256, 2 + 64),
    (39, "MXFP4", 32, 1 + 16),
    (40, "NVFP4", 64, 4 + 32),
    (41, "Q1_0", 128, 2 + 16),
)

GGML_TYPES: dict[int, GGMLType] = {row[0]: GGMLType(*row) for row in _GGML_ROWS}

#: element types stored as plain little-endian numbers, with their safetensors dtype code
PLAIN_TYPES: dict[str, str] = {name: name for name in ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")}


def ggml_type_name(type_id: int) -> str:
    """The lowercase GGML type name, ``unknown_<n>`` for ids this table does not list."""
    t = GGML_TYPES.get(type_id)
    return t.lower if t is not None else f"unknown_{type_id}"


__all__ = [
    "DEFAULT_ALIGNMENT",
    "GGML_TYPES",
    "MAGIC",
    "PLAIN_TYPES",
    "SCALAR_FORMATS",
    "SCALAR_SIZES",
    "VERSIONS",
    "GGMLType",
    "ValueType",
    "ggml_type_name",
]


def byte_range(key: object, length: int, what: str) -> tuple[int, int]:
    """``[start, stop)`` of a contiguous byte-range slice of ``length`` bytes (``stop >= start``):
    the byte views of decoded tensors support only that form of indexing."""
    if not isinstance(key, slice):
        raise TypeError(f"{what} supports byte-range slices only")
    start, stop, step = key.indices(length)
    if step != 1:
        raise ValueError(f"{what} slices must be contiguous")
    return start, max(start, stop)
