"""Convert any checkpoint the ``convert`` command takes: the command's library function.

A GGUF file (recognised by its magic, never its name; a local file or a URL) goes to
:func:`pysafetensors.gguf.convert.convert_gguf`: ``dtype`` and ``hf_names`` apply to it (and
only to it), its tensors are dequantized and written a chunk at a time.  Anything else goes to
:func:`pysafetensors.convert.convert_file` (PyTorch zip or legacy, ``.npy``/``.npz``), which
runs no pickle code and verifies what it wrote.  A pipe or other stream (``/dev/stdin``) is
copied to a temporary file first (:mod:`pysafetensors.io.spool`, bounded by ``max_input_size``),
once, so it can be sniffed and then read by offset like a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ..convert import ConversionReport, convert_file
from ..errors import SafetensorError
from ..format.dtypes import BY_CODE
from ..gguf.convert import GGUFConversion, convert_gguf, output_code, plan_tensors
from ..gguf.reader import GGUFFile
from ..gguf.split import PartOpener, open_gguf
from ..io.locate import locate, sniff, spool_stream
from ..io.protocols import ByteSource
from ..io.redact import redact_url
from ..io.registry import open_source, url_scheme
from ._base import JsonResult, Progress, no_progress
from .checkpoint import name_input


@dataclass
class GGUFConversionResult(JsonResult):
    """A GGUF file converted: where from (``source``, as shown), its GGUF version, and what was written."""

    source: str
    version: int
    conversion: GGUFConversion

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``source``, ``source_kind`` ("gguf"), ``gguf_version``, the
        conversion's fields, and ``destination`` (the output)."""
        d = {"source": self.source, "source_kind": "gguf", "gguf_version": self.version, **self.conversion.__dict__}
        d["destination"] = d.pop("output")
        return d


def gguf_output_bytes(gguf: GGUFFile, dtype: str, hf: bool = False) -> int:
    """Tensor bytes the conversion of ``gguf`` under ``dtype`` writes; refuses ``dtype="keep"``
    on a quantized tensor (GGUFUnsupported) before anything is written."""
    total = 0
    for t in plan_tensors(gguf.header, hf).tensors:
        info = gguf.info(t.source)
        total += t.nelements * BY_CODE[output_code(info.type_name, dtype, info.name, t.dtype)].bits // 8
    return total


def _convert_gguf(source: ByteSource, shown: str, output: str, key: str | None, dtype: str | None,
                  hf_names: bool, metadata: Mapping[str, str] | None, progress: Progress,
                  open_part: PartOpener | None = None) -> GGUFConversionResult:
    if key is not None:
        source.close()
        raise ValueError("--key selects a subtree of a pickle checkpoint; a GGUF file is converted whole")
    try:
        with open_gguf(source, open_part=open_part) as gguf:
            chosen = dtype or "f32"
            total = gguf_output_bytes(gguf, chosen, hf_names)
            with progress(total, "converting") as bar:
                report = convert_gguf(gguf, output, dtype=chosen, hf=hf_names, progress=bar.update,
                                      durable=True, metadata=metadata)
    except SafetensorError as e:
        name_input(shown, e)
        raise
    return GGUFConversionResult(shown, gguf.version, report)


def convert_checkpoint(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    key: str | None = None,
    verify: bool = True,
    metadata: Mapping[str, str] | None = None,
    dtype: str | None = None,
    hf_names: bool = False,
    progress: Progress = no_progress,
    storage_options: Mapping[str, Any] | None = None,
    max_input_size: int | None = None,
) -> ConversionReport | GGUFConversionResult:
    """Convert the checkpoint at ``path`` to a safetensors file at ``output`` (see the module
    docstring).  ``key``/``verify`` apply to pickle and numpy inputs, ``dtype``/``hf_names`` to
    GGUF ones (given for another kind: ValueError); ``metadata`` entries are added to the
    output's.  ``storage_options`` go to a remote input; ``max_input_size`` caps what is copied
    of a stream (:mod:`pysafetensors.io.spool`).  A failed verification raises
    :class:`~pysafetensors.errors.VerificationFailed` carrying the report."""
    path, output = os.fspath(path), os.fspath(output)
    # A stream is copied whole (a pickle's readers seek to its end), once; then sniffed like a file.
    copy = spool_stream(path, max_input_size=max_input_size, wanted="checkpoint to convert")
    with nullcontext() if copy is None else copy:
        if copy is None:
            try:
                found = locate(path, storage_options)
            except (OSError, SafetensorError):
                if url_scheme(path) is not None:
                    raise
                found = None  # a local file that cannot be opened: convert_file says what is wrong with it
            source = found.take_source() if found is not None and found.format == "gguf" else None
            siblings = found.sibling_opener() if found is not None else None  # a split set converts whole
            if found is not None:
                found.close()
        else:
            source = open_source(copy)
            siblings = None  # a copied stream has no other files to open
            if sniff(source) != "gguf":
                source.close()
                source = None
        if source is not None:
            return _convert_gguf(source, redact_url(path), output, key, dtype, hf_names, metadata, progress,
                                 siblings)
        if dtype is not None or hf_names:
            raise ValueError("--dtype and --hf-names apply to GGUF inputs; this input is not a GGUF file")
        return convert_file(path, output, key=key, verify=verify, metadata=metadata, fileobj=copy)


__all__ = ["GGUFConversionResult", "convert_checkpoint", "gguf_output_bytes"]
