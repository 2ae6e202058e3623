"""What both fast header paths (``header._fast_header`` on json, ``_typed_header`` on msgspec)
check alike, once: the text's pre-screen, the metadata's type, the first tensor of each dtype
and shape (``first_of_kind``: its byte span against shape and dtype), and the whole header's
size and duplicate members.

Each returns False for anything the fast paths leave to the rules (``rules.check``), which
then give the verdict and the exact error; True only where the rules would accept.
"""

from __future__ import annotations

from math import prod
from typing import Any

from ._frame import N_LEN, U64_LIMIT
from .dtypes import BY_CODE, DType

# What a fast path keeps for each distinct (dtype code, *dims) key: the dtype, the shape (one
# tuple shared by every tensor of that shape), the byte span every such tensor must have, and
# whether a dim is 0 or 1 (which a JSON boolean equals as a key: see ``first_of_kind``).
Kind = tuple[DType, tuple[int, ...], int, bool]


def screen(text: str) -> bool:
    """Whether a fast path may decode ``text`` at all.

    What json and msgspec read differently from serde, found in the text: ``-0`` (an integer
    0 to them, a float to serde) and ``\\u`` escapes (lone surrogates; a colon written as an
    escape would also fool ``members_unique``).  NaN, floats, booleans and huge numbers need
    no scan: the decoders refuse floats and NaN (json's through its hooks, msgspec's by type),
    and the rest fail the type and range checks (booleans in a shape: ``first_of_kind``).

    Then the work is bounded before anything is built: a header of the fast paths' shape has
    one object per tensor (+1, +1 with metadata) and two arrays per tensor.  Any other count
    (a top-level array of a million objects, brackets inside names) goes to the rules, which
    refuse wrong shapes before building them.
    """
    if ("-" in text and "-0" in text) or ("\\" in text and "\\u" in text):
        return False
    arrays = text.count("[")
    return not arrays & 1 and 0 <= text.count("{") - 1 - (arrays >> 1) <= 1


def metadata_fits(value: Any) -> bool:
    """Whether a decoded ``__metadata__`` value is what the rules accept: null, or an object
    of strings."""
    return value is None or (type(value) is dict and set(map(type, value.values())) <= {str})


def first_of_kind(code: Any, shape: list[Any], begin: int, end: int, may_be_negative: bool,
                  shapes: dict[tuple[int, ...], tuple[int, ...]]) -> Kind | None:
    """The kind of the first tensor of its (dtype ``code``, ``*shape``) key, the one whose span
    ``[begin, end)`` is checked against shape and dtype; None when it breaks a rule (an
    unknown code, a dim not an integer, a span that does not fit).  ``shapes`` holds one
    tuple per distinct shape, shared.

    A later tensor of an equal key only compares its span with the kind's.  Equal keys are
    equal shapes once every dim is an int, except that a JSON ``true``/``false`` equals 1/0:
    where the kind has a 0 or 1 dim, a fast path checks each later shape's dims are ints.
    """
    dtype = BY_CODE.get(code)
    if dtype is None or not ints_only(shape):
        return None
    if not span_fits(shape, dtype.bits, begin, end, may_be_negative):
        return None
    key = tuple(shape)
    return dtype, shapes.setdefault(key, key), end - begin, 0 in key or 1 in key


def ints_only(shape: list[Any]) -> bool:
    """Whether every dim is an int (not a bool, which a key does not tell from 0 and 1)."""
    return all(type(d) is int for d in shape)


def span_fits(shape: list[int], bits: int, begin: int, end: int, may_be_negative: bool) -> bool:
    """Whether ``shape`` (integers only) of ``bits``-bit elements fills exactly ``[begin, end)``,
    every count a u64 as upstream computes it.

    More than 64 dims (never seen; the product could be a huge int) and negative dims (only
    possible where the header's text has a ``-``, hence ``may_be_negative``) are left to the
    rules, as is a zero-element shape with huge dims: a zero product hides its dims from the
    size check, yet each must still be a u64 and upstream multiplies in order, so the dims
    before the first 0 must not overflow either.
    """
    if shape:
        if len(shape) > 64 or (may_be_negative and min(shape) < 0):
            return False
        nelements = prod(shape)
        if nelements == 0 and (max(shape) >= U64_LIMIT or prod(shape[: shape.index(0)]) >= U64_LIMIT):
            return False
        nbits = nelements * bits
    else:
        nbits = bits
    return not (nbits >= U64_LIMIT or nbits & 7 or end - begin != nbits >> 3 or end >= U64_LIMIT)


def complete(text: str, n: int, names: str, tensors: int, has_metadata_key: bool, metadata: dict[str, str] | None,
             data_end: int, file_size: int) -> bool:
    """Whether the ``n``-byte header ``text`` (its tensors' data ending at ``data_end``)
    accounts for the whole file, and holds no duplicate key (``members_unique``)."""
    return data_end + N_LEN + n == file_size and members_unique(
        text, names, tensors, has_metadata_key, metadata
    )


def members_unique(text: str, names: str, tensors: int, has_metadata_key: bool, metadata: dict[str, str] | None
                   ) -> bool:
    """Whether the header ``text`` holds no duplicate key, given what was decoded from it:
    ``tensors`` entries whose names joined are ``names``, and the metadata.

    Duplicate keys anywhere (top level, inside an entry, in the metadata) are invisible once
    decoded, but each adds a member, and every member has exactly one colon outside strings.
    The colons the kept members account for (one each, plus any inside names and metadata
    strings; dtype codes and numbers have none) must be all the text has: a mismatch means a
    member was replaced, and the rules report what serde would.
    """
    members = tensors + has_metadata_key + 3 * tensors + (len(metadata) if metadata else 0)
    in_strings = names.count(":")
    if metadata:
        in_strings += "".join(metadata).count(":") + "".join(metadata.values()).count(":")
    return text.count(":") == members + in_strings
