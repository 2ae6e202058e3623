"""One framework face, declared once: what numpy, torch, flax, tensorflow, paddle and mlx share.

A face module is upstream's public functions over one adapter (``_adapters/<name>.py``).
``declare`` builds them with upstream's signatures: upstream's parameters first, then ours
keyword-only (``alignment``, ``durable``, ``backend``, ``threads``, ``storage_options``),
plus ``save_sharded``.  The caller's dict is only read, never rewritten (upstream's flax and
tensorflow faces replace its values with numpy arrays).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Hashable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ._device import parse_device
from .format._gcpause import paused_gc
from .handle import open_bytes, safe_open

if TYPE_CHECKING:
    from typing import Protocol

    from .writer import WriteItem

    # The call signatures of the faces' functions, for the tuples below; annotations only, so
    # importing a face does not build them.
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
        def __call__(
            self,
            filename: Any,
            *,
            backend: str | None = ...,
            threads: int | None = ...,
            storage_options: Mapping[str, Any] | None = ...,
        ) -> dict[str, Any]: ...

    class LoadFileOnDevice(Protocol):
        def __call__(
            self,
            filename: Any,
            device: Any = ...,
            *,
            backend: str | None = ...,
            threads: int | None = ...,
            storage_options: Mapping[str, Any] | None = ...,
        ) -> dict[str, Any]: ...


# The five functions of a face, in this order (what ``declare`` returns, unpacked at once).  The
# three tuples differ only in which loads take a device, which only type checkers see: plain
# tuples at run time, and their element types (strings, never evaluated) are for type checkers.
_FIELDS = ("save", "save_file", "save_sharded", "load", "load_file")


class Face(tuple["Save", "SaveFile", "SaveSharded", "Load", "LoadFile"]):
    """A face loading on the CPU only (numpy, flax, tensorflow, mlx)."""

    __slots__ = ()


class FileOnDeviceFace(tuple["Save", "SaveFile", "SaveSharded", "Load", "LoadFileOnDevice"]):
    """A face whose ``load_file`` takes a device (torch)."""

    __slots__ = ()


class OnDeviceFace(tuple["Save", "SaveFile", "SaveSharded", "LoadOnDevice", "LoadFileOnDevice"]):
    """A face whose ``load`` and ``load_file`` take a device (paddle)."""

    __slots__ = ()


FaceT = TypeVar("FaceT", Face, FileOnDeviceFace, OnDeviceFace)


def _first_parameter_named(function: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``function`` with its first parameter renamed to ``name`` (upstream's numpy face calls
    it ``tensor_dict``, the others ``tensors``; callers may pass it by keyword).  The code
    object is the same but for that name, so calls cost nothing extra."""
    code = function.__code__
    old = code.co_varnames[0]
    if old == name:
        return function
    renamed = types.FunctionType(
        code.replace(co_varnames=(name, *code.co_varnames[1:])),
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    renamed.__kwdefaults__ = function.__kwdefaults__
    renamed.__annotations__ = {name if k == old else k: v for k, v in function.__annotations__.items()}
    return renamed


def declare(
    module: str,
    adapter: ModuleType,
    *,
    framework: str,
    what: str,
    face: type[FaceT],
    argument: str = "tensors",
    check: Callable[[Mapping[str, Any]], None] | None = None,
    storage_id: Callable[[Any], Hashable | None] | None = None,
    shard_format: str | None = None,
    docs: Mapping[str, str] | None = None,
) -> FaceT:
    """The public functions of the face module ``module`` over ``adapter``.

    ``framework`` is the ``safe_open`` name loads go through; ``what`` names the tensors in
    docstrings (``"jax arrays"``).  ``face`` is the tuple to build, and says which loads take upstream's
    ``device`` parameter: :class:`FileOnDeviceFace` (torch: ``load_file``), :class:`OnDeviceFace`
    (paddle: both) or :class:`Face` (the CPU only).  ``argument`` is the name of the tensors' parameter.
    ``check(tensors)`` runs before anything is written (torch's shared-memory rules);
    ``storage_id(tensor)`` keeps tensors over one buffer in one shard (None: no buffer to
    share); ``shard_format`` is the ``format`` every shard's header records; ``docs``
    replaces default docstrings by function name.
    """

    def items(tensors: Mapping[str, Any]) -> list[WriteItem]:
        from .writer import tensor_mapping  # the write side, imported on first save

        tensors = tensor_mapping(tensors)
        if check is not None:
            check(tensors)
        return [adapter.to_write_item(name, value) for name, value in tensors.items()]

    def save(tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *, alignment: int = 8) -> bytes:
        from .writer import write_bytes

        return write_bytes(items(tensors), metadata, alignment)

    def save_file(
        tensors: Mapping[str, Any],
        filename: str | os.PathLike[str],
        metadata: Mapping[str, str] | None = None,
        *,
        alignment: int = 8,
        durable: bool | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        from .writer import write_file

        write_file(items(tensors), filename, metadata, alignment, durable=durable, storage_options=storage_options)

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
        from .sharded import write_sharded

        written = items(tensors)
        ids: dict[str, Hashable] | None = None
        if storage_id is not None:
            ids = {k: i for k, v in tensors.items() if (i := storage_id(v)) is not None}
        return write_sharded(
            written, directory, max_shard_size=max_shard_size, metadata=metadata,
            shard_metadata=None if shard_format is None else {"format": shard_format, **dict(metadata or {})},
            storage_ids=ids, basename=basename, variant=variant, durable=durable, storage_options=storage_options,
        )

    def load_on(data: bytes, device: Any = "cpu") -> dict[str, Any]:
        dev = parse_device(device)
        adapter.check_device(dev)
        return {raw.name: adapter.from_raw(raw, dev) for raw in open_bytes(data).raw_all()}

    def load_file_on(
        filename: Any,
        device: Any = "cpu",
        *,
        backend: str | None = None,
        threads: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        with safe_open(
            filename, framework=framework, device=device, backend=backend, storage_options=storage_options
        ) as f:
            return f.get_tensors(threads=threads)

    def load(data: bytes) -> dict[str, Any]:
        return load_on(data)

    def load_file(
        filename: Any,
        *,
        backend: str | None = None,
        threads: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return load_file_on(filename, backend=backend, threads=threads, storage_options=storage_options)

    on_device = {"load": face is OnDeviceFace, "load_file": face is not Face}

    def where(function: str) -> str:
        return "on ``device``" if on_device[function] else "on the CPU"

    default_docs = {
        "save": f"""Serialize {what} to safetensors bytes (``alignment``: a multiple of 8 the
    data region starts on).""",
        "save_file": f"""Save {what} to ``filename`` atomically (temp file + rename),
    streaming one tensor at a time; ``durable=True`` fsyncs before the rename (default:
    ``PYSAFETENSORS_DURABLE``, else off).  ``filename`` may be an fsspec URL (``s3://...``;
    ``storage_options`` for its filesystem): streamed, published only when complete.""",
        "save_sharded": f"""Save {what} as a Hugging Face sharded checkpoint in ``directory``.

    ``model-00001-of-00003.safetensors`` ... plus ``model.safetensors.index.json`` (a single
    shard is a plain ``model.safetensors``); ``max_shard_size`` is bytes or "5GB"/"500MB"
    (decimal units), filled greedily in key order; ``variant="fp16"`` gives
    ``model.fp16-00001-of-00003.safetensors``.  ``directory`` may be an fsspec URL prefix
    (``s3://bucket/ckpt/``; ``storage_options`` for its filesystem).  Returns the index path
    (or the file's).""",
        "load": f"""Load {what} from safetensors bytes, {where("load")}.""",
        "load_file": f"""Load every tensor of a file as {what}
    {where("load_file")}, in file order.  ``filename`` may also be a URL, an index or a checkpoint
    directory (as for ``safe_open``, ``storage_options`` for a remote one); ``threads``:
    parallel reads for ``backend="pread"``.""",
    }
    functions: dict[str, Callable[..., Any]] = {
        "save": _first_parameter_named(save, argument),
        "save_file": _first_parameter_named(save_file, argument),
        "save_sharded": _first_parameter_named(save_sharded, argument),
        "load": load_on if on_device["load"] else load,
        "load_file": load_file_on if on_device["load_file"] else load_file,
    }
    for name, function in functions.items():
        function.__module__ = module
        function.__name__ = function.__qualname__ = name
        function.__doc__ = (docs or {}).get(name, default_docs[name])
        functions[name] = paused_gc()(function)
    return face(functions[name] for name in _FIELDS)
