"""JSON read exactly the way serde_json (upstream's parser) reads it, on top of ``json``.

Python's json accepts things serde rejects (NaN/Infinity, ``-0`` as an integer, numbers
that overflow f64, lone surrogate escapes, unlimited nesting) and silently keeps the last of
duplicate keys.  The hooks here make those visible so header.py can give upstream's verdict.
Standard library only.
"""

from __future__ import annotations

import json
import re
from typing import Any

# serde_json refuses to nest arrays/objects 128 deep (the top-level object counts as 1).
SERDE_DEPTH_LIMIT = 128
# A \u escape of a UTF-16 surrogate: the only way a lone surrogate can reach a JSON string.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class JsonObject(dict):  # type: ignore[type-arg]
    """A JSON object that remembers duplicate keys (and the values they replaced) and its depth.

    The class attributes are the common case, so most objects never set instance attributes.
    """

    duplicates: tuple[str, ...] | list[str] = ()
    replaced: tuple[Any, ...] | list[Any] = ()
    depth: int = 1


def _depth(value: Any) -> int:
    """Nesting depth of a parsed value (0 for scalars), computed only up to the serde limit."""
    if type(value) is JsonObject:
        return value.depth
    if type(value) is list:
        deepest = 0
        for item in value:
            if type(item) is list or type(item) is JsonObject:
                deepest = max(deepest, _depth(item))
                if deepest >= SERDE_DEPTH_LIMIT:
                    break
        return deepest + 1
    return 0


def _pairs_hook(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj = JsonObject(pairs)
    if len(obj) != len(pairs):
        seen: dict[str, Any] = {}
        duplicates, replaced = [], []
        for key, value in pairs:
            if key in seen:
                duplicates.append(key)
                replaced.append(seen[key])
            seen[key] = value
        obj.duplicates, obj.replaced = duplicates, replaced
    deepest = 0
    for value in pairs:
        v = value[1]
        if type(v) is list or type(v) is JsonObject:
            deepest = max(deepest, _depth(v))
    if deepest:
        obj.depth = deepest + 1
        if deepest + 1 >= SERDE_DEPTH_LIMIT:
            raise ValueError("recursion limit exceeded")
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"expected value, found {name}")


# serde_json (without float_roundtrip) builds numbers as f64 from a u64 significand and a
# power of ten, and refuses any number whose value is infinite ("number out of range").
_POW10 = [float(f"1e{i}") for i in range(309)]
_U64_MAX = (1 << 64) - 1
_NUMBER = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?")


def _serde_number_in_range(text: str) -> bool:
    """Whether serde_json parses the JSON number ``text`` without NumberOutOfRange."""
    m = _NUMBER.fullmatch(text)
    if m is None:  # not reachable from json.loads; be strict
        return False
    _, int_digits, frac_digits, exp_sign, exp_digits = m.groups()
    significand = 0
    exponent = 0
    overflowed = False
    for c in int_digits:
        if overflowed:
            exponent += 1  # parse_long_integer: extra digits only scale
        elif significand > (_U64_MAX - int(c)) // 10:
            overflowed = True
            exponent += 1
        else:
            significand = significand * 10 + int(c)
    if frac_digits is not None:
        for c in frac_digits:
            if significand > (_U64_MAX - int(c)) // 10:
                break  # parse_decimal_overflow: further digits are ignored
            significand = significand * 10 + int(c)
            exponent -= 1
    if exp_digits is not None:
        e_text = exp_digits.lstrip("0") or "0"
        if len(e_text) > 10 or int(e_text) > 2**31 - 1:
            return significand == 0 or exp_sign == "-"  # parse_exponent_overflow
        e = int(e_text)
        exponent = exponent - e if exp_sign == "-" else exponent + e
        exponent = max(-(2**31), min(2**31 - 1, exponent))  # saturating
    f = float(significand)
    while True:
        if abs(exponent) <= 308:
            if exponent >= 0:
                return f * _POW10[exponent] != float("inf")
            return True
        if f == 0.0:
            return True
        if exponent >= 0:
            return False
        f /= 1e308
        exponent += 308


def _parse_int(text: str) -> Any:
    # serde_json reads "-0" as the float -0.0, which is not a valid usize.
    if text == "-0":
        return -0.0
    # Past 20 digits serde_json falls back to f64, refusing values that overflow it.
    if len(text) > 20 and not _serde_number_in_range(text):
        raise ValueError("number out of range")
    try:
        return int(text)
    except ValueError:  # more digits than int() accepts; the f64 check above passed
        return float(text)


def _parse_float(text: str) -> float:
    if not _serde_number_in_range(text):
        raise ValueError("number out of range")
    return float(text)


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string (key or value) in a parsed JSON value is not encodable UTF-8."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
            stack.extend(getattr(v, "replaced", ()))
        elif isinstance(v, list):
            stack.extend(v)
    return False


def decode_header_json(text: str) -> Any:
    """Parse header JSON the way serde_json reads it (``json.loads`` plus hooks).

    Objects come back as dicts with a ``duplicates`` list (keys seen more than once) and
    ``replaced`` (the values those later keys replaced).  Raises ValueError (or
    RecursionError) for JSON serde would reject: NaN/Infinity, ``-0``, numbers out of f64
    range, nesting of 128 levels or more.  Shared by the strict parser and ``validate``.
    """
    return json.loads(
        text,
        object_pairs_hook=_pairs_hook,
        parse_constant=_reject_constant,
        parse_int=_parse_int,
        parse_float=_parse_float,
    )
