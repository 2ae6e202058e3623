"""numpy-based stand-ins for the torch objects a ``torch.save`` pickle names, and the allowlist.

Nothing here imports torch.  A tensor unpickles to a :class:`TensorRef` (storage, offset, shape,
stride, dtype) whose bytes are read only when it is written; a storage unpickles to a
:class:`Storage` whose bytes come straight from the checkpoint file.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np

from .._adapters.numpy import numpy_dtype
from ..errors import CorruptCheckpoint, SafetensorError, UnsupportedCheckpoint, UnsupportedDtype
from ..format.dtypes import BY_TORCH_NAME, DType
from .checkpoint import SourceTensor, Unconvertible
from .limits import Budget, short_repr
from .numpy_objects import NUMPY_ALLOWLIST, array_bytes_of
from .unpickler import Allowed

# torch dtype name -> our dtype, through the torch column of THE dtype table.
TORCH_DTYPES: dict[str, DType] = BY_TORCH_NAME
# dtypes torch can save that safetensors cannot hold: they unpickle, but a tensor of one is refused.
UNSUPPORTED_TORCH_DTYPES = (
    "complex128", "complex32", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
    *(f"uint{n}" for n in range(1, 8)), *(f"int{n}" for n in range(1, 8)),
    "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16",
)
# Legacy typed storage classes (torch.FloatStorage...) -> torch dtype name.
LEGACY_STORAGES = {
    "DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
    "LongStorage": "int64", "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8",
    "ByteStorage": "uint8", "BoolStorage": "bool", "BFloat16Storage": "bfloat16",
    "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
}


@dataclass(frozen=True)
class TorchDType:
    """What a ``torch.float32`` global unpickles to; ``dtype`` is None when safetensors lacks it."""

    name: str
    dtype: DType | None


@dataclass(frozen=True)
class StorageType:
    """What ``torch.FloatStorage`` / ``torch.storage.UntypedStorage`` unpickle to (never called)."""

    name: str
    torch_dtype: TorchDType  # uint8 for untyped storage


@dataclass(eq=False)
class Storage:
    """A run of bytes in the checkpoint: ``root`` identifies the file storage it lies in."""

    root: str
    byte_offset: int  # start within the root storage (non-zero for legacy storage views)
    nbytes: int
    root_nbytes: int
    torch_dtype: TorchDType
    byteorder: str  # "little" or "big"
    # fetch(start, length): uint8 bytes [start, start + length) of the root storage
    fetch: Callable[[int, int], np.ndarray] = field(repr=False)

    def bytes(self, start: int = 0, length: int | None = None) -> np.ndarray:
        """``length`` bytes (default: to the end) from ``start`` within this storage; only
        those are read (a view of a mapped file, else a positional read)."""
        length = self.nbytes - start if length is None else length
        return self.fetch(self.byte_offset + start, length)


@dataclass(eq=False)
class TensorRef(SourceTensor):
    """A tensor as (storage, element offset, shape, stride, dtype); bytes are read on demand."""

    storage: Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: DType
    conj: bool = False
    neg: bool = False

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape in the file: torch's float4_e2m1fn_x2 packs two F4 values per element."""
        return self.dtype.file_shape(self.shape)  # a 0-d pair: refused by the layout, as upstream

    @property
    def numel(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def tie_key(self) -> tuple[Any, ...]:
        """Equal keys mean the same bytes viewed the same way: a tied weight."""
        item = self.dtype.itemsize
        return (self.storage.root, self.storage.byte_offset + self.offset * item, self.shape,
                self.stride, self.dtype.code, self.conj, self.neg)

    def read(self) -> np.ndarray:
        """The tensor's bytes: uint8, C order, little-endian (a view when nothing needs moving)."""
        if not self.numel:
            # No bytes to read, and no numpy shape to build: [0, 2**62, 2**62] is a valid
            # torch and safetensors shape that numpy refuses.
            return np.empty(0, dtype=np.uint8)
        item = self.dtype.itemsize
        # Only the elements the tensor reaches (make_tensor checked they lie in the storage).
        span = 1 + sum((d - 1) * s for d, s in zip(self.shape, self.stride))
        raw = self.storage.bytes(self.offset * item, span * item)
        elems = raw.view(np.dtype(f"<u{item}") if item > 1 else np.uint8)
        arr = np.lib.stride_tricks.as_strided(
            elems, self.shape, tuple(s * item for s in self.stride), writeable=False
        )
        arr = np.ascontiguousarray(arr)  # strided views: copied once, in logical C order
        if self.storage.byteorder == "big" and item > 1:
            # complex64 is two float32s: swap each half, not the 8-byte whole.
            part = item // 2 if self.dtype.kind == "complex" else item
            arr = arr.view(f"<u{part}").byteswap()
        if self.conj or self.neg:
            typed = arr.view(numpy_dtype(self.dtype))
            typed = np.conj(typed) if self.conj else typed
            typed = np.negative(typed) if self.neg else typed
            arr = np.ascontiguousarray(typed)
        return arr.reshape(-1).view(np.uint8)


def storage_reference(pid: Any, size: int, label: str) -> tuple[Any, ...]:
    """A ``torch.save`` persistent id of ``size`` items, ``("storage", type, key, location,
    numel, ...)``, checked before anything is looked up for it."""
    if not isinstance(pid, tuple) or len(pid) != size or pid[0] not in ("storage", b"storage"):
        raise CorruptCheckpoint(f"{label}: unexpected persistent id {short_repr(pid)}")
    _, stype, key, _location, numel = pid[:5]
    if (
        not isinstance(stype, StorageType) or not isinstance(key, str) or not isinstance(numel, int)
        or not 0 <= numel < 1 << 63
    ):
        raise CorruptCheckpoint(f"{label}: malformed storage reference {short_repr(pid)}")
    return pid


def storage_bytes_of(leaves: list[Any]) -> int:
    """Bytes of the distinct file storages (and pickled numpy buffers) behind these tensors:
    what the checkpoint spends on them."""
    roots: dict[str, int] = {}
    for leaf in leaves:
        if isinstance(leaf, TensorRef):
            roots[leaf.storage.root] = leaf.storage.root_nbytes
    return sum(roots.values()) + array_bytes_of(leaves)


# --- the rebuild functions ---------------------------------------------------------------------

_MAX_NDIM = 32
_INT64 = 1 << 63


def _ints(value: Any, what: str, fn: str) -> tuple[int, ...]:
    """A tuple of ints that fit torch's int64 (sizes, strides): anything else is no torch record."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (tuple, list)) or len(value) > _MAX_NDIM or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise CorruptCheckpoint(
            f"{fn}: {what} must be a tuple of at most {_MAX_NDIM} ints, got {short_repr(value)}"
        )
    for v in value:
        if not -_INT64 <= v < _INT64:
            raise CorruptCheckpoint(
                f"{fn}: {what} {short_repr(list(value))} holds {short_repr(v)}, which does not fit "
                "torch's int64 sizes (no torch tensor has it)"
            )
    return tuple(value)


def make_tensor(storage: Any, offset: Any, size: Any, stride: Any, dtype: DType | None, fn: str,
                metadata: Any = None, torch_dtype: TorchDType | None = None) -> TensorRef | Unconvertible:
    """Check (offset, size, stride) against the storage and return the tensor they describe."""
    if not isinstance(storage, Storage):
        raise CorruptCheckpoint(f"{fn}: expected a storage, got {type(storage).__name__}")
    shape = _ints(size, "size", fn)
    strides = _ints(stride, "stride", fn)
    if not isinstance(offset, int) or isinstance(offset, bool) or not -_INT64 <= offset < _INT64:
        raise CorruptCheckpoint(f"{fn}: storage offset must be an int64, got {short_repr(offset)}")
    if len(shape) != len(strides) or len(shape) > _MAX_NDIM:
        raise CorruptCheckpoint(f"{fn}: size {list(shape)} and stride {list(strides)} do not match")
    if offset < 0 or any(d < 0 for d in shape) or any(s < 0 for s in strides):
        raise CorruptCheckpoint(
            f"{fn}: negative offset, size or stride (offset {offset}, size {list(shape)}, "
            f"stride {list(strides)})"
        )
    if dtype is None:
        torch_dtype = torch_dtype or storage.torch_dtype
        if torch_dtype.dtype is None:
            # Fails only if this tensor is selected for writing (another --key may avoid it).
            return Unconvertible(
                f"a torch.{torch_dtype.name} tensor has no safetensors equivalent",
                lambda name: UnsupportedDtype(
                    f"tensor {name!r}: torch.{torch_dtype.name} has no safetensors equivalent",
                    tensor=name, dtype=torch_dtype.name,
                ),
            )
        dtype = torch_dtype.dtype
    elements = storage.nbytes // dtype.itemsize
    if all(shape):
        last = offset + sum((d - 1) * s for d, s in zip(shape, strides))
        if last >= elements:
            raise CorruptCheckpoint(
                f"{fn}: tensor of size {list(shape)}, stride {list(strides)} at offset {offset} "
                f"reaches element {last}, but its storage {storage.root!r} holds {elements}",
                storage=storage.root,
            )
    conj = neg = False
    if metadata:
        if not isinstance(metadata, dict):
            raise CorruptCheckpoint(f"{fn}: tensor metadata must be a dict, got {short_repr(metadata)}")
        conj, neg = bool(metadata.get("conj", False)), bool(metadata.get("neg", False))
    return TensorRef(storage, offset, shape, strides, dtype, conj, neg)


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any) -> TensorRef | Unconvertible:
    return make_tensor(storage, offset, size, stride, None, "_rebuild_tensor")


def _rebuild_tensor_v2(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                       backward_hooks: Any = None, metadata: Any = None) -> TensorRef | Unconvertible:
    return make_tensor(storage, offset, size, stride, None, "_rebuild_tensor_v2", metadata)


def _rebuild_tensor_v3(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any,
                       backward_hooks: Any, dtype: Any, metadata: Any = None) -> TensorRef | Unconvertible:
    if not isinstance(dtype, TorchDType):
        raise CorruptCheckpoint(f"_rebuild_tensor_v3: expected a torch dtype, got {short_repr(dtype)}")
    fn = "_rebuild_tensor_v3"
    return make_tensor(storage, offset, size, stride, None, fn, metadata, torch_dtype=dtype)


def _rebuild_parameter(data: Any, requires_grad: Any = True, backward_hooks: Any = None,
                       state: Any = None) -> TensorRef | Unconvertible:
    if not isinstance(data, (TensorRef, Unconvertible)):
        raise CorruptCheckpoint(f"_rebuild_parameter: expected a tensor, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class TorchClass:
    """What ``torch.Tensor`` / ``torch.nn.Parameter`` unpickle to: a name, never instantiated."""

    name: str


def _rebuild_from_type_v2(func: Any, new_type: Any, args: Any, state: Any) -> TensorRef | Unconvertible:
    # torch writes this for tensors carrying Python attributes; only plain Tensor/Parameter
    # types are accepted, and the attributes (state) are dropped.  ``func`` may only be one of
    # the tensor rebuild functions: they allocate nothing, so calling them here, outside the
    # unpickler's accounting, costs nothing the pickle did not pay for.
    if (
        not isinstance(func, Allowed)
        or func.function not in _TENSOR_REBUILDERS
        or not isinstance(new_type, TorchClass)
        or not isinstance(args, tuple)
    ):
        raise CorruptCheckpoint(
            f"_rebuild_from_type_v2: unexpected arguments {short_repr(func)}, {short_repr(new_type)}"
        )
    result = func.function(*args)
    if not isinstance(result, (TensorRef, Unconvertible)):
        raise CorruptCheckpoint(f"_rebuild_from_type_v2: {func.qualname} did not build a tensor")
    return result


def _ordered_dict(budget: Budget, items: Any = ()) -> OrderedDict[Any, Any]:
    if isinstance(items, (dict, OrderedDict)):
        items = list(items.items())
    if not isinstance(items, (list, tuple)) or not all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in items
    ):
        raise CorruptCheckpoint(f"OrderedDict: expected a list of pairs, got {type(items).__name__}")
    budget.check_keys(pair[0] for pair in items)
    return OrderedDict(items)


class TorchSize(tuple):  # type: ignore[type-arg]
    """A torch.Size: a plain tuple of ints, kept apart so flattening treats it as one value."""


def _size(dims: Any = ()) -> TorchSize:
    return TorchSize(_ints(dims, "dims", "torch.Size"))


def _device(kind: Any, index: Any = None) -> str:
    if not isinstance(kind, str) or not (index is None or isinstance(index, int)):
        raise CorruptCheckpoint(f"torch.device: bad arguments {short_repr(kind)}, {short_repr(index)}")
    return kind if index is None else f"{kind}:{index}"


def _latin1_bytes(text: Any, encoding: Any = "latin1") -> bytes:
    # Protocol 2 writes bytes as _codecs.encode(str, "latin1").
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise CorruptCheckpoint(f"_codecs.encode: only (str, 'latin1') is allowed, got {short_repr(encoding)}")
    return text.encode("latin-1")


def _empty_bytes(*args: Any) -> bytes:
    # Protocol 2 writes an empty bytes object as bytes() (a non-empty one via _codecs.encode).
    if args:
        raise CorruptCheckpoint(f"bytes: only bytes() is allowed, got arguments {short_repr(args)}")
    return b""


def _plain(kind: type) -> Callable[..., Any]:
    """set / frozenset / bytearray of one plain argument, its cost checked before it is built."""

    def build(budget: Budget, *args: Any) -> Any:
        if len(args) > 1 or not all(isinstance(a, (list, tuple, str, bytes, int, float)) for a in args):
            raise CorruptCheckpoint(f"{kind.__name__}: unexpected arguments {short_repr(args)}")
        if args and kind is bytearray and isinstance(args[0], int):
            budget.charge(args[0], f"bytearray({args[0]:,})")  # bytearray(n) allocates n bytes
        elif args and kind is not bytearray:
            budget.check_keys(args[0] if not isinstance(args[0], (int, float)) else ())
        return kind(*args)

    return build


def _complex(real: Any = 0.0, imag: Any = 0.0) -> complex:
    if not all(isinstance(v, (int, float)) for v in (real, imag)):
        raise CorruptCheckpoint(f"complex: unexpected arguments {short_repr(real)}, {short_repr(imag)}")
    return complex(real, imag)


def _slice(*args: Any) -> slice:
    if len(args) > 3 or not all(a is None or isinstance(a, int) for a in args):
        raise CorruptCheckpoint(f"slice: unexpected arguments {short_repr(args)}")
    return slice(*args)


def _unsupported(reason: str) -> Callable[[str, int], SafetensorError]:
    def make(qualname: str, position: int) -> SafetensorError:
        return UnsupportedCheckpoint(
            f"{qualname} at byte {position}: {reason}", global_name=qualname, position=position
        )

    return make


def build_allowlist() -> dict[tuple[str, str], Any]:
    """(module, name) -> stand-in, for every global a torch.save pickle of tensors may name."""
    table: dict[tuple[str, str], Any] = {}
    for fn in (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3):
        table[("torch._utils", fn.__name__)] = Allowed(f"torch._utils.{fn.__name__}", fn)
    for name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
        table[("torch._utils", name)] = Allowed(f"torch._utils.{name}", _rebuild_parameter)
    dtypes: dict[str, TorchDType] = {}
    for name, d in TORCH_DTYPES.items():
        dtypes[name] = TorchDType(name, d)
    for name in UNSUPPORTED_TORCH_DTYPES:
        dtypes[name] = TorchDType(name, None)
    for name, td in dtypes.items():
        table[("torch", name)] = td
    for cls, dname in LEGACY_STORAGES.items():
        for module in ("torch", "torch.cuda"):
            table[(module, cls)] = StorageType(cls, dtypes[dname])
    for module in ("torch", "torch.storage"):
        table[(module, "UntypedStorage")] = StorageType("UntypedStorage", dtypes["uint8"])
    table[("torch._tensor", "_rebuild_from_type_v2")] = Allowed(
        "torch._tensor._rebuild_from_type_v2", _rebuild_from_type_v2
    )
    for module, name in (("torch", "Tensor"), ("torch._tensor", "Tensor"), ("torch.nn.parameter", "Parameter")):
        table[(module, name)] = TorchClass(f"{module}.{name}")
    table[("torch", "Size")] = Allowed("torch.Size", _size)
    table[("torch", "device")] = Allowed("torch.device", _device)
    table[("collections", "OrderedDict")] = Allowed("collections.OrderedDict", _ordered_dict, takes_budget=True)
    table[("builtins", "set")] = Allowed("builtins.set", _plain(set), takes_budget=True)
    table[("builtins", "frozenset")] = Allowed("builtins.frozenset", _plain(frozenset), takes_budget=True)
    table[("builtins", "bytearray")] = Allowed("builtins.bytearray", _plain(bytearray), takes_budget=True)
    table[("builtins", "complex")] = Allowed("builtins.complex", _complex)
    table[("builtins", "slice")] = Allowed("builtins.slice", _slice)
    table[("_codecs", "encode")] = Allowed("_codecs.encode", _latin1_bytes)
    table[("builtins", "bytes")] = Allowed("builtins.bytes", _empty_bytes)
    table.update(NUMPY_ALLOWLIST)
    return table


REFUSED: dict[tuple[str, str], Callable[[str, int], SafetensorError]] = {
    ("torch._utils", "_rebuild_qtensor"): _unsupported("quantized tensors have no safetensors equivalent"),
    ("torch._utils", "_rebuild_sparse_tensor"): _unsupported("sparse tensors have no safetensors equivalent"),
    ("torch._utils", "_rebuild_nested_tensor"): _unsupported("nested tensors have no safetensors equivalent"),
    ("torch._utils", "_rebuild_meta_tensor_no_storage"): _unsupported("meta tensors hold no data"),
    ("torch._utils", "_rebuild_wrapper_subclass"): _unsupported("tensor subclasses cannot be converted"),
    ("torch._utils", "_rebuild_device_tensor_from_numpy"): _unsupported(
        "tensors saved through numpy on a non-CPU device cannot be converted"
    ),
    ("torch._utils", "_rebuild_device_tensor_from_cpu_tensor"): _unsupported(
        "tensors of this device type cannot be converted"
    ),
}

_TENSOR_REBUILDERS = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter)
ALLOWLIST = build_allowlist()
