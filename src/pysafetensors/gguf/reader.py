"""Read a GGUF file's tensors through any byte source, one tensor at a time.

:class:`GGUFFile` parses the header through the source (a local map, HTTP Range requests, an
fsspec file), checks the layout, and reads a tensor's bytes only when asked.  Plain tensors
(F32, F16, BF16, F64, I8-I64) come back as numpy arrays of their own dtype; quantized ones are
dequantized by gguf-py (the ``gguf`` extra) to float32.  Shapes are PyTorch's order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._optional import require
from ..errors import GGUFUnsupported, SourceError, TensorNotFound
from .check import require_valid
from .header import GGUFHeader, GGUFTensorInfo, parse_gguf_header
from .types import PLAIN_TYPES

if TYPE_CHECKING:
    from typing_extensions import Self

_NUMPY_NAMES = {
    "F32": "float32",
    "F16": "float16",
    "F64": "float64",
    "I8": "int8",
    "I16": "int16",
    "I32": "int32",
    "I64": "int64",
}


class GGUFFile:
    """A GGUF file open for reading: ``header``, ``names()``, ``info(name)``, ``array(name)``.

    Args:
        source: a ByteSource (``pysafetensors.io``): ``size``, ``name``, ``read_into``.
        validate: check the layout (offsets aligned, inside the file, not overlapping, known
            types) and raise the first problem; ``validate`` turns this off to list them all.
    """

    def __init__(self, source: Any, *, validate: bool = True) -> None:
        self.source = source
        self.name: str = getattr(source, "name", "<gguf>")
        self.header: GGUFHeader = parse_gguf_header(self._read, source.size)
        if validate:
            require_valid(self.header)
        self._by_name = {t.name: t for t in self.header.tensors}

    def _read(self, offset: int, length: int) -> bytes:
        buf = bytearray(length)
        self.source.read_into(offset, memoryview(buf))
        return bytes(buf)

    # --- header facts -----------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.header.version

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
    def raw_bytes(self, name: str) -> Any:
        """The tensor's stored bytes as a uint8 numpy array (exactly ``info(name).nbytes`` long)."""
        import numpy as np

        t = self.info(name)
        nbytes = t.nbytes
        if nbytes is None:
            raise GGUFUnsupported(f"tensor {name!r} has GGML type {t.type_name}, whose size is unknown", tensor=name)
        out = np.empty(nbytes, dtype=np.uint8)
        start = self.header.data_offset + t.offset
        try:
            self.source.read_into(start, out.data)
        except SourceError as e:
            raise type(e)(f"{e} (tensor {name!r}, offset {start})", tensor=name, offset=start) from e
        return out

    def array(self, name: str) -> Any:
        """The tensor as numpy: plain types in their own dtype, quantized ones dequantized to float32."""
        import numpy as np

        t = self.info(name)
        gt = t.ggml_type
        raw = self.raw_bytes(name)
        if gt is not None and gt.name in PLAIN_TYPES:
            if gt.name == "BF16":
                import ml_dtypes

                dtype: Any = np.dtype(ml_dtypes.bfloat16)
            else:
                dtype = np.dtype(_NUMPY_NAMES[gt.name]).newbyteorder("<")
            return raw.view(dtype).reshape(t.shape)
        return dequantize(raw, t)

    def close(self) -> None:
        self.source.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def dequantize(raw: Any, info: GGUFTensorInfo) -> Any:
    """Decode a quantized tensor's bytes with gguf-py (the ``gguf`` extra) into float32."""
    gguf = require("gguf", "gguf")
    quants = require("gguf.quants", "gguf")
    try:
        qtype = gguf.GGMLQuantizationType(info.type_id)
    except ValueError:
        raise GGUFUnsupported(
            f"tensor {info.name!r}: GGML type {info.type_id} is unknown to the installed gguf package",
            tensor=info.name,
        ) from None
    byte_shape = quants.quant_shape_to_byte_shape(info.shape or (1,), qtype)
    try:
        values = quants.dequantize(raw.reshape(byte_shape), qtype)
    except NotImplementedError as e:
        raise GGUFUnsupported(f"tensor {info.name!r}: {e}", tensor=info.name) from None
    return values.reshape(info.shape)


__all__ = ["GGUFFile", "dequantize"]
