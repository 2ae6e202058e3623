"""The fast header path on msgspec (the ``fast`` extra): decoding and type checks in C.

msgspec decodes the tensor entries straight into typed records, checking in C what the
json-based fast path checks in Python: every entry an object of exactly ``dtype`` (a code
from the table), ``shape`` (integers) and ``data_offsets`` (two integers), no floats or
booleans in their place.  What is left per tensor is the
layout: offsets contiguous in file order and sizes matching shape x dtype.

Like the other fast path it only ever accepts what the rules accept, returning the same
Header, and returns None for anything unusual (tests/reliability/test_fast_path_verdicts.py
runs both against the rules on the corpus and the fuzzers' inputs).  It handles the layout
every writer produces: ``__metadata__`` first, or absent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from .._optional import optional
from ._fastpath import Kind, complete, first_of_kind, metadata_fits, screen
from ._frame import METADATA_KEY, U64_LIMIT
from .dtypes import CODES

_METADATA_PREFIX = '{"' + METADATA_KEY + '":'
# Returned for a header whose __metadata__ is not first: json's fast path may take it.
NOT_CANONICAL = object()
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def decoder() -> Callable[[str], Any] | None:
    """msgspec's decoder for ``{name: entry}``, or None when msgspec is not installed."""
    msgspec = optional("msgspec")
    if msgspec is None:
        return None
    entry = msgspec.defstruct(
        "TensorEntry",
        [("dtype", Literal.__getitem__(CODES)), ("shape", list[int]), ("data_offsets", tuple[int, int])],
        forbid_unknown_fields=True,
    )
    decode = msgspec.json.Decoder(dict[str, entry]).decode  # type: ignore[valid-type]
    errors = (msgspec.ValidationError, msgspec.DecodeError)

    def entries(text: str) -> Any:
        try:
            return decode(text)
        except errors:
            return None

    return entries


def fast_header(text: str, n: int, file_size: int, entries_of: Callable[[str], Any], make: Callable[..., Any]) -> Any:
    """The header built by ``make(names, dtypes, shapes, offsets, metadata, n)`` (the columns of
    ``header.Header``), or None to leave it to the rules."""
    if not screen(text):
        return None
    may_be_negative = "-" in text
    metadata: dict[str, str] | None = None
    has_metadata_key = text.startswith(_METADATA_PREFIX)
    body = text
    if has_metadata_key:
        try:
            metadata, end = _scan(text, len(_METADATA_PREFIX))
        except (ValueError, StopIteration, RecursionError):
            return None
        if not metadata_fits(metadata):
            return None
        follows = text[end : end + 1]
        if follows == "," and text[end + 1 : end + 2] == '"':  # a member follows (not a trailing comma)
            body = "{" + text[end + 1 :]
        elif follows == "}":
            body = "{}" + text[end + 1 :]
        else:
            return None
    if '"' + METADATA_KEY + '"' in body:  # not first (or a second one)
        return NOT_CANONICAL
    entries = entries_of(body)
    if entries is None:
        return None
    names = list(entries)
    dtypes: list[Any] = []
    shapes: list[tuple[int, ...]] = []
    offsets = [0]
    add_dtype, add_shape, add_end = dtypes.append, shapes.append, offsets.append
    kinds: dict[tuple[Any, ...], Kind | None] = {}  # first_of_kind once per (dtype, shape), as json's path
    get_kind = kinds.get
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    expected = 0
    for entry in entries.values():
        begin, end = entry.data_offsets
        if begin != expected:
            return None
        shape = entry.shape  # integers (msgspec refuses booleans), but any size
        kind = get_kind(key := (entry.dtype, *shape))
        if kind is None:
            kind = kinds[key] = first_of_kind(entry.dtype, shape, begin, end, may_be_negative, shared)
            if kind is None:
                return None
        elif end - begin != kind[2] or end >= U64_LIMIT:
            return None
        expected = end
        add_dtype(kind[0])
        add_shape(kind[1])
        add_end(end)
    if not complete(text, n, "".join(names), len(names), has_metadata_key, metadata, expected, file_size):
        return None
    return make(names, dtypes, shapes, offsets, metadata, n)
