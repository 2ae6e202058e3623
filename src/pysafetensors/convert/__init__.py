"""Safe conversion of PyTorch checkpoints and numpy files to safetensors.

Pickles are read by an allowlist unpickler (no imports, no calls outside a fixed table of
numpy-based stand-ins), so converting an untrusted checkpoint runs none of its code, and torch
need not be installed.
"""

from __future__ import annotations

from .api import ConversionReport, convert_file, load_checkpoint

__all__ = ["ConversionReport", "convert_file", "load_checkpoint"]
