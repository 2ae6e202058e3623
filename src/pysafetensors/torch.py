"""torch face: save, save_file, load, load_file, save_model, load_model (upstream-compatible).

Shared/tied tensors are handled exactly as upstream: ``save`` refuses tensors that share
memory, ``save_model`` drops duplicates (recording them in metadata) and ``load_model``
restores them.  CPU tensors from ``load_file`` share the copy-on-write map of the file.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._adapters import torch as _adapter
from ._device import parse_device
from ._face import FileOnDeviceFace, declare
from ._lazy import lazy_attributes
from ._optional import require
from .errors import UnknownDtype, UnsupportedDtype
from .format.dtypes import by_code
from .handle import safe_open  # noqa: F401 - upstream's module has it

if TYPE_CHECKING:
    from ._api import TensorSpec, deserialize, serialize, serialize_file  # noqa: F401 - upstream's module has them

torch = require("torch", "torch")

__all__ = [
    "load",
    "load_file",
    "load_model",
    "save",
    "save_file",
    "save_model",
    "save_sharded",
    "storage_ptr",
    "storage_size",
]

# Upstream's module has these too.  They load on first use, as from the package root: reading
# needs none of them.
_FROM_API = ("TensorSpec", "deserialize", "serialize", "serialize_file")
__getattr__, __dir__ = lazy_attributes(__name__, globals(), dict.fromkeys(_FROM_API, "._api"), _FROM_API, ())


# --- shared-storage bookkeeping (same rules as upstream) ---------------------------------


def _itemsize(tensor: Any) -> int:
    return _adapter.dtype_of(tensor).itemsize  # float4_e2m1fn_x2: one byte per (paired) element


def storage_ptr(tensor: Any) -> int:
    """Address of the tensor's storage (0 for meta tensors)."""
    try:
        return int(tensor.untyped_storage().data_ptr())
    except Exception:  # noqa: BLE001 - upstream's fallback for old torch and odd tensor types
        try:
            return int(tensor.storage().data_ptr())
        except NotImplementedError:
            return 0


def storage_size(tensor: Any) -> int:
    """Bytes in the tensor's storage."""
    try:
        return int(tensor.untyped_storage().nbytes())
    except AttributeError:
        try:
            return int(tensor.storage().size()) * _itemsize(tensor)
        except NotImplementedError:
            return int(tensor.nelement()) * _itemsize(tensor)


def _getdtype(dtype_str: str) -> Any:
    """The torch dtype a header code (``"F32"``) loads as; KeyError when torch has none, as
    upstream's table lookup (torch.distributed.checkpoint calls this helper)."""
    try:
        return _adapter.torch_dtype(by_code(dtype_str))
    except (UnknownDtype, UnsupportedDtype):
        raise KeyError(dtype_str) from None


def _end_ptr(tensor: Any) -> int:
    if tensor.nelement():
        return int(tensor.view(-1)[-1].data_ptr()) + _itemsize(tensor)
    return int(tensor.data_ptr())


def _filter_shared_not_shared(tensors: list[set[str]], state_dict: Mapping[str, Any]) -> list[set[str]]:
    """Split groups sharing a storage into those whose byte ranges really overlap."""
    filtered: list[set[str]] = []
    for shared in tensors:
        if len(shared) < 2:
            filtered.append(shared)
            continue
        areas = sorted((state_dict[n].data_ptr(), _end_ptr(state_dict[n]), n) for n in shared)
        _, last_stop, last_name = areas[0]
        filtered.append({last_name})
        for start, stop, name in areas[1:]:
            if start >= last_stop:
                filtered.append({name})
            else:
                filtered[-1].add(name)
            last_stop = stop
    return filtered


def _find_shared_tensors(state_dict: Mapping[str, Any]) -> list[set[str]]:
    """Groups of names whose tensors overlap in memory."""
    groups: dict[tuple[Any, int, int], set[str]] = defaultdict(set)
    meta = torch.device("meta")
    for k, v in state_dict.items():
        if v.device == meta:
            continue
        ptr, size = _storage_key(v)
        if ptr != 0 and size != 0:
            groups[(v.device, ptr, size)].add(k)
    return _filter_shared_not_shared(sorted(groups.values()), state_dict)


def _storage_key(tensor: Any) -> tuple[int, int]:
    """(storage_ptr, storage_size) with one ``untyped_storage()`` call: the call is slow
    enough to dominate saving many small tensors when repeated per tensor."""
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except Exception:  # noqa: BLE001 - the fallbacks of storage_ptr/storage_size
        return storage_ptr(tensor), storage_size(tensor)


def _is_complete(tensor: Any) -> bool:
    return bool(tensor.data_ptr() == storage_ptr(tensor)) and tensor.nelement() * _itemsize(tensor) == storage_size(tensor)


def _remove_duplicate_names(
    state_dict: Mapping[str, Any],
    *,
    preferred_names: Any = None,
    discard_names: Any = None,
) -> dict[str, list[str]]:
    """For each shared group, the name to keep -> the names to drop."""
    preferred = set(preferred_names or [])
    discard = set(discard_names or [])
    to_remove: dict[str, list[str]] = defaultdict(list)
    for shared in _find_shared_tensors(state_dict):
        complete = {n for n in shared if _is_complete(state_dict[n])}
        if not complete:
            raise RuntimeError(
                "Error while trying to find names to remove to save state dict, but found no suitable name to keep"
                f" for saving amongst: {shared}. None is covering the entire storage.Refusing to save/load the model"
                " since you could be storing much more memory than needed. Please refer to"
                " https://huggingface.co/docs/safetensors/torch_shared_tensors for more information. Or open an"
                " issue."
            )
        keep = min(complete)
        not_discarded = complete - discard
        if not_discarded:
            keep = min(not_discarded)
        if preferred:
            chosen = preferred & complete
            if chosen:
                keep = min(chosen)
        for name in sorted(shared):
            if name != keep:
                to_remove[keep].append(name)
    return to_remove


# --- save ---------------------------------------------------------------------------------


def _evaluate_tensors_for_save(tensors: Mapping[str, Any]) -> None:
    """Upstream's rules for what the torch face saves: tensors only, dense, contiguous, and
    no two sharing memory."""
    sparse = []
    for k, v in tensors.items():
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"Key `{k}` is invalid, expected torch.Tensor but received {type(v)}")  # noqa: TRY004 - upstream's type
        if v.layout != torch.strided:
            sparse.append(k)
    if sparse:
        raise ValueError(
            f"You are trying to save a sparse tensors: `{sparse}` which this library does not support."
            " You can make it a dense tensor before saving with `.to_dense()` but be aware this might"
            " make a much larger file than needed."
        )
    failing = [names for names in _find_shared_tensors(tensors) if len(names) > 1]
    if failing:
        raise RuntimeError(
            f"""
            Some tensors share memory, this will lead to duplicate memory on disk and potential differences when loading them again: {failing}.
            A potential way to correctly save your model is to use `save_model`.
            More information at https://huggingface.co/docs/safetensors/torch_shared_tensors
            """
        )
    for k, v in tensors.items():
        if not v.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{k}` which is not allowed. It either means you"
                " are trying to save tensors which are reference of each other in which case it's recommended to save"
                " only the full tensors, and reslice at load time, or simply call `.contiguous()` on your tensor to"
                " pack it before saving."
            )


def _storage_id(tensor: Any) -> tuple[str, int] | None:
    ptr = storage_ptr(tensor)
    return (str(tensor.device), ptr) if ptr != 0 else None


save, save_file, save_sharded, load, load_file = declare(
    __name__, _adapter, framework="pt", what="tensors", face=FileOnDeviceFace,
    check=_evaluate_tensors_for_save, storage_id=_storage_id, shard_format="pt",
    docs={
        "save": """Serialize tensors to safetensors bytes.""",
        "save_file": """Save tensors to ``filename``: streamed from the tensors' memory, atomic rename.
    ``alignment`` (multiple of 8, e.g. 4096) places the data region on that boundary;
    ``durable=True`` fsyncs before the rename (default: ``PYSAFETENSORS_DURABLE``, else off).
    ``filename`` may be an fsspec URL (``s3://...``; ``storage_options`` for its filesystem):
    streamed to the store, published only when complete.""",
        "save_sharded": """Save tensors as a Hugging Face sharded checkpoint in ``directory`` (as save_pretrained does;
    a path, or an fsspec URL prefix such as ``s3://bucket/ckpt/`` with ``storage_options``).

    ``model-00001-of-00003.safetensors`` ... plus ``model.safetensors.index.json`` (a single
    shard is a plain ``model.safetensors``); every shard's header gets ``{"format": "pt"}``
    plus ``metadata``, the index ``{"total_size": ...}`` plus ``metadata``.  ``max_shard_size`` is bytes or "5GB"/"500MB" (decimal
    units); greedy in key order; tensors viewing one storage stay in one shard (tensors that
    overlap are refused, as by save_file).  Returns the index path (or the single file's path).""",
        "load": """Load tensors from safetensors bytes (CPU).""",
        "load_file": """Load every tensor of a file onto ``device``, in file order.
    ``threads``: parallel reads for ``backend="pread"`` and CUDA staging (default: CPUs available);
    ``storage_options`` for a remote ``filename``.""",
    },
)


def save_model(
    model: Any,
    filename: str,
    metadata: dict[str, str] | None = None,
    force_contiguous: bool = True,
    *,
    durable: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Save a module's state dict, dropping tied duplicates (recorded in metadata).
    ``filename`` may be an fsspec URL, as for ``save_file``."""
    state_dict = model.state_dict()
    to_removes = _remove_duplicate_names(state_dict)
    meta = dict(metadata) if metadata is not None else None
    for kept_name, group in to_removes.items():
        for name in group:
            if meta is None:
                meta = {}
            if name not in meta:
                meta[name] = kept_name
            del state_dict[name]
    if force_contiguous:
        state_dict = {k: v.contiguous() for k, v in state_dict.items()}
    try:
        save_file(state_dict, filename, metadata=meta, durable=durable, storage_options=storage_options)
    except ValueError as e:
        raise ValueError(
            str(e) + " Or use save_model(..., force_contiguous=True), read the docs for potential caveats."
        ) from e


def load_model(
    model: Any, filename: str | os.PathLike[str], strict: bool = True, device: Any = "cpu", *, backend: str | None = None
) -> tuple[list[str], list[str]]:
    """Load a file into a module, restoring tied weights; returns (missing, unexpected)."""
    parse_device(device)
    state_dict = load_file(filename, device=device, backend=backend)
    model_state_dict = model.state_dict()
    to_removes = _remove_duplicate_names(model_state_dict, preferred_names=state_dict.keys())
    missing_list, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = set(missing_list)
    for group in to_removes.values():
        for name in group:
            if name not in missing:
                unexpected.append(name)
            else:
                missing.remove(name)
    if strict and (missing or unexpected):
        missing_keys = ", ".join(f'"{k}"' for k in sorted(missing))
        unexpected_keys = ", ".join(f'"{k}"' for k in sorted(unexpected))
        error = f"Error(s) in loading state_dict for {model.__class__.__name__}:"
        if missing:
            error += f"\n    Missing key(s) in state_dict: {missing_keys}"
        if unexpected:
            error += f"\n    Unexpected key(s) in state_dict: {unexpected_keys}"
        raise RuntimeError(error)
    return missing, unexpected  # type: ignore[return-value]
