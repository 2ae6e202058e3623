"""URL schemes: a scheme -> source-class registry, and ``open_url`` for remote URLs.

A URL's scheme picks a source class by import string, so a backend is imported only when a
URL needs it; a missing optional dependency raises MissingDependency with the install hint.
Everything goes in through :func:`pysafetensors.io.sources.open_source` (re-exported here),
which sends remote URLs to :func:`open_url`.
"""

from __future__ import annotations

import importlib
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._optional import require
from .sources import open_source  # the one way in; it calls open_url for remote URLs

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
    "REGISTRY",
    "SchemeEntry",
    "file_url_path",
    "open_source",
    "open_url",
    "register_scheme",
    "sibling_url",
    "source_class",
    "url_scheme",
]
