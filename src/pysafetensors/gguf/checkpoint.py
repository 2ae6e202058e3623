"""A GGUF file (or split set) as the tools open it: GGUF's :class:`~pysafetensors.reader.TensorFile`.

Its tensors (:class:`~pysafetensors.gguf.reader.GGUFTensor`) have the ``dtype``/``shape`` of their
*values* (PyTorch's order; F32 for quantized types, which gguf-py dequantizes); ``data(name)`` gives
those values as bytes that decode on slicing, so chunked tools stream a quantized tensor a few rows at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, ClassVar, Literal, NoReturn

from ..errors import FileClosed, GGUFUnsupported, TensorNotFound
from ..io.redact import redact_url
from ..io.registry import url_scheme
from ..reader import RangedBytes, RawTensor
from .header import GGUFField, GGUFHeader
from .reader import DecodedBytes, GGUFFile, GGUFTensor

if TYPE_CHECKING:
    from ..format.slicing import SlicePlan


class GGUFCheckpoint:
    """A GGUF file opened for the tools: a TensorFile whose tensors are values (``data``)
    decoded from their stored form (``stored``), plus the GGUF header (``header``)."""

    format: ClassVar[Literal["gguf"]] = "gguf"
    sharded = False
    index_path: str | None = None
    metadata: dict[str, str] | None = None  # GGUF metadata is typed: ``gguf_metadata``

    def __init__(self, path: str, file: GGUFFile, file_name: str) -> None:
        self.path = path
        self.file = file
        self.header: GGUFHeader = file.header
        # a split set's files, else this one file
        self.file_names = [os.path.basename(redact_url(p)) for p in file.parts] if len(file.parts) > 1 else [file_name]
        tensors = [GGUFTensor.of(t) for t in self.header.tensors]
        self._tensors = tensors
        self._by_name = {t.name: t for t in tensors}
        self._closed = False

    # --- the TensorFile interface ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.path

    @property
    def gguf_metadata(self) -> dict[str, GGUFField]:
        """The header's key/value fields, typed as GGUF stores them."""
        return self.header.fields

    def names(self) -> list[str]:
        """Names in file order (the order of the tensor descriptions)."""
        return [t.name for t in self._tensors]

    def sorted_names(self) -> list[str]:
        self.check_open()
        return sorted(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def info(self, name: str) -> GGUFTensor:
        t = self._by_name.get(name)
        if t is None:
            raise TensorNotFound(f"{self.path} does not contain tensor {name}", tensor=name)
        return t

    def _not_raw(self, name: str | None = None) -> NoReturn:
        raise GGUFUnsupported(f"{self.path}: GGUF tensors are read as values (data) or stored bytes (stored), "
                              "not as safetensors raw tensors", tensor=name)

    def raw(self, name: str) -> RawTensor:
        self._not_raw(name)

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor:
        self._not_raw(name)

    def raw_all(self, threads: int | None = None) -> Iterator[RawTensor]:
        self._not_raw()

    def check_open(self) -> None:
        if self._closed:
            raise FileClosed("File is closed")

    def close(self) -> None:
        self._closed = True
        self.file.close()

    def __enter__(self) -> GGUFCheckpoint:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the tools read beside ----------------------------------------------------------
    @property
    def local(self) -> bool:
        return url_scheme(self.path) in (None, "file")

    @property
    def file_size(self) -> int:
        return self.header.file_size

    @property
    def header_size(self) -> int:
        """Bytes before the tensor data: the header and its padding to the alignment."""
        return self.header.data_offset

    @property
    def tensor_count(self) -> int:
        return len(self._tensors)

    @property
    def tensors(self) -> list[GGUFTensor]:
        """Every tensor in file order (the order of the tensor descriptions)."""
        return list(self._tensors)

    def file_of(self, name: str) -> str:
        self.info(name)
        return self.file_names[self.file.part_index(name) if len(self.file_names) > 1 else 0]

    def data(self, name: str, heads: int | None = None) -> DecodedBytes:
        """The tensor's values as bytes of ``info(name).dtype`` that decode on slicing;
        ``heads`` un-permutes llama's q/k rows (:mod:`pysafetensors.gguf.names`)."""
        self.info(name)
        return self.file.decoded(name, heads)

    def stored(self, name: str) -> RangedBytes | None:
        """The tensor's bytes as stored (quantized), read as they are sliced; None for a type
        this version does not know (where its bytes end is unknown)."""
        t = self.info(name)
        return None if t.type.startswith("unknown") else RangedBytes(partial(self.file.stored, t.name), t.nbytes)

    def shard_metadata(self) -> None:
        return None

    def metadata_disagreements(self) -> None:
        return None


__all__ = ["GGUFCheckpoint"]
