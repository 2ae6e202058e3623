"""GGUF, llama.cpp's weight format, beside safetensors.

``header`` parses a GGUF header from any byte source (bounded before every allocation),
``check`` lists layout problems, ``reader`` reads tensors (dequantizing through gguf-py, the
``gguf`` extra), ``identity`` computes weight-inspect's structural ID, ``names`` maps tensor
names to Hugging Face's, and ``convert`` streams a GGUF into a safetensors file.
"""

from .check import GGUFProblem, check_layout, require_valid
from .header import (
    GGUFArray,
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
    "GGUFArray",
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
