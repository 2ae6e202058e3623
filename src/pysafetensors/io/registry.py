"""The one way in: :func:`open_source`, from what a caller passed (a path, URL, bytes, file
object or source) to a :class:`~pysafetensors.io.protocols.ByteSource`.

Local files and in-memory bytes get the sources of :mod:`pysafetensors.io.sources`; a URL's
scheme picks a source class by import string (:func:`open_url`), so a backend is imported only
when a URL needs it, and a missing optional dependency raises MissingDependency with the
install hint.  :func:`register_scheme` adds a scheme (the plugin mechanism).
"""

from __future__ import annotations

import importlib
import mmap
import os
import re
import stat
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._optional import require
from ..errors import InvalidBackend
from . import fstype
from .protocols import BinaryFile, ByteSource
from .sources import FileObjectSource, MemorySource, MmapSource, PreadSource

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")  # 2+ chars: "C:\\x" is a Windows path
_CHAIN = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)::.*://")  # fsspec chains: "simplecache::s3://b/k"


@dataclass(frozen=True)
class SchemeEntry:
    """``target`` is "module:Class"; ``requires`` a module that must import (with ``extra``)."""

    target: str
    requires: str | None = None
    extra: str | None = None


HTTP = SchemeEntry("pysafetensors.io.remote:HTTPSource")
FSSPEC = SchemeEntry("pysafetensors.io._fsspec:FsspecSource", requires="fsspec", extra="fsspec")

REGISTRY: dict[str, SchemeEntry] = {"http": HTTP, "https": HTTP}


def register_scheme(scheme: str, target: str, *, requires: str | None = None, extra: str | None = None) -> None:
    """Route ``scheme://`` URLs to the class at ``target`` ("module:Class")."""
    REGISTRY[scheme.lower()] = SchemeEntry(target, requires, extra)


def url_scheme(obj: Any) -> str | None:
    """The lower-cased scheme when ``obj`` is a URL string, else None."""
    if isinstance(obj, str):
        m = _URL.match(obj) or _CHAIN.match(obj)
        if m:
            return m.group(1).lower()
    return None


def source_class(scheme: str) -> Any:
    """The class registered for ``scheme`` (anything unknown goes to fsspec)."""
    entry = REGISTRY.get(scheme, FSSPEC)
    if entry.requires:
        require(entry.requires, entry.extra or entry.requires)
    module, _, cls = entry.target.partition(":")
    return getattr(importlib.import_module(module), cls)


def open_url(url: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The source for a remote URL (any scheme but ``file``), through the registry.

    ``storage_options`` go to the remote source: for HTTP the fields of
    :class:`~pysafetensors.io.remote.HTTPOptions` (``headers``, ``token``, ``timeout``,
    ``retries``...), checked there; for fsspec URLs the filesystem's own options (``key``,
    ``secret``, ``client_kwargs``, ``anon``...); for a registered scheme, its class's keywords.
    """
    scheme = url_scheme(url)
    if scheme is None or scheme == "file":
        raise ValueError(f"not a remote URL: {url!r}")
    options = dict(storage_options or {})
    cls = source_class(scheme)
    if REGISTRY.get(scheme, FSSPEC) is FSSPEC:
        return cls(url, storage_options=options)
    return cls(url, **options)


BACKENDS = ("mmap", "pread")


def check_backend(backend: object) -> str | None:
    """``backend`` when it is ``"mmap"``, ``"pread"`` or None (chosen per file); else InvalidBackend."""
    if backend is None or (isinstance(backend, str) and backend in BACKENDS):
        return backend
    raise InvalidBackend(f'backend "{backend}" is invalid (expected one of: "mmap", "pread")', backend=backend)


def open_source(
    obj: Any, backend: str | None = None, storage_options: Mapping[str, Any] | None = None
) -> ByteSource:
    """A ByteSource for anything a loader accepts.

    ``obj`` is a path (str or PathLike), a ``file://``, ``http(s)://`` or fsspec URL, a
    bytes-like object, a binary file object, or a ByteSource (returned as is).
    ``backend`` (validated for every kind: anything but ``"mmap"``, ``"pread"`` or None raises
    InvalidBackend) picks how a local file is read; None means ``"mmap"``, except ``"pread"``
    for files on network and FUSE filesystems (``fstype.default_backend``), where a file
    shrunk by another client would SIGBUS a map.  File objects with a descriptor are read
    like their file (``"pread"`` reads through the object itself).  ``storage_options`` go to
    remote sources (see :func:`open_url`).
    """
    backend = check_backend(backend)
    if isinstance(obj, os.PathLike):
        obj = os.fspath(obj)
    if isinstance(obj, str):
        scheme = url_scheme(obj)
        if scheme is None:
            return _open_local(obj, backend)
        if scheme == "file":
            return _open_local(file_url_path(obj), backend)
        source: ByteSource = open_url(obj, storage_options)
        return source
    if isinstance(obj, (bytes, bytearray, memoryview, mmap.mmap)):
        return MemorySource(obj)
    if isinstance(obj, ByteSource):
        return obj
    if isinstance(obj, BinaryFile):
        return _open_file_object(obj, backend)
    raise TypeError(
        f"cannot read safetensors from {type(obj).__name__}: expected a path, URL, bytes-like object, "
        "binary file object or ByteSource"
    )


def _open_local(path: str, backend: str | None) -> ByteSource:
    chosen = backend or fstype.local_backend(path)
    return MmapSource(path) if chosen == "mmap" else PreadSource(path)


def _open_file_object(obj: Any, backend: str | None) -> ByteSource:
    if backend != "pread":
        try:
            fd = obj.fileno()
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
            regular = False
        proc = f"/proc/self/fd/{fd}" if regular else ""
        if proc and os.path.exists(proc) and (backend or fstype.default_backend(proc)) == "mmap":
            name = getattr(obj, "name", None)  # optional, and may be a descriptor number
            return MmapSource(proc, name if isinstance(name, str) and name else None)
    return FileObjectSource(obj)


def sibling_url(url: str, name: str) -> str:
    """The URL of file ``name`` in the same directory as ``url`` (a shard beside its index).

    For http(s) the name is percent-quoted, so it stays one path segment whatever it holds
    (a server decodes ``%2e%2e%2f`` back to ``../``).  The query string of ``url`` (a signature
    for that one file) is not carried over.  ``name`` must already be a validated shard name.
    """
    base = url.split("?", 1)[0].rsplit("/", 1)[0]
    if url_scheme(url) in ("http", "https"):
        name = urllib.parse.quote(name, safe="")
    return f"{base}/{name}"


def file_url_path(url: str) -> str:
    """The local path a ``file://`` URL names."""
    from urllib.parse import unquote, urlsplit
    from urllib.request import url2pathname

    return url2pathname(unquote(urlsplit(url).path))


__all__ = [
    "BACKENDS",
    "REGISTRY",
    "SchemeEntry",
    "check_backend",
    "file_url_path",
    "open_source",
    "open_url",
    "register_scheme",
    "sibling_url",
    "source_class",
    "url_scheme",
]
