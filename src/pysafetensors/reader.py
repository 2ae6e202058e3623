"""SafeFile: a validated header over a ByteSource, handing out raw tensor bytes.

No framework code here: the adapters turn a RawTensor into a numpy array, a torch tensor...
"""

from __future__ import annotations

import mmap
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from .errors import FileClosed, HeaderError, TensorNotFound, UnsupportedShape
from .format.dtypes import DType
from .format.header import HEADER_CAP, N_LEN, Header, TensorInfo, parse_header, parse_header_length
from .format.slicing import SlicePlan
from .io.sources import supports_view

_BIG_BUFFER = 1 << 20
# Arrays index with signed 64-bit sizes; a zero-element tensor may still declare a bigger dim.
_MAX_DIM = (1 << 63) - 1


def check_representable(name: str, shape: tuple[int, ...]) -> None:
    """Refuse a shape no 64-bit array library can represent (adapters call this before building
    an array: the format allows e.g. ``[2**64 - 1, 0]``, numpy and torch do not)."""
    for axis, d in enumerate(shape):
        if d > _MAX_DIM:
            raise UnsupportedShape(
                f"tensor {name!r}: dimension #{axis} is {d}, over the {_MAX_DIM} that arrays can index "
                f"(shape {list(shape)})",
                tensor=name,
                shape=shape,
            )


@dataclass(frozen=True)
class RawTensor:
    """A tensor's bytes (little-endian, C order, sub-byte dtypes packed) and how to read them.

    ``shared`` is True when ``data`` views the source itself (a map or caller's bytes) rather
    than a fresh buffer; ``writable`` says whether writing through ``data`` is allowed.
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    data: memoryview
    shared: bool
    writable: bool


def alloc(nbytes: int) -> memoryview:
    """A fresh writable buffer.  Large ones are anonymous maps: no zero-fill pass, page aligned."""
    if nbytes >= _BIG_BUFFER:
        return memoryview(mmap.mmap(-1, nbytes))
    return memoryview(bytearray(nbytes))


def read_header(source: Any) -> Header:
    """Read and validate a header, never allocating more than min(cap, file size)."""
    size = source.size
    prefix = bytearray(min(N_LEN, size))
    if size:
        source.read_into(0, memoryview(prefix))
    n = parse_header_length(bytes(prefix), size)
    assert n <= HEADER_CAP and n + N_LEN <= size
    buf = bytearray(n)
    if n:
        source.read_into(N_LEN, memoryview(buf))
    return parse_header(buf, size)


class SafeFile:
    """An open safetensors file.  Thread-safe for reads; ``close`` is idempotent."""

    def __init__(self, source: Any, header: Header | None = None) -> None:
        self.source = source
        try:
            self.header = header if header is not None else read_header(source)
        except BaseException:
            source.close()
            raise
        self._by_name = self.header.by_name()
        self._zero_copy = supports_view(source)
        self._writable_views = not getattr(source, "readonly", False)
        self._closed = False
        self._lock = threading.Lock()

    # --- header facts -----------------------------------------------------------------
    @property
    def metadata(self) -> dict[str, str] | None:
        return None if self.header.metadata is None else dict(self.header.metadata)

    def names(self) -> list[str]:
        """Names in file (offset) order."""
        return [t.name for t in self.header.tensors]

    def info(self, name: str) -> TensorInfo:
        self.check_open()
        try:
            return self._by_name[name]
        except (KeyError, TypeError):
            raise TensorNotFound(f"File does not contain tensor {name}", tensor=name) from None

    def check_open(self) -> None:
        if self._closed:
            raise FileClosed("File is closed")

    # --- bytes --------------------------------------------------------------------------
    def _absolute(self, info: TensorInfo) -> int:
        return self.header.data_start + info.begin

    def raw(self, name: str) -> RawTensor:
        """The whole tensor: a zero-copy view when the source allows it, else a fresh read."""
        info = self.info(name)
        if self._zero_copy:
            data = self.source.view(self._absolute(info), info.nbytes)
            return RawTensor(info.name, info.dtype, info.shape, data, True, self._writable_views)
        buf = alloc(info.nbytes)
        if info.nbytes:
            self._read(self._absolute(info), buf)
        return RawTensor(info.name, info.dtype, info.shape, buf, False, True)

    def raw_all(self) -> Iterator[RawTensor]:
        """Every tensor in file order.  Non-view sources read the data region in one pass."""
        self.check_open()
        if self._zero_copy:
            for t in self.header.tensors:
                yield self.raw(t.name)
            return
        total = self.header.data_size
        buf = alloc(total)
        if total:
            self._read(self.header.data_start, buf)
        for t in self.header.tensors:
            yield RawTensor(t.name, t.dtype, t.shape, buf[t.begin : t.end], False, True)

    def raw_slice(self, name: str, plan: SlicePlan) -> RawTensor:
        """Only the bytes a slice needs, gathered into a fresh buffer in result order."""
        info = self.info(name)
        out = alloc(plan.nbytes)
        base = self._absolute(info)
        pos = 0
        for begin, end in plan.byte_ranges(name):
            n = end - begin
            self._read(base + begin, out[pos : pos + n])
            pos += n
        return RawTensor(info.name, info.dtype, plan.shape, out, False, True)

    def _read(self, offset: int, buf: memoryview) -> None:
        if self._closed:
            raise FileClosed("File is closed")
        self.source.read_into(offset, buf)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.source.close()


def open_file(source: Any) -> SafeFile:
    """Open a SafeFile, giving header errors upstream's safe_open wording."""
    try:
        return SafeFile(source)
    except HeaderError:
        raise
