"""Stand-ins for the numpy globals a ``torch.save`` pickle names when it holds numpy values.

numpy pickles a scalar as ``numpy(._)core.multiarray.scalar(dtype, bytes)``, an array as
``_reconstruct(numpy.ndarray, (0,), b"b")`` followed by BUILD with ``(1, shape, dtype,
fortran, bytes)`` (``numeric._frombuffer(buffer, dtype, shape, order)`` under pickle protocol
5), and a dtype as ``numpy.dtype(code, False, True)`` followed by BUILD with its byte order.

None of those callables is ever called.  Each value is rebuilt here from its bytes, with
``np.frombuffer`` on a dtype from a fixed list of numeric codes (bool, ints, floats, complex)
after its shape has been checked against its byte count.  Object dtypes are refused (their
"data" is a list of pickled Python objects); other non-numeric dtypes (strings, datetimes,
structured records) become opaque values, which conversion skips like any non-tensor entry.
Scalars are values too (an epoch counter, a metric), skipped as Python numbers are; arrays are
tensors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from typing import Any, Literal

import numpy as np

from .._adapters.numpy import dtype_of, little_endian_bytes
from ..errors import CorruptCheckpoint, UnsafePickle, UnsupportedDtype
from ..format.dtypes import DType
from .checkpoint import Pending, SourceTensor, Unconvertible
from .limits import short_repr
from .unpickler import Allowed, Buildable

# The dtype codes numpy pickles for numeric types: np.dtype(code) of these is a plain
# fixed-size number, whatever the byte order.
_NUMERIC = re.compile(r"(b1|[iu][1248]|f(2|4|8|12|16)|c(8|16|24|32))\Z")
_NON_NUMERIC = re.compile(r"[USVMm][0-9]{0,12}\Z")
_INTP = 1 << 63  # numpy sizes are npy_intp: dims and byte counts stay below 2**63
_MAX_NDIM = 64


@dataclass(frozen=True)
class NumpyClass:
    """What ``numpy.ndarray`` unpickles to: a name, never instantiated."""

    name: str


NDARRAY = NumpyClass("numpy.ndarray")


@dataclass(frozen=True)
class OpaqueValue:
    """A numpy value conversion does not interpret (a string, a datetime...): skipped."""

    description: str


def our_dtype(npdt: np.dtype, label: str) -> DType | Unconvertible:
    """Our dtype for numpy's ``npdt``, or a leaf that fails the conversion only if it is written."""
    try:
        return dtype_of(np.empty(0, dtype=npdt), label)
    except UnsupportedDtype as e:
        message = str(e)
        return Unconvertible(message, lambda name: UnsupportedDtype(message, tensor=name, dtype=str(npdt)))


def check_numpy_shape(shape: Any, itemsize: int, where: str) -> tuple[int, ...]:
    """A shape numpy could have written: at most 64 dims, each in [0, 2**63), and its non-zero
    dims times the item size below 2**63 (numpy's own rule, even for empty arrays)."""
    if not isinstance(shape, tuple) or len(shape) > _MAX_NDIM or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape
    ):
        raise CorruptCheckpoint(f"{where}: shape must be a tuple of at most {_MAX_NDIM} ints, got {short_repr(shape)}")
    nbytes = itemsize
    for d in shape:
        if not 0 <= d < _INTP:
            raise CorruptCheckpoint(
                f"{where}: dimension {short_repr(d)} of shape {short_repr(list(shape))} is outside "
                "[0, 2**63): numpy has no such array, so no numpy wrote this",
                shape=list(shape),
            )
        if d:
            nbytes *= d
            if nbytes >= _INTP:
                raise CorruptCheckpoint(
                    f"{where}: shape {short_repr(list(shape))} of {itemsize}-byte items exceeds numpy's "
                    "2**63-byte limit (numpy has no such array, even an empty one)",
                    shape=list(shape),
                )
    return shape


class NumpyDType(Buildable):
    """What ``numpy.dtype(code, align, copy)`` unpickles to; BUILD supplies the byte order."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.numeric = bool(_NUMERIC.match(code))
        self.byteorder: Literal["<", ">", "=", "|"] = "="
        self.built = False

    def __repr__(self) -> str:
        return f"numpy.dtype({self.code!r})"

    def build(self, state: Any) -> None:
        if self.built:
            raise CorruptCheckpoint(f"{self!r}: BUILD applied twice")
        self.built = True
        if not isinstance(state, tuple) or len(state) < 2 or state[1] not in ("<", ">", "=", "|"):
            raise CorruptCheckpoint(f"{self!r}: unexpected state {short_repr(state)}")
        if not self.numeric:
            return  # opaque: the state (sub-dtypes, field names, datetime units) is not needed
        itemsize = np.dtype(self.code).itemsize
        if (
            len(state) != 8 or state[0] != 3 or state[2:5] != (None, None, None)
            or state[5] not in (-1, itemsize) or (state[1] == "|") != (itemsize == 1)
        ):
            raise CorruptCheckpoint(f"{self!r}: unexpected state {short_repr(state)}")
        self.byteorder = state[1]

    def numpy(self) -> np.dtype[Any]:
        """The real numpy dtype (numeric codes only)."""
        dt: np.dtype[Any] = np.dtype(self.code).newbyteorder(self.byteorder)  # "=", "|": native, as it was
        return dt


def _dtype(code: Any, align: Any = False, copy: Any = True) -> NumpyDType:
    if not isinstance(code, str) or not isinstance(align, bool) or not isinstance(copy, bool):
        raise CorruptCheckpoint(f"numpy.dtype: unexpected arguments {short_repr((code, align, copy))}")
    if code.startswith("O"):
        raise UnsafePickle(
            "numpy.dtype: refusing an object dtype (its data is pickled Python objects, which "
            "conversion never loads)",
            global_name="numpy.dtype",
        )
    if not (_NUMERIC.match(code) or _NON_NUMERIC.match(code)):
        raise CorruptCheckpoint(f"numpy.dtype: unknown type code {short_repr(code)}")
    return NumpyDType(code)


def _require_dtype(dtype: Any, fn: str) -> NumpyDType:
    if not isinstance(dtype, NumpyDType):
        raise CorruptCheckpoint(f"{fn}: expected a numpy dtype, got {short_repr(dtype)}")
    return dtype


def _scalar(dtype: Any, data: Any = None) -> Any:
    """A numpy scalar from its bytes: a real numpy number, or an opaque value."""
    dt = _require_dtype(dtype, "numpy scalar")
    if not isinstance(data, (bytes, bytearray)):
        raise CorruptCheckpoint(f"numpy scalar of {dt!r}: expected its bytes, got {type(data).__name__}")
    if not dt.numeric:
        return OpaqueValue(f"numpy scalar of dtype {dt.code}")
    npdt = dt.numpy()
    if len(data) != npdt.itemsize:
        raise CorruptCheckpoint(f"numpy scalar of {dt!r}: {len(data)} bytes for a {npdt.itemsize}-byte item")
    return np.frombuffer(bytes(data), dtype=npdt)[0]


@dataclass(eq=False)
class NumpyLeaf(SourceTensor):
    """A numpy array as a tensor leaf (pickled or in a .npy/.npz file): its safetensors dtype
    and shape, which is also the output's (an array is written with its own shape)."""

    dtype: DType
    shape: tuple[int, ...]

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.shape


@dataclass(eq=False)
class PickledArray(NumpyLeaf):
    """A numpy array whose bytes lie in the pickle: a tensor leaf read on demand."""

    data: bytes | bytearray
    numpy_dtype: np.dtype
    fortran: bool

    @property
    def nbytes(self) -> int:
        return len(self.data)

    def tie_key(self) -> tuple[Any, ...]:
        # One pickled buffer read the same way twice (a memo reference) is one tensor.
        return ("pickled-array", id(self.data), self.numpy_dtype.str, self.shape, self.fortran)

    def read(self) -> np.ndarray:
        if not self.data:
            return np.empty(0, dtype=np.uint8)
        arr = np.frombuffer(self.data, dtype=self.numpy_dtype).reshape(self.shape, order="F" if self.fortran else "C")
        return little_endian_bytes(arr, self.dtype)


class NumpyArray(Buildable, Pending):
    """What ``_reconstruct(numpy.ndarray, (0,), b"b")`` unpickles to, until BUILD fills it in."""

    def __init__(self) -> None:
        self._value: PickledArray | Unconvertible | OpaqueValue | None = None

    def __repr__(self) -> str:
        return "numpy.ndarray(...)"

    def build(self, state: Any) -> None:
        if self._value is not None:
            raise CorruptCheckpoint("numpy.ndarray: BUILD applied twice")
        if isinstance(state, tuple) and len(state) == 5 and state[0] == 1:
            state = state[1:]
        if not isinstance(state, tuple) or len(state) != 4:
            raise CorruptCheckpoint(f"numpy.ndarray: unexpected state {short_repr(state)}")
        shape, dtype, fortran, data = state
        self._value = _array(data, dtype, shape, bool(fortran), "numpy.ndarray")

    def settled(self) -> PickledArray | Unconvertible | OpaqueValue:
        if self._value is None:
            raise CorruptCheckpoint("a pickled numpy.ndarray has no state (no BUILD): not written by numpy")
        return self._value


def _array(data: Any, dtype: Any, shape: Any, fortran: Any, fn: str) -> PickledArray | Unconvertible | OpaqueValue:
    dt = _require_dtype(dtype, fn)
    if not isinstance(fortran, bool):
        raise CorruptCheckpoint(f"{fn}: the Fortran-order flag must be a bool, got {short_repr(fortran)}")
    if not isinstance(data, (bytes, bytearray)):
        raise CorruptCheckpoint(f"{fn}: expected the array's bytes, got {type(data).__name__}")
    if not dt.numeric:
        return OpaqueValue(f"numpy array of dtype {dt.code}")
    npdt = dt.numpy()
    shape = check_numpy_shape(shape, npdt.itemsize, f"{fn} of {dt!r}")
    count = prod(shape)
    if count * npdt.itemsize != len(data):
        raise CorruptCheckpoint(
            f"{fn}: shape {list(shape)} of {npdt} needs {count * npdt.itemsize:,} bytes, the pickle holds {len(data):,}"
        )
    ours = our_dtype(npdt, fn)
    return ours if isinstance(ours, Unconvertible) else PickledArray(ours, shape, data, npdt, fortran and len(shape) > 1)


def _reconstruct(subtype: Any, shape: Any, typecode: Any) -> NumpyArray:
    if subtype is not NDARRAY or shape != (0,) or typecode not in (b"b", "b"):
        raise CorruptCheckpoint(
            f"numpy _reconstruct: only (numpy.ndarray, (0,), b'b') is allowed, got "
            f"{short_repr((subtype, shape, typecode))}"
        )
    return NumpyArray()


def _frombuffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> NumpyArray:
    """Pickle protocol 5's form of an array: its bytes, dtype, shape and order in one call."""
    if order not in ("C", "F"):
        raise CorruptCheckpoint(f"numpy _frombuffer: order must be 'C' or 'F', got {short_repr(order)}")
    array = NumpyArray()
    array._value = _array(buffer, dtype, shape, order == "F", "numpy _frombuffer")
    return array


def array_bytes_of(leaves: list[Any]) -> int:
    """Bytes of the distinct pickled buffers behind these leaves."""
    buffers = {id(leaf.data): len(leaf.data) for leaf in leaves if isinstance(leaf, PickledArray)}
    return sum(buffers.values())


def _numpy_allowlist() -> dict[tuple[str, str], Any]:
    table: dict[tuple[str, str], Any] = {("numpy", "ndarray"): NDARRAY}
    table[("numpy", "dtype")] = Allowed("numpy.dtype", _dtype)
    # numpy 1.x pickles name numpy.core, numpy 2.x numpy._core
    for core in ("numpy.core", "numpy._core"):
        table[(f"{core}.multiarray", "scalar")] = Allowed(f"{core}.multiarray.scalar", _scalar)
        table[(f"{core}.multiarray", "_reconstruct")] = Allowed(f"{core}.multiarray._reconstruct", _reconstruct)
        table[(f"{core}.numeric", "_frombuffer")] = Allowed(f"{core}.numeric._frombuffer", _frombuffer)
    return table


NUMPY_ALLOWLIST = _numpy_allowlist()
