"""Byte sources (where a file's bytes come from) and sinks (where written bytes go)."""

from .sinks import AtomicFileSink, BytesSink, Sink
from .sources import ByteSource, FileObjectSource, MemorySource, MmapSource, PreadSource, open_source

__all__ = [
    "AtomicFileSink",
    "ByteSource",
    "BytesSink",
    "FileObjectSource",
    "MemorySource",
    "MmapSource",
    "PreadSource",
    "Sink",
    "open_source",
]
