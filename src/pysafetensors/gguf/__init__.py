"""GGUF, llama.cpp's weight format, beside safetensors.

``header`` parses a GGUF header from any byte source (bounded before every allocation),
``values`` holds its metadata compactly (numeric arrays as bytes, arrays of arrays as bytes
and offsets), ``check`` lists layout problems, ``reader`` reads tensors (dequantizing through gguf-py, the
``gguf`` extra), ``identity`` computes weight-inspect's structural ID, ``names`` maps tensor
names to Hugging Face's, and ``convert`` streams a GGUF into a safetensors file.
"""

from .check import GGUFProblem, check_layout, require_valid
from .header import (
    MAX_METADATA_KEYS,
    MAX_NESTED_ARRAYS,
    GGUFArray,
    GGUFArrays,
    GGUFField,
    GGUFHeader,
    GGUFNumbers,
    GGUFTensorInfo,
    is_gguf,
    parse_gguf_bytes,
    parse_gguf_header,
)
from .reader import GGUFFile

__all__ = [
    "MAX_METADATA_KEYS",
    "MAX_NESTED_ARRAYS",
    "GGUFArray",
    "GGUFArrays",
    "GGUFField",
    "GGUFFile",
    "GGUFHeader",
    "GGUFNumbers",
    "GGUFProblem",
    "GGUFTensorInfo",
    "check_layout",
    "is_gguf",
    "parse_gguf_bytes",
    "parse_gguf_header",
    "require_valid",
]
