"""THE dtype table.  Every other module maps through it; nobody else defines sizes.

Columns: format code, bits per element, write-order rank (upstream's enum order), numpy
representation (``module:name``; sub-byte codes are held unpacked, one element per byte),
torch attribute name, and the ``TensorSpec`` constructor name upstream accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from ..errors import UnknownDtype


@dataclass(frozen=True)
class DType:
    code: str
    bits: int
    rank: int
    numpy: str
    torch: str | None
    spec_name: str | None
    kind: str  # "bool", "int", "uint", "float", "complex"
    # One element of the torch/TensorSpec type holds two values of this dtype (F4 as
    # ``float4_e2m1fn_x2``): those shapes have the last dimension halved.
    paired: bool = False

    def __hash__(self) -> int:
        # The code identifies a dtype; the generated hash would hash all seven fields on
        # every cached lookup (once per tensor when loading).
        return hash(self.code)

    @property
    def packed(self) -> bool:
        """True for sub-byte dtypes whose elements share bytes (F4, F6)."""
        return self.bits < 8

    @property
    def itemsize(self) -> int:
        """Bytes per element for byte-sized dtypes (sub-byte: 1, the unpacked size)."""
        return max(self.bits // 8, 1)

    def nbytes(self, nelements: int) -> int:
        """Bytes that ``nelements`` elements take in a file (sub-byte dtypes packed)."""
        return nelements * self.bits // 8

    @property
    def dlpack_native(self) -> bool:
        """Whether numpy (and so DLPack) has this type natively; the others (bfloat16, the
        float8/float6/float4 kinds) are ml_dtypes types that cross DLPack only as raw bits."""
        return self.numpy.startswith("numpy:")

    def file_shape(self, paired_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The file shape of a tensor whose torch/TensorSpec shape is ``paired_shape``.

        For a paired dtype the last dimension doubles.  A 0-d paired tensor stays 0-d: one F4
        value, half a byte, which the layout refuses as upstream does (its two values have no
        file shape that reads back as 0-d).  Other dtypes: the shape itself.
        """
        if not self.paired or not paired_shape:
            return paired_shape
        return paired_shape[:-1] + (paired_shape[-1] * 2,)

    def paired_shape(self, file_shape: tuple[int, ...]) -> tuple[int, ...] | None:
        """The torch/TensorSpec shape of a file tensor (the inverse of ``file_shape``).

        None when a paired dtype's file shape is 0-d or has an odd last dimension."""
        if not self.paired:
            return file_shape
        if not file_shape or file_shape[-1] % 2:
            return None
        return file_shape[:-1] + (file_shape[-1] // 2,)


# rank = position in upstream's Dtype enum; files are written highest rank first.
_TABLE = (
    DType("BOOL", 8, 0, "numpy:bool_", "bool", "bool", "bool"),
    DType("F4", 4, 1, "ml_dtypes:float4_e2m1fn", "float4_e2m1fn_x2", "float4_e2m1fn_x2", "float", paired=True),
    DType("F6_E2M3", 6, 2, "ml_dtypes:float6_e2m3fn", None, "float6_e2m3fn", "float"),
    DType("F6_E3M2", 6, 3, "ml_dtypes:float6_e3m2fn", None, "float6_e3m2fn", "float"),
    DType("U8", 8, 4, "numpy:uint8", "uint8", "uint8", "uint"),
    DType("I8", 8, 5, "numpy:int8", "int8", "int8", "int"),
    DType("F8_E5M2", 8, 6, "ml_dtypes:float8_e5m2", "float8_e5m2", "float8_e5m2", "float"),
    DType("F8_E4M3", 8, 7, "ml_dtypes:float8_e4m3fn", "float8_e4m3fn", "float8_e4m3fn", "float"),
    DType("F8_E8M0", 8, 8, "ml_dtypes:float8_e8m0fnu", "float8_e8m0fnu", "float8_e8m0fnu", "float"),
    DType("F8_E4M3FNUZ", 8, 9, "ml_dtypes:float8_e4m3fnuz", "float8_e4m3fnuz", "float8_e4m3fnuz", "float"),
    DType("F8_E5M2FNUZ", 8, 10, "ml_dtypes:float8_e5m2fnuz", "float8_e5m2fnuz", "float8_e5m2fnuz", "float"),
    DType("I16", 16, 11, "numpy:int16", "int16", "int16", "int"),
    DType("U16", 16, 12, "numpy:uint16", "uint16", "uint16", "uint"),
    DType("F16", 16, 13, "numpy:float16", "float16", "float16", "float"),
    DType("BF16", 16, 14, "ml_dtypes:bfloat16", "bfloat16", "bfloat16", "float"),
    DType("I32", 32, 15, "numpy:int32", "int32", "int32", "int"),
    DType("U32", 32, 16, "numpy:uint32", "uint32", "uint32", "uint"),
    DType("F32", 32, 17, "numpy:float32", "float32", "float32", "float"),
    DType("C64", 64, 18, "numpy:complex64", "complex64", "complex64", "complex"),
    DType("F64", 64, 19, "numpy:float64", "float64", "float64", "float"),
    DType("I64", 64, 20, "numpy:int64", "int64", "int64", "int"),
    DType("U64", 64, 21, "numpy:uint64", "uint64", "uint64", "uint"),
)

BY_CODE: dict[str, DType] = {d.code: d for d in _TABLE}
BY_SPEC_NAME: dict[str, DType] = {d.spec_name: d for d in _TABLE if d.spec_name}
BY_TORCH_NAME: dict[str, DType] = {d.torch: d for d in _TABLE if d.torch}
CODES: tuple[str, ...] = tuple(d.code for d in _TABLE)

# Upstream's TensorSpec names, in its error message order.
_UPSTREAM_SPEC_NAMES = (
    "bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16, float32, "
    "float64, bfloat16, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, "
    "float8_e8m0fnu, float4_e2m1fn_x2, complex64"
)


def all_dtypes() -> tuple[DType, ...]:
    """Every dtype, in upstream's enum order."""
    return _TABLE


def by_code(code: str) -> DType:
    """The dtype for a header code such as ``"F32"`` (case-sensitive)."""
    try:
        return BY_CODE[code]
    except (KeyError, TypeError):
        raise UnknownDtype(
            f"unknown dtype code {code!r}; expected one of {', '.join(CODES)}", dtype=code
        ) from None


def by_spec_name(name: str) -> DType:
    """The dtype for a TensorSpec name such as ``"float32"``, with upstream's error wording."""
    try:
        return BY_SPEC_NAME[name]
    except (KeyError, TypeError):
        raise UnknownDtype(
            f'Unknown dtype "{name}". Supported dtypes: {_UPSTREAM_SPEC_NAMES}, '
            "float6_e2m3fn, float6_e3m2fn",
            dtype=name,
        ) from None


def by_name(name: str) -> DType:
    """The dtype for any name the writers accept: a code (``"F32"``), a TensorSpec or torch
    attribute name (``"float32"``, ``"float4_e2m1fn_x2"``) or a numpy type name (``"bool_"``,
    ``"float4_e2m1fn"``); upstream's "Unknown dtype" wording otherwise."""
    found = BY_CODE.get(name) or BY_SPEC_NAME.get(name) or BY_TORCH_NAME.get(name) if isinstance(name, str) else None
    if found is None and isinstance(name, str):
        found = next((d for d in _TABLE if d.numpy.partition(":")[2] in (name, name + "_")), None)
    return found if found is not None else by_spec_name(name)


def reverse_table(forward: Callable[[DType], Hashable | None]) -> dict[Hashable, DType]:
    """Framework dtype -> format dtype, built from a framework's forward mapping.

    ``forward`` gives the framework's dtype for each format dtype, or None where it has none;
    where two format dtypes map to one framework dtype the first in table order wins.
    """
    table: dict[Hashable, DType] = {}
    for d in _TABLE:
        theirs = forward(d)
        if theirs is not None:
            table.setdefault(theirs, d)
    return table


def reverse_lookup(forward: Callable[[DType], Hashable | None]) -> Callable[[Hashable], DType | None]:
    """A function from a framework dtype to the format dtype (None where there is none),
    the table built from ``forward`` (as :func:`reverse_table`) on first use, so importing a
    framework's adapter does not touch every dtype of the framework."""
    table: dict[Hashable, DType] | None = None

    def lookup(theirs: Hashable) -> DType | None:
        nonlocal table
        if table is None:
            table = reverse_table(forward)
        return table.get(theirs)

    return lookup


# Buffer-protocol (struct module) format characters -> dtype, for buffers that carry their
# element type (numpy arrays, array.array, memoryview.cast, ctypes arrays).
_STRUCT_KINDS = {"?": "BOOL", "b": "I", "h": "I", "i": "I", "l": "I", "q": "I", "n": "I",
                 "B": "U", "H": "U", "I": "U", "L": "U", "Q": "U", "N": "U", "e": "F", "f": "F", "d": "F"}


def by_buffer_format(fmt: str, itemsize: int) -> DType | None:
    """The dtype of a buffer's struct format (``memoryview.format``) and item size.

    ``"B"`` (bytes, bytearray) is U8.  None for formats safetensors has no dtype for
    (structs, pointers, big-endian ``>``/``!`` data, which must be byte-swapped first).
    """
    if fmt[:1] in "<=@":
        fmt = fmt[1:]
    if fmt == "Zf":
        return BY_CODE["C64"]
    kind = _STRUCT_KINDS.get(fmt)
    if kind is None:
        return None
    return BY_CODE["BOOL"] if kind == "BOOL" else BY_CODE.get(f"{kind}{8 * itemsize}")
