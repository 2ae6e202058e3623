"""Where a save goes: :func:`open_sink` is the one way from a save's target (a path, a ``file://``
URL, or an fsspec URL such as ``s3://bucket/model.safetensors``) to a sink that publishes the
file only on ``commit``; :func:`open_directory` does the same for a sharded save's directory or
URL prefix.  Local targets get :mod:`pysafetensors.io.sinks`, URL targets
:mod:`pysafetensors.io.remote_sinks` and :mod:`pysafetensors.io.remote_prefix` (imported only
for a URL).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .registry import file_url_path, url_scheme
from .sinks import AtomicFileSink, FileSink, LocalDirectory

if TYPE_CHECKING:
    from .remote_prefix import RemotePrefix

StorageOptions = Mapping[str, Any] | None


def is_url_target(target: Any) -> bool:
    """Whether a save's ``target`` is a URL written through a store (not a path, not ``file://``)."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    return url_scheme(target) not in (None, "file")


def local_target(target: Any) -> str:
    """A local target as a path: ``file://`` URLs become their path, other paths stay as given."""
    path = os.fspath(target)
    return file_url_path(path) if url_scheme(path) == "file" else path


def open_sink(
    target: str | os.PathLike[str],
    *,
    durable: bool | None = None,
    storage_options: StorageOptions = None,
    random_access: bool = False,
) -> FileSink:
    """The sink a save of one file to ``target`` writes into.

    A path (or ``file://`` URL) gets an :class:`~pysafetensors.io.sinks.AtomicFileSink` (temp file beside it, renamed
    on commit); an fsspec URL a :class:`~pysafetensors.io.remote_sinks.RemoteFileSink`
    (streamed to the store, published on commit), or with ``random_access`` (writes at any
    offset, for the incremental writer) a
    :class:`~pysafetensors.io.remote_sinks.StagedUploadSink`, which stages through a local
    temp file and uploads on commit.  ``http(s)://`` targets raise
    :class:`~pysafetensors.errors.UnwritableTarget`.  ``storage_options`` go to the store's
    filesystem (credentials, ``client_kwargs``...); a local target ignores them.
    """
    if not is_url_target(target):
        return AtomicFileSink(local_target(target), durable=durable)
    from .remote_sinks import RemoteFileSink, StagedUploadSink

    url = os.fspath(target)
    if random_access:
        return StagedUploadSink(url, durable=durable, storage_options=storage_options)
    return RemoteFileSink(url, durable=durable, storage_options=storage_options)


def remove_target(target: str | os.PathLike[str], storage_options: StorageOptions = None) -> None:
    """Delete a file a save wrote (best effort: a missing file or a failure is ignored)."""
    if not is_url_target(target):
        try:
            os.unlink(local_target(target))
        except OSError:
            pass
        return
    from .remote_sinks import remove_object

    remove_object(os.fspath(target), storage_options)


def open_directory(target: str | os.PathLike[str], storage_options: StorageOptions = None) -> LocalDirectory | RemotePrefix:
    """A sharded save's target: a :class:`~pysafetensors.io.sinks.LocalDirectory`, or for an fsspec URL a
    :class:`~pysafetensors.io.remote_prefix.RemotePrefix`."""
    if not is_url_target(target):
        return LocalDirectory(local_target(target))
    from .remote_prefix import RemotePrefix

    return RemotePrefix(os.fspath(target), storage_options)


__all__ = ["StorageOptions", "is_url_target", "local_target", "open_directory", "open_sink", "remove_target"]
