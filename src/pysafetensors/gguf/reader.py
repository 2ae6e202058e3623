"""Read a GGUF file's tensors through any byte source, a few rows at a time.

:class:`GGUFFile` parses the header through the source (a local map, HTTP Range requests, an
fsspec file), checks the layout, and reads tensor bytes only when asked.  Plain tensors (F32,
F16, BF16, F64, I8-I64) come back as numpy arrays of their own dtype; quantized ones are
dequantized by gguf-py (the ``gguf`` extra) to float32.  Shapes are PyTorch's order.

A GGUF tensor is stored row by row (a row is its first GGUF dimension, the last PyTorch one),
and a quantized row is a whole number of blocks, so any run of rows can be decoded on its own:
:meth:`GGUFFile.rows` decodes rows ``[r0, r1)`` and :class:`DecodedBytes` gives a tensor's
values as a byte range that decodes only the rows a slice covers.  Streamed tools (stats,
diff, convert) therefore hold a few megabytes of a tensor at a time, never the whole of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._optional import require
from ..errors import GGUFUnsupported, SourceError, TensorNotFound, UnsupportedShape
from ..format.dtypes import BY_CODE, DType
from ..format.header import TensorInfo
from ..io.protocols import ByteSource, ViewSource, capabilities
from .check import require_valid
from .header import GGUFHeader, GGUFTensorInfo, Reader, parse_gguf_header
from .types import PLAIN_TYPES, byte_range

if TYPE_CHECKING:
    from typing_extensions import Self


def source_reader(source: ByteSource) -> Reader:
    """``read(offset, n)`` over ``source``, as the header parser and :func:`~.check.validate_gguf` read."""

    def read(offset: int, n: int) -> bytes:
        buf = bytearray(n)
        source.read_into(offset, memoryview(buf))
        return bytes(buf)

    return read


def value_dtype(info: GGUFTensorInfo) -> DType:
    """The dtype of a tensor's values once read: its own for plain types, F32 for quantized ones."""
    gt = info.ggml_type
    return BY_CODE[PLAIN_TYPES.get(gt.name, "F32") if gt is not None else "F32"]


class GGUFTensor(TensorInfo):
    """A GGUF tensor as the tools read it: a :class:`~pysafetensors.format.header.TensorInfo`
    whose ``dtype`` and ``shape`` are those of its values (PyTorch's order; F32 for quantized
    types, :func:`value_dtype`) and whose ``begin``/``end`` are its stored bytes relative to
    the data section (``end == begin`` for a type whose size is unknown).  ``type`` is the GGML
    type as llama.cpp spells it (``Q4_K``, ``F32``; ``unknown_<n>`` for ids this version does
    not list) and ``dims`` GGUF's stored order (fastest-varying first)."""

    ggml: str
    dims: tuple[int, ...]

    @classmethod
    def of(cls, t: GGUFTensorInfo) -> GGUFTensor:
        gt = t.ggml_type
        out = cls(t.name, value_dtype(t), t.shape, t.offset, t.offset + (t.nbytes or 0))
        out.ggml = gt.name if gt is not None else t.type_name
        out.dims = t.dims
        return out

    @property
    def type(self) -> str:
        return self.ggml

    @property
    def decoded(self) -> bool:
        return True


def row_elements(info: GGUFTensorInfo) -> int:
    """Elements per stored row: the first GGUF dimension (1 for a 0-dimensional tensor)."""
    return info.dims[0] if info.dims else 1


def row_count(info: GGUFTensorInfo) -> int:
    row = row_elements(info)
    return info.n_elements // row if row else 0


def _numpy_dtype(dtype: DType) -> Any:
    from .._adapters.numpy import numpy_dtype

    return numpy_dtype(dtype)


class GGUFFile:
    """A GGUF file open for reading: ``header``, ``names()``, ``info(name)``, ``array(name)``.

    Args:
        source: a ByteSource (``pysafetensors.io``): ``size``, ``name``, ``read_into``.
        validate: check the layout (offsets aligned, inside the file, not overlapping, known
            types) and raise the first problem; ``validate`` turns this off to list them all.
        unknown_types: with ``validate``, let tensors of GGML types this version does not
            know through (shown and identified, but reading one raises GGUFUnsupported).

    A split set (:mod:`pysafetensors.gguf.split`) is one GGUFFile too, made with the set's
    ``header`` (not parsed from the source), the names of its files (``parts``) and which file
    holds each tensor (``owner``: name -> index in ``parts``).

    The source is closed if the header cannot be read, and by :meth:`close`.
    """

    def __init__(self, source: ByteSource, *, validate: bool = True, unknown_types: bool = False,
                 header: GGUFHeader | None = None, parts: Sequence[str] | None = None,
                 owner: Mapping[str, int] | None = None) -> None:
        self.source = source
        self.name: str = source.name or "<gguf>"
        try:
            self.header: GGUFHeader = header if header is not None else parse_gguf_header(source_reader(source), source.size)
            if validate:
                require_valid(self.header, unknown_types=unknown_types)
        except BaseException:
            source.close()
            raise
        self.parts: tuple[str, ...] = tuple(parts) if parts else (self.name,)
        self._owner = dict(owner or {})
        self._by_name = {t.name: t for t in self.header.tensors}
        self._views = cast(ViewSource, source) if capabilities(source).view else None

    def part_index(self, name: str) -> int:
        """Which of ``parts`` holds the tensor (0 for a single file)."""
        self.info(name)
        return self._owner.get(name, 0)

    # --- header facts -----------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.header.version

    @property
    def views(self) -> bool:
        """Whether tensor bytes come as zero-copy views (a mapped file, bytes in memory)."""
        return self._views is not None

    def names(self) -> list[str]:
        """Tensor names in file order."""
        return [t.name for t in self.header.tensors]

    def info(self, name: str) -> GGUFTensorInfo:
        try:
            return self._by_name[name]
        except KeyError:
            raise TensorNotFound(f"File does not contain tensor {name}", tensor=name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    # --- tensor data ------------------------------------------------------------------------
    def stored(self, name: str, start: int = 0, stop: int | None = None) -> Any:
        """Bytes ``[start, stop)`` of the tensor as stored, as a uint8 numpy array (a zero-copy
        view of a mapped file, else read)."""
        import numpy as np

        t = self.info(name)
        nbytes = t.nbytes
        if nbytes is None:
            raise GGUFUnsupported(f"tensor {name!r} has GGML type {t.type_name}, whose size is unknown", tensor=name,
                                  type_id=t.type_id)
        stop = nbytes if stop is None else stop
        where = self.header.data_offset + t.offset + start
        n = max(stop - start, 0)
        try:
            if self._views is not None:
                return np.frombuffer(self._views.view(where, n), dtype=np.uint8)
            out = np.empty(n, dtype=np.uint8)
            if n:
                self.source.read_into(where, out.data)
            return out
        except SourceError as e:
            raise type(e)(f"{e} (tensor {name!r}, offset {where})", tensor=name, offset=where) from e

    def raw_bytes(self, name: str) -> Any:
        """The tensor's stored bytes as a uint8 numpy array (exactly ``info(name).nbytes`` long)."""
        return self.stored(name)

    def rows(self, name: str, r0: int, r1: int, stored: Any = None) -> Any:
        """Rows ``[r0, r1)`` decoded, shape ``(r1 - r0, row_elements)``; ``stored`` is the whole
        tensor's stored bytes when the caller already holds them (read ahead)."""
        t = self.info(name)
        gt = t.ggml_type
        if gt is None:
            raise GGUFUnsupported(f"tensor {name!r} has unknown GGML type {t.type_id}: it cannot be read",
                                  tensor=name, type_id=t.type_id)
        row = row_elements(t)
        row_bytes = row // gt.block_elements * gt.block_bytes
        lo, hi = r0 * row_bytes, r1 * row_bytes
        raw = stored[lo:hi] if stored is not None else self.stored(name, lo, hi)
        try:
            raw = raw.reshape(r1 - r0, row_bytes)
            if gt.name in PLAIN_TYPES:
                return raw.view(_numpy_dtype(value_dtype(t)))
            if raw.size == 0:  # gguf-py cannot reshape an empty array: nothing to decode
                import numpy as np

                return np.empty((r1 - r0, row), dtype=np.float32)
        except ValueError:  # no rows, but a row longer than numpy's index arithmetic allows
            raise UnsupportedShape(f"tensor {name!r}: numpy cannot represent shape {list(t.shape)}",
                                   tensor=name, shape=list(t.shape)) from None
        return dequantize(raw, t)

    def array(self, name: str) -> Any:
        """The tensor as numpy: plain types in their own dtype, quantized ones dequantized to float32."""
        t = self.info(name)
        values = self.rows(name, 0, row_count(t))
        try:
            return values.reshape(t.shape)
        except ValueError:  # an empty tensor whose other dims overflow numpy's index arithmetic
            raise UnsupportedShape(f"tensor {name!r}: numpy cannot represent shape {list(t.shape)}",
                                   tensor=name, shape=list(t.shape)) from None

    def decoded(self, name: str, heads: int | None = None, stored: Any = None) -> DecodedBytes:
        """The tensor's values as bytes that decode on slicing (see :class:`DecodedBytes`)."""
        return DecodedBytes(self, self.info(name), heads, stored)

    def close(self) -> None:
        self.source.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DecodedBytes:
    """A tensor's values as the bytes of its value dtype (:func:`value_dtype`), in PyTorch's
    C order: ``[lo:hi]`` reads and decodes only the stored rows that range covers.

    With ``heads`` (permuted q/k weights and biases), the values are those of the Hugging Face
    layout: llama.cpp's converter regrouped the rows of each attention head, and a slice decodes
    the whole heads it touches and undoes that regrouping (the reshape in :meth:`__getitem__`).
    ``unit`` is the number of elements a slice is widened to (a row, or a head's rows): slices
    that start and stop on it decode nothing twice.
    """

    def __init__(self, file: GGUFFile, info: GGUFTensorInfo, heads: int | None = None, stored: Any = None) -> None:
        self.file = file
        self.info = info
        self.dtype = value_dtype(info)
        self.itemsize = self.dtype.itemsize
        self.n = info.n_elements
        self.length = self.n * self.itemsize
        self.row = row_elements(info)
        self.stored = stored
        shape = info.shape
        self.group = 0  # rows of the first PyTorch dimension per head, when un-permuting
        if heads and shape and heads > 0 and shape[0] % (2 * heads) == 0:
            self.group = shape[0] // heads
        slab = self.n // shape[0] if shape and shape[0] else self.row
        self.slab = slab
        # A 1-D tensor (a q/k bias) is one stored row: it decodes whole.
        self.unit = (self.group * slab if len(shape) >= 2 else self.n) if self.group else self.row
        gt = info.ggml_type
        self.plain = gt is not None and gt.name in PLAIN_TYPES and not self.group

    def __len__(self) -> int:
        return self.length

    def held(self, cap: int) -> DecodedBytes:
        """These values with their stored (quantized) bytes fetched once when they come over the
        network and are at most ``cap`` bytes: each slice then decodes from memory."""
        if self.stored is None and not self.file.views:
            stored = self.info.nbytes
            if stored is not None and stored <= cap:
                self.stored = self.file.stored(self.info.name)  # a fresh DecodedBytes: ours to fill
        return self

    def resident(self) -> int:
        """Bytes of memory held: the stored bytes fetched by :meth:`held`, else none."""
        return 0 if self.stored is None or self.file.views else len(self.stored)

    def __getitem__(self, key: slice) -> Any:
        import numpy as np

        start, stop = byte_range(key, self.length, "DecodedBytes")
        if stop == start:
            return np.empty(0, dtype=np.uint8)
        if self.plain:  # stored as they are read: no decoding
            if self.stored is not None:
                return self.stored[start:stop]
            return self.file.stored(self.info.name, start, stop)
        e0, e1 = start // self.itemsize, -(-stop // self.itemsize)
        unit = self.unit or 1
        b0, b1 = e0 // unit * unit, min(-(-e1 // unit) * unit, self.n)
        values = self.file.rows(self.info.name, b0 // self.row, b1 // self.row, self.stored)
        if self.group:
            heads = (b1 - b0) // (self.group * self.slab)
            values = values.reshape(heads, self.group // 2, 2, self.slab).swapaxes(1, 2)
        flat = np.ascontiguousarray(values).reshape(-1)[e0 - b0 : e1 - b0]
        out = flat.view(np.uint8)
        skew = start - e0 * self.itemsize
        return out[skew : skew + (stop - start)]


def dequantize(raw: Any, info: GGUFTensorInfo) -> Any:
    """Decode a quantized tensor's bytes (whole rows, shape ``(rows, row_bytes)``) with gguf-py
    (the ``gguf`` extra) into float32 of shape ``(rows, row_elements)``."""
    gguf = require("gguf", "gguf")
    quants = require("gguf.quants", "gguf")
    try:
        qtype = gguf.GGMLQuantizationType(info.type_id)
    except ValueError:
        raise GGUFUnsupported(
            f"tensor {info.name!r}: GGML type {info.type_id} is unknown to the installed gguf package",
            tensor=info.name,
        ) from None
    try:
        return quants.dequantize(raw, qtype)
    except NotImplementedError as e:
        raise GGUFUnsupported(f"tensor {info.name!r}: {info.type_name}: {e}", tensor=info.name) from None


__all__ = ["DecodedBytes", "GGUFFile", "GGUFTensor", "dequantize", "row_count", "row_elements", "source_reader",
           "value_dtype"]
