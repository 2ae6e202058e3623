"""Bounds on what a source file can make the converter do, all set by the file's real size.

A pickle is a small program: with memo references a few hundred bytes can name a graph with
2**40 paths, ask ``bytearray(4_000_000_000)``, or hash a tuple whose nesting doubles 40 times.
Every such cost is charged to one :class:`Budget` *before* the work or allocation happens:

- bytes the source can make us allocate or touch (arguments of allowlisted calls, inflated zip
  members, names built while flattening, large integer keys) are limited, in total, to the
  file's size on disk times :data:`ALLOCATION_FACTOR` plus :data:`ALLOCATION_ALLOWANCE`;
- flattening walks at most :data:`WALK_FACTOR` times the container entries the file really
  holds (plus :data:`WALK_ALLOWANCE`), so shared containers cannot multiply the walk;
- a dict key or set element is hashed only if it has at most :data:`MAX_KEY_NODES` parts.

Crossing any bound raises :class:`~pysafetensors.errors.ConversionLimitExceeded`.
"""

from __future__ import annotations

import reprlib
from typing import Any

from ..errors import ConversionLimitExceeded

ALLOCATION_FACTOR = 64
ALLOCATION_ALLOWANCE = 64 << 20
WALK_FACTOR = 4
WALK_ALLOWANCE = 100_000
MAX_KEY_NODES = 1_000


class Budget:
    """The bytes (and byte-equivalents of work) one source may cost, charged as they are spent."""

    def __init__(self, label: str, source_size: int) -> None:
        self.label = label
        self.source_size = max(0, source_size)
        self.limit = self.source_size * ALLOCATION_FACTOR + ALLOCATION_ALLOWANCE
        self.used = 0

    def charge(self, nbytes: int, what: str) -> None:
        """Account for ``nbytes`` about to be allocated (or touched) for ``what``; refuse first."""
        if nbytes <= 0:
            return
        if self.used + nbytes > self.limit:
            raise ConversionLimitExceeded(
                f"{self.label}: {what} needs {nbytes:,} bytes, more than this {self.source_size:,}-byte "
                f"file can justify ({self.used:,} of {self.limit:,} already used; the limit is "
                f"{ALLOCATION_FACTOR}x the file size + {ALLOCATION_ALLOWANCE >> 20} MiB): refusing "
                "before allocating",
                limit="allocation budget",
                requested=nbytes,
                allowed=self.limit - self.used,
            )
        self.used += nbytes

    def check_key(self, key: Any) -> None:
        """Refuse a dict key / set element whose hashing would cost more than its pickle did.

        Tuples do not cache their hash, so a tuple built as ``t = (t, t)`` forty times hashes
        2**40 leaves; integers hash in time linear in their digits.
        """
        nodes, pending = 0, [key]
        while pending:
            item = pending.pop()
            nodes += 1
            if nodes > MAX_KEY_NODES:
                raise ConversionLimitExceeded(
                    f"{self.label}: a dict key or set element has more than {MAX_KEY_NODES:,} nested "
                    "parts (hashing it could take forever): refusing",
                    limit="key size",
                    requested=nodes,
                    allowed=MAX_KEY_NODES,
                )
            if isinstance(item, (tuple, frozenset)):
                pending.extend(item)
            elif isinstance(item, int):
                self.charge(item.bit_length() // 8, "hashing an integer key")

    def check_keys(self, items: Any) -> None:
        for item in items:
            self.check_key(item)


class _ShortRepr(reprlib.Repr):
    """reprlib with few levels and items, and huge integers and bytes summarised."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxstring = self.maxother = 60

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<int of {x.bit_length()} bits>"
        return repr(x)

    def repr_bytes(self, x: bytes, level: int) -> str:
        return repr(x) if len(x) <= 40 else f"{x[:30]!r}... ({len(x):,} bytes)"

    repr_bytearray = repr_bytes
    # reprlib picks a method by type name and falls back to the full builtin repr: name the
    # container subclasses a checkpoint unpickles to, so they are bounded too.
    repr_OrderedDict = reprlib.Repr.repr_dict
    repr_TorchSize = reprlib.Repr.repr_tuple


_SHORT = _ShortRepr()


def short_repr(obj: Any) -> str:
    """A bounded repr for error messages: a hostile value may be a DAG with 2**40 paths."""
    return _SHORT.repr(obj)


def key_name(key: Any) -> str:
    """The name a dict key gets in a flattened tensor name (str and int keys as themselves)."""
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() <= 128:
        return str(key)
    return short_repr(key)
