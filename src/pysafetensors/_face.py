"""One framework face, declared once: what flax, tensorflow, paddle and mlx share.

A face module is upstream's public functions over one adapter (``_adapters/<name>.py``).
``declare`` builds them with numpy.py's and torch.py's signatures: upstream's parameters
first, then ours keyword-only (``alignment``, ``durable``, ``backend``, ``threads``), plus
``save_sharded``.  The caller's dict is only read, never rewritten (upstream's flax and
tensorflow faces replace its values with numpy arrays).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, NamedTuple, Protocol

from . import numpy  # noqa: F401 - re-exported by the faces, as upstream's import it
from ._api import TensorSpec, deserialize, serialize, serialize_file  # noqa: F401 - re-exported by paddle
from ._device import parse_device
from .errors import UnsupportedValue
from .format._gcpause import paused_gc
from .handle import open_bytes, safe_open
from .writer import WriteItem, write_bytes, write_file


class Save(Protocol):
    def __call__(
        self, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = ..., *, alignment: int = ...
    ) -> bytes: ...


class SaveFile(Protocol):
    def __call__(
        self,
        tensors: Mapping[str, Any],
        filename: str | os.PathLike[str],
        metadata: Mapping[str, str] | None = ...,
        *,
        alignment: int = ...,
        durable: bool | None = ...,
        storage_options: Mapping[str, Any] | None = ...,
    ) -> None: ...


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
        storage_options: Mapping[str, Any] | None = ...,
    ) -> str: ...


class Load(Protocol):
    def __call__(self, data: bytes) -> dict[str, Any]: ...


class LoadOnDevice(Protocol):
    def __call__(self, data: bytes, device: Any = ...) -> dict[str, Any]: ...


class LoadFile(Protocol):
    def __call__(self, filename: Any, *, backend: str | None = ..., threads: int | None = ...) -> dict[str, Any]: ...


class LoadFileOnDevice(Protocol):
    def __call__(
        self, filename: Any, device: Any = ..., *, backend: str | None = ..., threads: int | None = ...
    ) -> dict[str, Any]: ...


class Face(NamedTuple):
    save: Save
    save_file: SaveFile
    save_sharded: SaveSharded
    load: Load | LoadOnDevice
    load_file: LoadFile | LoadFileOnDevice


def declare(module: str, adapter: ModuleType, *, framework: str, kind: str, what: str, devices: bool = False) -> Face:
    """The public functions of the face module ``module`` over ``adapter``.

    ``framework`` is the ``safe_open`` name loads go through; ``kind`` names one tensor in
    error messages (``"jax.Array"``), ``what`` several in docstrings (``"jax arrays"``).
    ``devices=True`` gives ``load``/``load_file`` upstream paddle's ``device`` parameter;
    the other faces load on the CPU only, as upstream's do, and take none.
    """

    def items(tensors: Mapping[str, Any]) -> list[WriteItem]:
        if not isinstance(tensors, Mapping):
            raise UnsupportedValue(f"Expected a dict of [str, {kind}] but received {type(tensors)}")
        return [adapter.to_write_item(name, value) for name, value in tensors.items()]

    @paused_gc()
    def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *, alignment: int = 8) -> bytes:
        return write_bytes(items(tensors), metadata, alignment)

    @paused_gc()
    def save_file(
        tensors: Mapping[str, Any],
        filename: str | os.PathLike[str],
        metadata: Mapping[str, str] | None = None,
        *,
        alignment: int = 8,
        durable: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        write_file(items(tensors), filename, metadata, alignment, durable=durable, storage_options=storage_options)

    @paused_gc()
    def save_sharded(
        tensors: Mapping[str, Any],
        directory: str | os.PathLike[str],
        max_shard_size: int | str = "5GB",
        metadata: Mapping[str, str] | None = None,
        *,
        variant: str | None = None,
        basename: str = "model",
        durable: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> str:
        # No storage ids: these faces write every tensor in full (views are materialized),
        # so two tensors over one buffer may land in different shards without losing anything.
        from .sharded import write_sharded

        return write_sharded(
            items(tensors), directory, max_shard_size=max_shard_size, metadata=metadata,
            basename=basename, variant=variant, durable=durable, storage_options=storage_options,
        )

    @paused_gc()
    def load_on(data: bytes, device: Any = "cpu") -> dict[str, Any]:
        dev = parse_device(device)
        adapter.check_device(dev)
        return {raw.name: adapter.from_raw(raw, dev) for raw in open_bytes(data).raw_all()}

    @paused_gc()
    def load_file_on(
        filename: Any, device: Any = "cpu", *, backend: str | None = None, threads: int | None = None
    ) -> dict[str, Any]:
        with safe_open(filename, framework=framework, device=device, backend=backend) as f:
            return f.get_tensors(threads=threads)

    def load(data: bytes) -> dict[str, Any]:
        return load_on(data)

    def load_file(filename: Any, *, backend: str | None = None, threads: int | None = None) -> dict[str, Any]:
        return load_file_on(filename, backend=backend, threads=threads)

    where = "on ``device``" if devices else "on the CPU"
    docs: dict[str, tuple[Callable[..., Any], str]] = {
        "save": (save, f"""Serialize {what} to safetensors bytes (``alignment``: a multiple of 8 the
    data region starts on)."""),
        "save_file": (save_file, f"""Save {what} to ``filename`` atomically (temp file + rename),
    streaming one tensor at a time; ``durable=True`` fsyncs before the rename (default:
    ``PYSAFETENSORS_DURABLE``, else off).  ``filename`` may be an fsspec URL (``s3://...``;
    ``storage_options`` for its filesystem): streamed, published only when complete."""),
        "save_sharded": (save_sharded, f"""Save {what} as a Hugging Face sharded checkpoint in ``directory``.

    ``model-00001-of-00003.safetensors`` ... plus ``model.safetensors.index.json`` (a single
    shard is a plain ``model.safetensors``); ``max_shard_size`` is bytes or "5GB"/"500MB"
    (decimal units), filled greedily in key order; ``variant="fp16"`` gives
    ``model.fp16-00001-of-00003.safetensors``.  ``directory`` may be an fsspec URL prefix
    (``s3://bucket/ckpt/``; ``storage_options`` for its filesystem).  Returns the index path
    (or the file's)."""),
        "load": (load_on if devices else load, f"""Load {what} from safetensors bytes, {where}."""),
        "load_file": (load_file_on if devices else load_file, f"""Load every tensor of a file as {what}
    {where}, in file order.  ``filename`` may also be a URL, an index or a checkpoint
    directory (as for ``safe_open``); ``threads``: parallel reads for ``backend="pread"``."""),
    }
    for name, (function, doc) in docs.items():
        function.__module__ = module
        function.__name__ = function.__qualname__ = name
        function.__doc__ = doc
    return Face(save, save_file, save_sharded, docs["load"][0], docs["load_file"][0])
