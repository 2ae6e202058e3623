"""Parse and encode the safetensors header.

The rules themselves live in ``rules.py`` (one generator of problems, in upstream's order):
``parse_header`` raises the first problem it yields.  Well-formed headers take a fast path
first, a private optimisation that accepts only what the rules accept and hands anything
unusual to them (tests/format/test_fast_path.py checks the two on the corpus and the
fuzzers' inputs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from math import prod
from typing import TYPE_CHECKING, Any, NamedTuple

from .._lazy import lazy_attributes
from ..errors import UnencodableText
from . import _typed_header
from ._fastpath import Kind, complete, first_of_kind, ints_only, metadata_fits, screen
from ._frame import HEADER_CAP, METADATA_KEY, N_LEN, U64_LIMIT, WS_BYTES, header_length
from ._gcpause import paused_gc
from .dtypes import DType

if TYPE_CHECKING:
    from .rules import HeaderProblem, check_header, check_header_length

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
    "validate_header",
]

# The rules' names, here too.  The rules module (and json_compat, which reads JSON as serde
# does) loads only when a header needs it: a well-formed file takes the fast paths.
_FROM_RULES = ("HeaderProblem", "check_header", "check_header_length")
__getattr__, __dir__ = lazy_attributes(__name__, globals(), dict.fromkeys(_FROM_RULES, ".rules"), _FROM_RULES, ())


class TensorInfo(NamedTuple):
    """One header entry: where a tensor's bytes are and how to read them.

    A NamedTuple (immutable) rather than a dataclass: ``Header`` builds one per lookup with
    ``tuple.__new__``, the cheapest object there is to build.
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

    @property
    def type(self) -> str:
        """The stored type as the format spells it (the dtype code; a GGUF tensor's is its GGML type)."""
        return self.dtype.code

    @property
    def decoded(self) -> bool:
        """Whether the values are decoded from another stored form (never: safetensors stores values)."""
        return False


class Header:
    """A validated header: its tensors in file order (by data offset), and its metadata.

    Held as columns (``names``, ``dtypes``, ``shapes``, ``offsets``) rather than one entry
    object per tensor: opening a file then keeps a handful of container objects whatever its
    tensor count.  Every object the cyclic garbage collector tracks counts towards its next
    collection, and in a process holding a large framework (torch) a full collection walks
    all of that framework's objects, so an open that kept thousands of entries would bring
    one forward into the caller's loop.  Entries are built on demand (``entry``,
    ``tensors``, ``by_name``).  Shapes are shared between tensors of the same shape.

    Tensor ``i`` spans ``offsets[i]`` to ``offsets[i + 1]`` of the data region: the rules
    make the spans contiguous from 0, so one list holds every begin and end.  Read-only by
    convention, like the entries it hands out.
    """

    __slots__ = ("_index", "_tensors", "dtypes", "header_size", "metadata", "names", "offsets", "shapes")

    def __init__(
        self,
        names: list[str],
        dtypes: list[DType],
        shapes: list[tuple[int, ...]],
        offsets: list[int],
        metadata: dict[str, str] | None,
        header_size: int,
    ) -> None:
        self.names = names
        self.dtypes = dtypes
        self.shapes = shapes
        self.offsets = offsets  # len(names) + 1 entries, the first 0
        self.metadata = metadata
        self.header_size = header_size  # N, the JSON length including padding
        self._index: dict[str, int] | None = None
        self._tensors: tuple[TensorInfo, ...] | None = None

    @property
    def data_start(self) -> int:
        """Absolute file offset of the data region."""
        return N_LEN + self.header_size

    @property
    def data_size(self) -> int:
        return self.offsets[-1]

    @property
    def index(self) -> dict[str, int]:
        """Tensor name -> its position in file order (built on first use: opening for
        ``keys()`` never pays for it).  Holds only strings and ints, which the collector
        does not track."""
        index = self._index
        if index is None:
            index = self._index = dict(zip(self.names, range(len(self.names))))
        return index

    def entry(self, i: int) -> TensorInfo:
        """The entry of the ``i``-th tensor in file order, built now."""
        return self.lookup(self.names[i])

    def lookup(self, name: str) -> TensorInfo:
        """The entry of tensor ``name``, built now (KeyError when there is none).  One call
        for the lookup every ``get_slice`` makes."""
        index = self._index
        i = (index if index is not None else self.index)[name]
        offsets = self.offsets
        return tuple.__new__(TensorInfo, (name, self.dtypes[i], self.shapes[i], offsets[i], offsets[i + 1]))

    @property
    def tensors(self) -> tuple[TensorInfo, ...]:
        """Every entry, in file order (built on first use, for tools that walk them all)."""
        tensors = self._tensors
        if tensors is None:
            offsets = self.offsets
            make = tuple.__new__
            tensors = self._tensors = tuple(
                make(TensorInfo, (name, dtype, shape, offsets[i], offsets[i + 1]))
                for i, (name, dtype, shape) in enumerate(zip(self.names, self.dtypes, self.shapes))
            )
        return tensors

    def by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Header):
            return NotImplemented
        return (self.names, self.dtypes, self.shapes, self.offsets, self.metadata, self.header_size) == (
            other.names, other.dtypes, other.shapes, other.offsets, other.metadata, other.header_size)

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable metadata

    def __repr__(self) -> str:
        return f"Header(tensors={self.tensors!r}, metadata={self.metadata!r}, header_size={self.header_size!r})"


# --- parsing ------------------------------------------------------------------------------


def parse_header_length(prefix: bytes | bytearray | memoryview, file_size: int) -> int:
    """Validate the 8-byte length prefix against the file size and return N."""
    n = header_length(prefix, file_size)
    if n is None:
        from .rules import length_problem  # which rule it breaks, for its error

        raise length_problem(prefix, file_size).error
    return n


def parse_header(header: bytes | bytearray | memoryview, file_size: int) -> Header:
    """Parse and validate the N header bytes of a file of ``file_size`` bytes.

    Raises the first problem ``check_header`` finds (upstream's error, with context).  A
    well-formed header takes a fast path first: msgspec's typed decoding when the ``fast``
    extra is installed and the header is large (``TYPED_FROM``), else json's; either accepts
    only what the rules accept.
    """
    # A big header allocates ~3 containers per tensor: generational GC passes over the
    # growing, cycle-free structure would dominate parse time, so pause it while parsing.
    with paused_gc():
        fast, text = _fast_parse(header, file_size)
        return fast if fast is not None else _careful_header(header, file_size, text)


def validate_header(header: bytes | bytearray | memoryview, file_size: int) -> tuple[list[HeaderProblem], Header | None]:
    """Every problem ``check_header`` finds (warnings included), and the header when none is an
    error: the header is parsed once.  One that takes :func:`parse_header`'s fast path breaks no
    rule and names no member twice, so there is nothing to report; any other goes through the
    rules alone."""
    with paused_gc():
        fast, text = _fast_parse(header, file_size)
        if fast is not None:
            return [], fast
        from .rules import check

        problems: list[HeaderProblem] = []
        checks = check(header, file_size, text)
        while True:
            try:
                problems.append(next(checks))
            except StopIteration as done:
                entries, metadata = done.value
                break
        if any(not p.warning for p in problems):
            return problems, None
        return problems, _header_of(entries, metadata, len(header))


def _fast_parse(header: bytes | bytearray | memoryview, file_size: int) -> tuple[Header | None, str | None]:
    """The header when a fast path takes it, else None; and its text when it was decoded."""
    n = len(header)
    at = WS_BYTES.match(header).end()  # type: ignore[union-attr]
    if header[at : at + 1] != b"{":
        return None, None  # not an object: no fast path, and no decoding
    try:
        text = str(header, "utf-8")  # no copy of a bytearray/memoryview first
    except UnicodeDecodeError:
        return None, None  # the rules report it
    typed = _typed_entries() if n >= TYPED_FROM else None
    fast: Any = _typed_header.NOT_CANONICAL
    if typed is not None:
        fast = _typed_header.fast_header(text, n, file_size, typed, Header)
    if fast is _typed_header.NOT_CANONICAL:  # no msgspec, or __metadata__ not first: json's path
        fast = _fast_header(text, n, file_size)
    return (fast if isinstance(fast, Header) else None), text


_TYPED: list[Callable[[str], Any] | None] = []  # msgspec's decoder, once looked for
# Headers from this size on take msgspec's path.  Below it json's path is about as fast, and
# never paying for importing msgspec matters more: a process that opens one ordinary file (a
# few hundred tensors, tens of KB of header) would spend longer importing it than parsing.
TYPED_FROM = 512 << 10


def _typed_entries() -> Callable[[str], Any] | None:
    """msgspec's entry decoder when the ``fast`` extra is installed (and not turned off)."""
    if not _TYPED:
        off = os.environ.get("PYSAFETENSORS_JSON") == "stdlib"  # e.g. to measure the stdlib path
        _TYPED.append(None if off else _typed_header.decoder())
    return _TYPED[0]


def _careful_header(header: bytes | bytearray | memoryview, file_size: int, text: str | None = None) -> Header:
    """The rules alone: raise the first problem ``check_header`` yields, else the header."""
    from .rules import check

    checks = check(header, file_size, text)
    while True:
        try:
            problem = next(checks)
        except StopIteration as done:
            entries, metadata = done.value
            break
        if not problem.warning:
            checks.close()
            raise problem.error
    return _header_of(entries, metadata, len(header))


def _header_of(entries: list[Any], metadata: dict[str, str] | None, n: int) -> Header:
    """The header of the rules' entries (sorted by offset) and metadata."""
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    share = shared.setdefault
    offsets = [0]
    offsets += [end for _, end, _, _, _, _ in entries]
    return Header([e[3] for e in entries], [e[4] for e in entries], [share(e[5], e[5]) for e in entries], offsets,
                  metadata, n)


_ABSENT = object()


def _no_float(text: str) -> Any:
    # A header the fast path takes holds no float, NaN or Infinity (entries are a code and
    # integers, metadata strings): the first one ends the decoding, and the rules decide.
    raise ValueError(text)


# json's C decoder, calling Python only for a float or constant: integers stay in C.
_decode = json.JSONDecoder(parse_float=_no_float, parse_constant=_no_float).decode


def _fast_header(text: str, n: int, file_size: int) -> Header | None:
    """The common, well-formed header: json's C scanner, no hooks, one tight loop.

    Returns None whenever anything is unusual; the rules then decide (and report the exact
    error).  It accepts only headers that are exactly: an object holding an optional
    ``__metadata__`` (null, or an object of strings) and tensor entries that are objects of
    exactly the three fields, written in file order with contiguous offsets.  One loop, not
    a pass per check over columns built with map(): each such pass allocates a list as long
    as the header has tensors, which costs more than the loop's per-tensor bytecode.
    """
    if not screen(text):
        return None
    may_be_negative = "-" in text
    try:
        raw = _decode(text)
    except (ValueError, RecursionError):
        return None
    if type(raw) is not dict:
        return None
    metadata: dict[str, str] | None = None
    value = raw.pop(METADATA_KEY, _ABSENT)  # raw is ours: no copy of 100,000 pairs
    has_metadata_key = value is not _ABSENT
    if has_metadata_key:
        if not metadata_fits(value):
            return None
        metadata = value
    names = list(raw)
    dtypes: list[DType] = []
    shapes: list[tuple[int, ...]] = []
    offsets = [0]
    add_dtype, add_shape, add_end = dtypes.append, shapes.append, offsets.append
    # A checkpoint repeats a few (dtype, shape) kinds: the first tensor of each is checked
    # (first_of_kind), the others compare their span with its.
    kinds: dict[tuple[Any, ...], Kind | None] = {}
    get_kind = kinds.get
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    expected = 0
    try:
        for value in raw.values():
            # Exactly the three fields: an extra one may hold what serde rejects (deep
            # nesting, out-of-range numbers), which only the rules check.
            if type(value) is not dict or len(value) != 3:
                return None
            shape = value["shape"]  # a missing field: KeyError, below
            begin, end = value["data_offsets"]
            if type(shape) is not list or begin != expected or type(begin) is not int or type(end) is not int:
                return None
            # No dim is a float (the decoder refused them); a str or None dim makes a key no kind
            # has, and first_of_kind refuses it; a list or dict dim, or such a code, cannot be
            # hashed (TypeError, below).  Only a boolean equals a checked kind's int dim.
            kind = get_kind(key := (value["dtype"], *shape))
            if kind is None:
                kind = kinds[key] = first_of_kind(value["dtype"], shape, begin, end, may_be_negative, shared)
                if kind is None:
                    return None
            elif end - begin != kind[2] or (kind[3] and not ints_only(shape)):
                return None
            expected = end
            add_dtype(kind[0])
            add_shape(kind[1])
            add_end(end)
    except (KeyError, TypeError, ValueError):
        return None
    if expected >= U64_LIMIT:  # the last end is the largest: every span is checked non-negative
        return None
    if not complete(text, n, "".join(names), len(names), has_metadata_key, metadata, expected, file_size):
        return None
    return Header(names, dtypes, shapes, offsets, metadata, n)


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
    try:
        body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate somewhere: found and named (only on this path)
        raise _unencodable(entries, metadata) from None
    pad = (alignment - (N_LEN + len(body)) % alignment) % alignment
    return body + b" " * pad


def _unencodable(entries: list[tuple[str, str, list[int], int, int]], metadata: Mapping[str, str] | None
                 ) -> UnencodableText:
    """The error for the first metadata key, metadata value or tensor name UTF-8 cannot encode."""
    named = [(f"metadata key {k!r}", k, {"key": k}) for k in metadata or ()]
    named += [(f"metadata value of {k!r}", v, {"key": k}) for k, v in (metadata or {}).items()]
    named += [(f"tensor name {e[0]!r}", e[0], {"tensor": e[0]}) for e in entries]
    for what, text, context in named:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            return UnencodableText(
                f"{what} holds a lone surrogate ({text[e.start]!r} at position {e.start}), which UTF-8 "
                "cannot encode: it cannot be written in a safetensors header", **context)
    return UnencodableText("the header holds text UTF-8 cannot encode")  # not reached: one of them fails
