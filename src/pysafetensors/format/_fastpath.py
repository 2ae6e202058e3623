"""What both fast header paths (``header._fast_header`` on json, ``_typed_header`` on msgspec)
check alike, once: a tensor's byte span against its shape and dtype, and duplicate members.

Each returns False for anything the fast paths leave to the rules (``rules.check``), which
then give the verdict and the exact error; True only where the rules would accept.
"""

from __future__ import annotations

from math import prod

from .rules import U64_LIMIT


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
