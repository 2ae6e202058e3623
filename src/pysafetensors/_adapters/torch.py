"""torch <-> raw bytes: zero-copy tensors over the map, upstream's save checks."""

from __future__ import annotations

from functools import cache
from numbers import Integral
from typing import TYPE_CHECKING, Any

from .._device import Device
from .._optional import require
from ..errors import InvalidDevice, SerializeError, UnsupportedDtype, UnsupportedShape
from ..format.dtypes import DType, reverse_table
from ..format.slicing import plan_slice
from ..reader import RawTensor, TensorFile, check_representable

if TYPE_CHECKING:
    from ..writer import WriteItem

_INT64_MAX = (1 << 63) - 1

NAME = "torch"
torch = require("torch", "torch")


@cache
def torch_dtype(dtype: DType) -> Any:
    attr = dtype.torch
    tdt = getattr(torch, attr, None) if attr else None
    if tdt is None:
        raise UnsupportedDtype(
            f"dtype {dtype.code} is not supported by torch {torch.__version__}", dtype=dtype.code
        )
    return tdt


@cache
def _reverse() -> dict[Any, DType]:
    return reverse_table(lambda d: getattr(torch, d.torch, None) if d.torch else None)


def format_dtype(value: Any) -> DType | None:
    """The format dtype of a torch dtype, or None."""
    return _reverse().get(value) if isinstance(value, torch.dtype) else None


def dtype_of(tensor: Any, name: str = "") -> DType:
    try:
        return _reverse()[tensor.dtype]
    except KeyError:
        raise UnsupportedDtype(
            f"tensor {name!r}: torch dtype {tensor.dtype} has no safetensors equivalent",
            tensor=name,
            dtype=str(tensor.dtype),
        ) from None


def _device_count(kind: str) -> int:
    """How many ``kind`` devices this torch build and machine offer (0: none, or no support)."""
    if kind == "cuda":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        return 1 if mps is not None and mps.is_available() else 0
    if kind == "xla":
        import importlib.util

        return 1 << 30 if importlib.util.find_spec("torch_xla") is not None else 0  # torch_xla judges the index
    # xpu is built in; npu, mlu, musa and hpu appear on torch once their plugin is imported.
    module = getattr(torch, kind, None)
    try:
        return int(module.device_count()) if module is not None and module.is_available() else 0
    except Exception:  # noqa: BLE001 - a half-installed plugin is "not available", not a crash
        return 0


_PLUGINS = {"npu": "torch_npu", "mlu": "torch_mlu", "musa": "torch_musa", "hpu": "habana_frameworks.torch", "xla": "torch_xla"}


def check_device(device: Device) -> None:
    """Open time: any device upstream parses is accepted (keys and metadata need none); its
    availability is checked by ``require_available`` when a tensor first moves there."""


@cache
def require_available(device: Device) -> None:
    """Refuse a device this torch or machine does not have, with an InvalidDevice naming it
    (torch's own errors for them are AssertionError, RuntimeError or ModuleNotFoundError)."""
    if device.is_cpu:
        return
    count = _device_count(device.kind)
    index = device.index or 0
    if index < count:
        return
    if count:
        have = f"{count} {device.kind} device(s)"
    else:
        plugin = _PLUGINS.get(device.kind)
        have = f"no {device.kind} support" + (f" (is {plugin} installed and imported?)" if plugin else "")
    raise InvalidDevice(
        f"Device {device.shown} is not available for framework pytorch (torch {torch.__version__} here has {have})",
        device=str(device),
        framework=NAME,
    )


def torch_device(device: Device) -> Any:
    return torch.device(str(device))


def _torch_shape(raw_dtype: DType, shape: tuple[int, ...], name: str) -> tuple[int, ...]:
    paired = raw_dtype.paired_shape(shape)  # float4_e2m1fn_x2 holds two F4 values per element
    if paired is None:
        raise UnsupportedDtype(
            f"tensor {name!r}: F4 {list(shape)} has an odd last dimension, which "
            "torch.float4_e2m1fn_x2 (two values per byte) cannot represent",
            tensor=name,
        )
    return paired


def to_torch(raw: RawTensor) -> Any:
    tdt = torch_dtype(raw.dtype)
    shape = _torch_shape(raw.dtype, raw.shape, raw.name)
    check_representable(raw.name, shape)  # torch's shape: an F4 last dim of 2**63 halves to fit
    if len(raw.data) == 0:
        if _extent(shape[1:]) > _INT64_MAX:
            # torch's contiguous strides are products of max(dim, 1) of the later dims.
            raise UnsupportedShape(
                f"tensor {raw.name!r}: torch cannot represent shape {list(raw.shape)} (its strides "
                "overflow int64, even though the tensor is empty)",
                tensor=raw.name,
                shape=raw.shape,
            )
        return torch.empty(shape, dtype=tdt)
    data: Any = raw.data
    if not raw.writable:
        # Caller-owned immutable bytes: torch tensors are always writable, so copy once
        # rather than let a write mutate a bytes object.
        data = bytearray(raw.data)
    # ``data`` is writable here (a copy-on-write map, a fresh buffer or the copy above), so
    # torch.frombuffer has nothing to warn about and shares the memory.  Straight in the
    # target dtype (every torch dtype here supports it), then one view: fewer tensor objects
    # than via uint8, which shows when loading thousands of small tensors.
    return torch.frombuffer(data, dtype=tdt).view(shape)


def from_raw(raw: RawTensor, device: Device) -> Any:
    if not device.is_cpu:
        require_available(device)
    t = to_torch(raw)
    return t if device.is_cpu else t.to(torch_device(device))


def _simple_index(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    for item in items:
        if item is Ellipsis or (isinstance(item, int) and not isinstance(item, bool)):
            continue
        if isinstance(item, slice) and all(
            v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in (item.start, item.stop, item.step)
        ) and (item.step is None or item.step > 0):
            continue
        return False
    return sum(1 for i in items if i is Ellipsis) <= 1


def _extent(shape: tuple[int, ...]) -> int:
    """Product of max(dim, 1): what torch's stride and offset arithmetic multiplies up to."""
    extent = 1
    for d in shape:
        extent *= max(d, 1)
    return extent


def _torch_index_may_overflow(shape: tuple[int, ...], index: Any) -> bool:
    """Whether torch's own indexing of ``shape`` with ``index`` may wrap int64 (byte offsets of
    up to 16-byte items, times the largest slice step).  An empty [2**63 - 1, 0, 2] tensor
    builds, but torch then computes wrapped offsets and strides ("invalid storage offset -14",
    "negative strides"), and the fuzzer saw it crash.  Real tensors are nowhere near."""
    step = 1
    for item in index if isinstance(index, tuple) else (index,):
        if isinstance(item, slice) and isinstance(item.step, int):
            step = max(step, abs(item.step))
    return _extent(shape) * 16 * step > _INT64_MAX


def _full_slice(item: slice) -> bool:
    """``:`` as torch's slice fast path sees it: start 0, step 1, stop at least int64's max."""
    return (
        item.start in (None, 0)
        and item.step in (None, 1)
        and (item.stop is None or (isinstance(item.stop, int) and item.stop >= _INT64_MAX))
    )


def _dim_error(dim: int, ndim: int) -> IndexError:
    return IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")


#: sizes and strides a tensor keeps in its own object up to this many dims (c10's
#: C10_SIZES_AND_STRIDES_MAX_INLINE_SIZE), in one array: the sizes, then the strides
_INLINE_DIMS = 5


def _read_in_bounds(dim: int, rdim: int) -> bool:
    """Whether torch, reading the size of dim ``dim`` of a ``rdim``-dim tensor without a check,
    stays inside the array that holds its sizes and strides (2 x _INLINE_DIMS items in the
    tensor up to _INLINE_DIMS dims, 2 x rdim on the heap beyond): it then reads a stride or an
    unused slot, a number, never memory of something else."""
    return dim < (2 * _INLINE_DIMS if rdim <= _INLINE_DIMS else 2 * rdim)


def _expand_ellipses(index: Any, ndim: int) -> Any:
    """An index with two or more ``...`` rewritten without them, as torch means it.

    Torch skips (ndim - specified) dims at each ``...``, so later items can land past the last
    dim, where its fast paths read the size of a dim that does not exist before checking it
    (the fuzzer's rare segfault, in ``at::indexing::impl::applySelect``).  Here each ``...``
    becomes the ``:`` it stands for; a ``:`` past the end is dropped (torch returns the tensor
    unchanged there) and anything else past the end gets torch's own IndexError, so torch is
    only ever asked an in-range index.  One exception, so that the answer is upstream's (which
    hands every index to torch): a slice starting at 0 with step 1 past the end, where torch's
    read stays inside the tensor's own size and stride array (:func:`_read_in_bounds`), makes
    torch's slice fast path compare its stop with the number it reads there and return the
    tensor unchanged when the stop is not smaller (an empty ``[2, 0, 3, 1]`` tensor indexed
    ``[..., ..., :5]``).  Such an index is handed to torch as given: the read is safe.  Indexes
    with at most one ``...`` are returned as given.
    """
    items = index if isinstance(index, tuple) else (index,)
    if sum(1 for i in items if i is Ellipsis) < 2:
        return index
    # numpy integers index like ints in torch (bools, numpy's included, are not Integral).
    items = tuple(int(i) if isinstance(i, Integral) and not isinstance(i, bool) else i for i in items)
    if any(not (i is None or i is Ellipsis or isinstance(i, (int, slice))) for i in items):
        raise IndexError(
            "an index with more than one ellipsis ('...') may only hold ints, slices, bools and None "
            "(torch mis-indexes the others)"
        )
    specified = sum(1 for i in items if isinstance(i, (int, slice)) and not isinstance(i, bool))
    if specified > ndim:
        return index  # torch refuses it up front ("too many indices"), before any lookup
    out: list[Any] = []
    dim, rdim = 0, ndim  # torch's position and the current result's rank
    torch_decides = False  # a slice past the end that torch may take as a no-op (see above)
    for item in items:
        if item is Ellipsis:
            for _ in range(ndim - specified):
                if dim < rdim:
                    out.append(slice(None))
                dim += 1
        elif item is None or isinstance(item, bool):  # unsqueeze here (then a bool mask)
            if dim > rdim:
                raise _dim_error(dim, rdim + 1)
            out.append(item)
            dim, rdim = dim + 1, rdim + 1
        elif isinstance(item, int):  # select: the dim goes away
            if dim >= rdim:
                raise _dim_error(dim, rdim)
            out.append(item)
            rdim -= 1
        else:
            if dim >= rdim and not _full_slice(item):
                fast = item.start in (None, 0) and item.step in (None, 1)
                if not (fast and _read_in_bounds(dim, rdim)):
                    raise _dim_error(dim, rdim)
                torch_decides = True
            if dim < rdim:
                out.append(item)
            dim += 1
    return index if torch_decides else tuple(out)


def get_slice(file: TensorFile, name: str, index: Any, device: Device) -> Any:
    """torch indexing rules: read only the needed bytes for ints/slices/..., else index in torch."""
    if not device.is_cpu:
        require_available(device)
    info = file.info(name)
    index = _expand_ellipses(index, len(info.shape))
    explicit = [i for i in (index if isinstance(index, tuple) else (index,)) if i is not Ellipsis]
    in_range = all(
        not isinstance(i, int) or -d <= i < d for i, d in zip(explicit, info.shape)
    ) and len(explicit) <= len(info.shape)
    if _simple_index(index) and in_range and not info.dtype.paired:
        plan = plan_slice(info.shape, info.dtype, index, clamp=True, name=name)
        t = to_torch(file.raw_slice(name, plan))
    else:
        if _torch_index_may_overflow(info.shape, index):
            raise UnsupportedShape(
                f"tensor {name!r}: torch cannot index shape {list(info.shape)} with {index!r} "
                "(its offsets would overflow int64; plain ints and slices with positive steps work)",
                tensor=name,
                shape=info.shape,
            )
        t = to_torch(file.raw(name))[index]
    return t if device.is_cpu else t.to(torch_device(device))


def tensor_bytes(tensor: Any) -> Any:
    """The bytes of a contiguous CPU tensor, as a zero-copy numpy uint8 view.

    A conjugate or negative view (``x.conj()``, ``torch._neg_view(x)``) keeps the
    un-negated values in memory with a lazy bit; torch refuses to view those as bytes, and the
    raw memory holds the wrong values anyway.  Those are resolved into one copy so the file
    holds the values the tensor shows.
    """
    t = tensor.detach()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if t.device.type != "cpu":
        t = t.to("cpu")
    flat = t.contiguous().reshape(-1)  # a strided 1-d view reshapes to itself: bytes need C order
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy()


def to_write_item(name: str, tensor: Any) -> WriteItem:
    if not isinstance(tensor, torch.Tensor):
        raise SerializeError(f"tensor {name!r}: expected torch.Tensor, got {type(tensor).__name__}", tensor=name)
    dtype = dtype_of(tensor, name)
    from ..writer import WriteItem  # the write side, imported on first save

    return WriteItem(name, dtype, dtype.file_shape(tuple(tensor.shape)), lambda: tensor_bytes(tensor))
