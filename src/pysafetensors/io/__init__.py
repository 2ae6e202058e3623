"""Byte sources (where a file's bytes come from) and sinks (where written bytes go).

:func:`open_source` is the one way from a path, URL, bytes, file object or source to a
:class:`ByteSource`; every loader goes through it.  The capability protocols a source may
also implement are in :mod:`pysafetensors.io.protocols`.
"""

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
