"""Parse and encode the safetensors header.

The rules themselves live in ``rules.py`` (one generator of problems, in upstream's order):
``parse_header`` raises the first problem it yields.  Well-formed headers take a fast path
first, a private optimisation that accepts only what the rules accept and hands anything
unusual to them (tests/format/test_fast_path.py checks the two on the corpus and the
fuzzers' inputs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain, repeat
from math import prod
from operator import and_, attrgetter, itemgetter, mul, rshift, sub
from typing import Any, NamedTuple

from ._gcpause import paused_gc
from .dtypes import BY_CODE, DType
from .json_compat import METADATA_KEY
from .rules import HEADER_CAP, N_LEN, U64_LIMIT, HeaderProblem, check, check_header, check_header_length

__all__ = [
    "HEADER_CAP",
    "METADATA_KEY",
    "N_LEN",
    "U64_LIMIT",
    "Header",
    "HeaderProblem",
    "TensorInfo",
    "check_header",
    "check_header_length",
    "encode_header",
    "parse_header",
    "parse_header_length",
]


class TensorInfo(NamedTuple):
    """One header entry: where a tensor's bytes are and how to read them.

    A NamedTuple (immutable) rather than a dataclass: the fast header path builds one per
    tensor with ``tuple.__new__``, which is what makes 100,000-tensor headers cheap to open.
    """

    name: str
    dtype: DType
    shape: tuple[int, ...]
    begin: int  # offset in the data region
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def nelements(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class Header:
    """A validated header.  ``tensors`` is in file order (by data offset)."""

    tensors: tuple[TensorInfo, ...]
    metadata: dict[str, str] | None
    header_size: int  # N, the JSON length including padding

    @property
    def data_start(self) -> int:
        """Absolute file offset of the data region."""
        return N_LEN + self.header_size

    @property
    def data_size(self) -> int:
        return self.tensors[-1].end if self.tensors else 0

    def by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}


# --- parsing ------------------------------------------------------------------------------


def parse_header_length(prefix: bytes | bytearray | memoryview, file_size: int) -> int:
    """Validate the 8-byte length prefix against the file size and return N."""
    problem = check_header_length(prefix, file_size)
    if problem is not None:
        raise problem.error
    return int.from_bytes(prefix[:N_LEN], "little")


def parse_header(header: bytes | bytearray | memoryview, file_size: int) -> Header:
    """Parse and validate the N header bytes of a file of ``file_size`` bytes.

    Raises the first problem ``check_header`` finds (upstream's error, with context).
    """
    n = len(header)
    # A big header allocates ~3 containers per tensor: generational GC passes over the
    # growing, cycle-free structure dominated parse time (2-3x), so pause it while parsing.
    with paused_gc():
        try:
            text = str(header, "utf-8")  # no copy of a bytearray/memoryview first
        except UnicodeDecodeError:
            pass  # the rules report it
        else:
            fast = _fast_header(text, n, file_size)
            if fast is not None:
                return fast
        return _careful_header(header, file_size)


def _careful_header(header: bytes | bytearray | memoryview, file_size: int) -> Header:
    """The rules alone: raise the first problem ``check_header`` yields, else the header."""
    checks = check(header, file_size)
    while True:
        try:
            problem = next(checks)
        except StopIteration as done:
            entries, metadata = done.value
            break
        if not problem.warning:
            checks.close()
            raise problem.error
    tensors = tuple(TensorInfo(name, dtype, shape, begin, end) for begin, end, _, name, dtype, shape in entries)
    return Header(tensors, metadata, len(header))


_ABSENT = object()
_SUB_BYTE_CODES = frozenset(code for code, d in BY_CODE.items() if d.bits % 8)
_make_info = tuple.__new__
_bits = attrgetter("bits")


def _fast_header(text: str, n: int, file_size: int) -> Header | None:
    """The common, well-formed header: json's C scanner, then checks over whole columns.

    Returns None whenever anything is unusual; the rules then decide (and report the exact
    error).  It accepts only headers that are exactly: an object holding an optional
    ``__metadata__`` (null, or an object of strings) and tensor entries that are objects of
    exactly the three fields, written in file order with contiguous offsets.  Each check is
    one pass in C over a column (every dtype, every shape, ...), not Python code per tensor,
    which is what makes 100,000-tensor headers cheap to open.
    """
    # What json reads differently from serde, found in the text: ``-0`` (json gives 0) and
    # ``\u`` escapes (lone surrogates; a colon written as an escape would also fool the
    # duplicate count below).  Booleans, NaN, floats and huge numbers need no scan: every
    # value below is type-checked exactly (``type(x) is int`` is False for True).
    if ("-" in text and "-0" in text) or ("\\" in text and "\\u" in text):
        return None
    # Bound the work before json builds anything: a header of this shape has one object per
    # tensor (+1, +1 with metadata) and two arrays per tensor.  Any other count (a top-level
    # array of a million objects, brackets inside names) goes to the rules, which refuse
    # wrong shapes before building them.
    arrays = text.count("[")
    objects = text.count("{")
    if arrays & 1 or not 0 <= objects - 1 - (arrays >> 1) <= 1:
        return None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if type(raw) is not dict:
        return None
    metadata: dict[str, str] | None = None
    value = raw.pop(METADATA_KEY, _ABSENT)  # raw is ours: no copy of 100,000 pairs
    has_metadata_key = value is not _ABSENT
    if has_metadata_key and value is not None:
        if type(value) is not dict or not set(map(type, value.values())) <= {str}:
            return None
        metadata = value
    tensors: tuple[TensorInfo, ...] = ()
    end = 0
    if raw:
        names = list(raw)
        entries = list(raw.values())
        if set(map(type, entries)) != {dict} or set(map(len, entries)) != {3}:
            return None
        try:
            codes = list(map(itemgetter("dtype"), entries))
            shapes = list(map(itemgetter("shape"), entries))
            offsets = list(map(itemgetter("data_offsets"), entries))
            dtypes = list(map(BY_CODE.__getitem__, codes))  # KeyError, or TypeError if unhashable
        except (KeyError, TypeError):
            return None
        if set(map(type, shapes)) != {list} or set(map(type, offsets)) != {list} or set(map(len, offsets)) != {2}:
            return None
        # More than 64 dims (never seen) could make the products below huge ints: the rules
        # stop multiplying at 2**64 instead.
        if max(map(len, shapes)) > 64:
            return None
        dims = list(chain.from_iterable(shapes))
        if dims and (set(map(type, dims)) != {int} or min(dims) < 0 or max(dims) >= U64_LIMIT):
            return None
        begins = list(map(itemgetter(0), offsets))
        ends = list(map(itemgetter(1), offsets))
        if set(map(type, begins)) != {int} or set(map(type, ends)) != {int}:
            return None
        # File order: each tensor begins where the previous one ends (so, with the sizes
        # checked below, offsets only grow and the last end is the largest).
        if begins[0] != 0 or begins[1:] != ends[:-1] or ends[-1] >= U64_LIMIT:
            return None
        counts = list(map(prod, shapes))
        # A zero count may hide an overflowing product of the dims before the first 0,
        # which upstream rejects: leave those to the rules.
        if 0 in counts and any(prod(s[: s.index(0)]) >= U64_LIMIT for s in shapes if 0 in s):
            return None
        nbits = list(map(mul, counts, map(_bits, dtypes)))
        if max(nbits) >= U64_LIMIT:
            return None
        if not _SUB_BYTE_CODES.isdisjoint(codes) and any(map(and_, nbits, repeat(7))):
            return None
        if list(map(sub, ends, begins)) != list(map(rshift, nbits, repeat(3))):
            return None
        end = ends[-1]
        tensors = tuple(map(_make_info, repeat(TensorInfo), zip(names, dtypes, map(tuple, shapes), begins, ends)))
    if end + N_LEN + n != file_size:
        return None
    # Duplicate keys anywhere (top level, inside an entry, in the metadata) are invisible
    # after json.loads but each adds a member, and every member has exactly one colon
    # outside strings.  Count the colons the kept members account for (one each, plus any
    # inside names and metadata strings; codes and numbers have none): a mismatch means a
    # member was replaced, and the rules report what serde would.
    members = len(raw) + has_metadata_key + 3 * len(tensors) + (len(metadata) if metadata else 0)
    in_strings = "".join(raw).count(":")  # every tensor name
    if metadata:
        in_strings += "".join(metadata).count(":") + "".join(metadata.values()).count(":")
    if text.count(":") != members + in_strings:
        return None
    return Header(tensors, metadata, n)


# --- encoding -----------------------------------------------------------------------------


def encode_header(
    entries: list[tuple[str, str, list[int], int, int]],
    metadata: Mapping[str, str] | None,
    alignment: int = 8,
) -> bytes:
    """Encode the header JSON, padded with spaces so the data region starts on ``alignment``.

    ``entries`` are (name, dtype code, shape, begin, end) in file order.  The JSON is compact
    with raw non-ASCII, ``__metadata__`` first, exactly as upstream writes it.
    """
    obj: dict[str, Any] = {}
    if metadata is not None:
        obj[METADATA_KEY] = dict(metadata)
    for name, code, shape, begin, end in entries:
        obj[name] = {"dtype": code, "shape": list(shape), "data_offsets": [begin, end]}
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    pad = (alignment - (N_LEN + len(body)) % alignment) % alignment
    return body + b" " * pad
