"""What the numpy-based framework faces (flax, tensorflow, paddle, mlx) share.

Each face is upstream's four functions over one adapter; the caller's dict is only read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Protocol

from ._device import parse_device
from .errors import UnsupportedValue
from .format._gcpause import paused_gc
from .handle import open_bytes, safe_open
from .writer import WriteItem, write_bytes, write_file


def _items(adapter: ModuleType, tensors: Mapping[str, Any], kind: str) -> list[WriteItem]:
    if not isinstance(tensors, Mapping):
        raise UnsupportedValue(f"Expected a dict of [str, {kind}] but received {type(tensors)}")
    # A new list of write items: unlike upstream's faces, the caller's dict is never rewritten.
    return [adapter.to_write_item(name, value) for name, value in tensors.items()]


@paused_gc()
def save(adapter: ModuleType, kind: str, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None) -> bytes:
    return write_bytes(_items(adapter, tensors, kind), metadata)


@paused_gc()
def save_file(
    adapter: ModuleType,
    kind: str,
    tensors: Mapping[str, Any],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None,
) -> None:
    write_file(_items(adapter, tensors, kind), filename, metadata)


class SaveSharded(Protocol):
    def __call__(
        self,
        tensors: Mapping[str, Any],
        directory: str | os.PathLike[str],
        max_shard_size: int | str = ...,
        metadata: Mapping[str, str] | None = ...,
        *,
        variant: str | None = ...,
        basename: str = ...,
        durable: bool | None = ...,
    ) -> str: ...


def make_save_sharded(adapter: ModuleType, kind: str, what: str, module: str) -> SaveSharded:
    """A face's ``save_sharded`` (numpy.py and torch.py's signature) over ``adapter``."""

    def save_sharded(
        tensors: Mapping[str, Any],
        directory: str | os.PathLike[str],
        max_shard_size: int | str = "5GB",
        metadata: Mapping[str, str] | None = None,
        *,
        variant: str | None = None,
        basename: str = "model",
        durable: bool | None = None,
    ) -> str:
        # No storage ids: these faces write every tensor in full (views are materialized),
        # so two tensors over one buffer may land in different shards without losing anything.
        from .sharded import write_sharded

        return write_sharded(
            _items(adapter, tensors, kind), directory, max_shard_size=max_shard_size, metadata=metadata,
            basename=basename, variant=variant, durable=durable,
        )

    save_sharded.__module__ = module
    save_sharded.__qualname__ = "save_sharded"
    save_sharded.__doc__ = f"""Save {what} as a Hugging Face sharded checkpoint in ``directory``.

    ``model-00001-of-00003.safetensors`` ... plus ``model.safetensors.index.json`` (a single
    shard is a plain ``model.safetensors``); ``max_shard_size`` is bytes or "5GB"/"500MB"
    (decimal units), filled greedily in key order; ``variant="fp16"`` gives
    ``model.fp16-00001-of-00003.safetensors``.  Returns the index path (or the file's).
    """
    return save_sharded


@paused_gc()
def load(adapter: ModuleType, data: Any, device: Any = "cpu") -> dict[str, Any]:
    dev = parse_device(device)
    adapter.check_device(dev)
    return {raw.name: adapter.from_raw(raw, dev) for raw in open_bytes(data).raw_all()}


@paused_gc()
def load_file(framework: str, filename: Any, device: Any = "cpu", backend: str | None = None) -> dict[str, Any]:
    with safe_open(filename, framework=framework, device=device, backend=backend) as f:
        return f.get_tensors()
