"""Byte sources (where a file's bytes come from) and sinks (where written bytes go).

:func:`open_source` is the one way from a path, URL, bytes, file object or source to a
:class:`ByteSource`; every loader goes through it.  The capability protocols a source may
also implement are in :mod:`pysafetensors.io.protocols`.

The names below, and the submodules as attributes, are loaded on first use (PEP 562 module
``__getattr__``, as in the package root): reading a local file imports the sources it uses,
never the sinks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:  # the names as type checkers see them (the same objects, imported eagerly)
    from .protocols import (
        Advisable,
        ByteSource,
        ParallelReadable,
        RangedReadable,
        ResidencyAware,
        ViewSource,
        capabilities,
    )
    from .registry import BACKENDS, check_backend, open_source
    from .sinks import AtomicFileSink, Sink
    from .sources import FileObjectSource, MemorySource, MmapSource, PreadSource

# public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        ("Advisable", "ByteSource", "ParallelReadable", "RangedReadable", "ResidencyAware", "ViewSource",
         "capabilities"),
        "protocols",
    ),
    **dict.fromkeys(("BACKENDS", "check_backend", "open_source"), "registry"),
    **dict.fromkeys(("AtomicFileSink", "Sink"), "sinks"),
    **dict.fromkeys(("FileObjectSource", "MemorySource", "MmapSource", "PreadSource"), "sources"),
}

__all__ = [
    "BACKENDS",
    "Advisable",
    "AtomicFileSink",
    "ByteSource",
    "FileObjectSource",
    "MemorySource",
    "MmapSource",
    "ParallelReadable",
    "PreadSource",
    "RangedReadable",
    "ResidencyAware",
    "Sink",
    "ViewSource",
    "capabilities",
    "check_backend",
    "open_source",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY, __all__)
