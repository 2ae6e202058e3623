"""Header JSON read the way serde_json (upstream's parser) reads it, with bounded work.

Python's json accepts things serde rejects (NaN/Infinity, ``-0`` as an integer, numbers that
overflow f64, lone surrogate escapes, unlimited nesting) and silently keeps the last of
duplicate keys.  This module finds those in C-speed passes over the text (regular
expressions, ``str`` methods, the json module's own C scanner) instead of a Python hook per
JSON value, so a crafted 100 MB header costs time and memory in proportion to its size with
a small constant, and it walks the top-level object one member at a time, so a value the
header grammar rejects outright (a tensor entry that is an array of numbers, an array as
``__metadata__``, a top level that is not an object) is refused before it is built.

Objects come back as tuples of ``(key, value)`` pairs: the C scanner builds them without a
Python call, they keep duplicate keys in order (which serde's rules need), and every ``{}``
is the one empty tuple.  Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from decimal import Decimal
from itertools import chain, compress, repeat
from operator import is_, itemgetter
from typing import Any

from ._frame import METADATA_KEY, U64_LIMIT

# serde_json refuses to nest arrays/objects 128 deep (the top-level object counts as 1).
SERDE_DEPTH_LIMIT = 128

# The patterns below serve the rules' path only (an ordinary header takes the fast path, which
# needs none of them), so they stay source text and are compiled on first use (``re``'s cache
# keeps them): importing the format core then leaves fewer objects behind, and every object an
# import leaves advances the garbage collector's generations for the rest of the process.
_WS = r"[ \t\n\r]*"
# A JSON string (valid or not: text that is not valid JSON is rejected by the parse anyway).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
# A number that might be near f64's limit has a positive exponent of 200 or more, or 100
# integer digits; any other is below 1e300, where serde and Python agree.  The exponent is
# looked for with a literal first character (the regex engine then skips ahead in C) and
# digit runs on the bytes mapped to "1" for a digit, "0" for anything else.
_BIG_EXPONENTS = tuple(e + r"\+?0*(?:[2-9][0-9]{2}|[1-9][0-9]{3,})" for e in "eE")
_DIGIT_MASK = bytes(0x31 if 0x30 <= i <= 0x39 else 0x30 for i in range(256))
_LONG_DIGIT_RUN = b"1" * 100
# Outside strings, everything but the characters of numbers becomes a space, so split()
# lists the number tokens (and "e" from true/false, which is no number).
_NUMBER_CHARS = bytes(i if chr(i) in "0123456789eE.+-" else 0x20 for i in range(256))
# ``-0`` as an integer token: serde reads it as the float -0.0, which no usize field takes.
_NEG_ZERO = r"-0(?![.0-9eE])"
_STRING_OR_NEG_ZERO = r'("[^"\\]*(?:\\.[^"\\]*)*")|-0(?![.0-9eE])'
# Every escape sequence, with surrogates matched the way serde pairs them, so the length of
# a match tells what it is: a high surrogate and its low one, 12 characters (fine); a high
# one not followed by another \u escape, 6 (serde: "unexpected end of hex escape"); a high
# one followed by a \u escape that is no low surrogate, 7 (the backslash of the next escape
# is taken along; serde: "lone leading surrogate in hex escape"); a lone low one, 6 (the same
# words); any other escape, 2.
_ESCAPE = r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\(?=u))?|u[dD][c-fC-F][0-9a-fA-F]{2}|.)"
SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F]"
_F64_MAX = Decimal("1.7976931348623157e308")
# serde's f64 arithmetic is within a few units in the last place of the true value: below
# this band every token is finite for both, above it infinite for both; inside, emulate.
_BAND_LOW, _BAND_HIGH = _F64_MAX * Decimal("0.99999999999999"), _F64_MAX * Decimal("1.00000000000001")


class Unparsed:
    """A value left unbuilt because the header grammar rejects it whatever it holds.

    ``kind`` is serde's word for it ("sequence"); ``first`` is the first item of a tensor
    entry written as an array when that item is what makes it wrong.
    """

    __slots__ = ("first", "kind")

    def __init__(self, kind: str, first: Any = None) -> None:
        self.kind = kind
        self.first = first


class KeyedObject(dict):  # type: ignore[type-arg]
    """A decoded JSON object that remembers its first duplicate key: with
    ``json.loads(..., object_pairs_hook=KeyedObject.of)`` every object keeps the last value
    of a key (as json does) and ``duplicate`` is ``(key, first value, second value)``, for
    readers that refuse a key given twice (an index, a metadata file)."""

    duplicate: tuple[str, Any, Any] | None = None

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> KeyedObject:
        obj = cls(pairs)  # built in C; a key given twice leaves fewer keys than pairs
        if len(obj) == len(pairs):
            return obj
        obj = cls()
        for key, value in pairs:
            if key in obj and obj.duplicate is None:
                obj.duplicate = (key, obj[key], value)
            obj[key] = value
        return obj


def first_char(text: str) -> tuple[str, int]:
    """The first character after JSON whitespace ('' at the end) and its index."""
    i = re.match(_WS, text).end()  # type: ignore[union-attr]
    return text[i : i + 1], i


def text_problem(text: str, raw: bytes | bytearray) -> str | None:
    """serde's reason for rejecting a number or a string anywhere in ``text``, if it would.

    ``raw`` is the text's UTF-8 bytes.  Numbers out of f64 range and lone surrogate escapes
    are errors even in fields serde then ignores.  Both are found by regular expressions and
    byte translations (string contents are blanked out before numbers are looked for): a
    few passes over the text in C, and a Python step per distinct large number token.
    """
    if "\\" in text and re.search(SURROGATE_ESCAPE, text):
        escapes = re.findall(_ESCAPE, text)
        lengths = list(map(len, escapes))
        lone = [lengths.index(n) for n in (6, 7) if n in lengths]
        if lone:
            first = escapes[min(lone)]
            if len(first) == 7 or first[3] in "cdefCDEF":
                return "lone leading surrogate in hex escape"
            return "unexpected end of hex escape"
    if not any(re.search(p, text) for p in _BIG_EXPONENTS) and not _has_long_digit_run(raw):
        return None
    skeleton = re.sub(_STRING, '""', text).encode("ascii", "replace")
    for token in set(skeleton.translate(_NUMBER_CHARS).split()):
        if len(token) < 5 or re.fullmatch(_NUMBER, token.decode()) is None:
            continue  # not a number (invalid JSON is refused by the parse anyway), or a small one
        number = token.decode()
        try:
            size = abs(Decimal(number))
        except ArithmeticError:  # an exponent past decimal's own limits (1e9999999): serde's rules alone
            size = None
        out_of_range = size is not None and size >= _BAND_HIGH
        if out_of_range or ((size is None or size >= _BAND_LOW) and not _serde_number_in_range(number)):
            return "number out of range"
    return None


def _has_long_digit_run(raw: bytes | bytearray) -> bool:
    """Whether 100 digits follow each other anywhere (in 1 MiB slices: no copy of all of it)."""
    step = 1 << 20
    overlap = len(_LONG_DIGIT_RUN) - 1
    return any(_LONG_DIGIT_RUN in raw[i : i + step + overlap].translate(_DIGIT_MASK) for i in range(0, len(raw), step))


def serde_minus_zero(text: str) -> str:
    """``text`` with each integer ``-0`` outside strings written ``-0.0``, the float serde reads.

    json reads ``-0`` as the integer 0, which a usize field would take; serde reads the float
    -0.0, which it would not.  Only strings and ``-0`` tokens match the pattern, so the cost
    is one regex pass and a call per string, paid only by a text that has ``-0`` at all.
    """
    if "-0" not in text or re.search(_NEG_ZERO, text) is None:
        return text
    return re.sub(_STRING_OR_NEG_ZERO, _keep_string_or_float, text)


def _keep_string_or_float(m: re.Match[str]) -> str:
    return m.group(1) or "-0.0"


# serde_json (without float_roundtrip) builds numbers as f64 from a u64 significand and a
# power of ten, and refuses any number whose value is infinite ("number out of range").
_POW10 = [float(f"1e{i}") for i in range(309)]
_U64_MAX = U64_LIMIT - 1
_NUMBER = r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([-+]?)([0-9]+))?"


def _serde_number_in_range(text: str) -> bool:
    """Whether serde_json parses the JSON number ``text`` without NumberOutOfRange."""
    m = re.fullmatch(_NUMBER, text)
    if m is None:  # not a number token; be strict
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


def syntax_reason(error: ValueError, text: str) -> str:
    """A parse error in serde_json's words where json's message maps onto one, else json's."""
    if not isinstance(error, json.JSONDecodeError):
        return str(error)  # already serde's (number rules, nesting)
    msg, pos = error.msg, error.pos
    at_end = re.compile(_WS).match(text, pos).end() >= len(text)  # type: ignore[union-attr]
    if msg == "Expecting value":
        if at_end:
            return "EOF while parsing a value"
        return "invalid number" if text[pos] == "-" else "expected value"
    if msg == "Extra data":
        return "trailing characters"
    if msg.startswith("Invalid \\"):  # "Invalid \\escape", "Invalid \\uXXXX escape"
        return "invalid escape"
    if msg == "Invalid control character at":
        return "control character (\\u0000-\\u001F) found while parsing a string"
    if msg == "Unterminated string starting at":
        return "EOF while parsing a string"
    if msg == "Expecting property name enclosed in double quotes":
        if at_end:
            return "EOF while parsing an object"
        before = text[:pos].rstrip(" \t\n\r")
        return "trailing comma" if before.endswith(",") and text[pos] == "}" else "key must be a string"
    if msg == "Expecting ':' delimiter":
        return "EOF while parsing an object" if at_end else "expected `:`"
    return f"{msg}: line {error.lineno} column {error.colno} (char {pos})"


def _reject_constant(name: str) -> Any:
    raise ValueError("invalid number" if name.startswith("-") else "expected value")


def reaches_depth(value: Any, depth: int) -> bool:
    """Whether ``value`` nests arrays/objects ``depth`` deep ([] is 1 deep, a scalar 0).

    Level by level with C iterators (a few passes over each level, no Python frame per
    container).  Only non-empty containers have a next level, and ``filter(None, ...)``
    drops the empty ones (and falsy scalars) first, so a million ``{}`` cost one pass.
    """
    level: Any = [value]
    for d in range(1, depth + 1):
        if d == depth:
            kinds = set(map(type, level))
            return list in kinds or tuple in kinds
        if d == 1 and type(value) is list:
            level = value  # its items are the next level: no copy
            continue
        nonempty = list(filter(None, level))
        if not nonempty:
            return False  # at most empty containers here: d < depth
        types = list(map(type, nonempty))
        lists = compress(nonempty, map(is_, types, repeat(list)))
        objects = compress(nonempty, map(is_, types, repeat(tuple)))
        level = list(chain(chain.from_iterable(lists), map(itemgetter(1), chain.from_iterable(objects))))
    return False  # depth 0: never reached


class _Scanner:
    """The json module's C scanner with serde's number rules; objects as tuples of pairs."""

    def __init__(self) -> None:
        decoder = json.JSONDecoder(object_pairs_hook=tuple, parse_constant=_reject_constant)
        self.scan_once = decoder.scan_once  # type: ignore[attr-defined]
        self.scanstring = decoder.parse_string  # type: ignore[attr-defined]

    def value(self, text: str, pos: int) -> tuple[Any, int]:
        try:
            return self.scan_once(text, pos)  # type: ignore[no-any-return]
        except StopIteration:
            raise json.JSONDecodeError("Expecting value", text, pos) from None


def decode_scalar(text: str, pos: int) -> Any:
    """The value at ``pos`` when it is not an array or object (a bounded parse)."""
    text = serde_minus_zero(text[pos:])
    return _Scanner().value(text, 0)[0]


def _brackets(text: str, start: int, end: int) -> int:
    return text.count("[", start, end) + text.count("{", start, end)


def iter_members(text: str, start: int) -> Iterator[tuple[str, Any]]:
    """The members of the header's top-level object (which opens at ``start``), in order.

    Raises ValueError (json's message) on a syntax error when the walk reaches it and
    RecursionError on nesting deeper than the C scanner allows; yields ``(key, value)``.
    Values are parsed by the C scanner, except two the header grammar rejects outright,
    which come back as :class:`Unparsed` before anything is built: an array as
    ``__metadata__``, and a tensor entry written as an array whose first item is neither a
    string nor an object (the only valid dtypes).  If iteration goes on after one, the value
    is parsed and dropped, so a caller collecting every problem reaches the next member.
    """
    scanner = _Scanner()
    text = serde_minus_zero(text)  # keeps every position before the first -0 (and so ``start``)
    ws = re.compile(_WS).match
    pos = ws(text, start + 1).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] == "}":
        pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
        if pos != len(text):
            raise json.JSONDecodeError("Extra data", text, pos)
        return
    while True:
        if text[pos : pos + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        key, pos = scanner.scanstring(text, pos + 1, True)
        pos = ws(text, pos).end()  # type: ignore[union-attr]
        if text[pos : pos + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
        unparsed = None
        if text[pos : pos + 1] == "[":
            if key == METADATA_KEY:
                unparsed = Unparsed("sequence")
            else:
                item = ws(text, pos + 1).end()  # type: ignore[union-attr]
                opener = text[item : item + 1]
                if opener == "[":
                    unparsed = Unparsed("sequence", Unparsed("sequence"))
                elif opener not in ('"', "{", "]"):
                    unparsed = Unparsed("sequence", scanner.value(text, item)[0])
        if unparsed is not None:
            yield key, unparsed
            _, end = scanner.value(text, pos)  # only reached by a caller that goes on
        else:
            value, end = scanner.value(text, pos)
            # A value reaching serde's limit has as many opening brackets at least.
            if end - pos >= 2 * (SERDE_DEPTH_LIMIT - 1) and _brackets(text, pos, end) >= SERDE_DEPTH_LIMIT - 1 \
                    and reaches_depth(value, SERDE_DEPTH_LIMIT - 1):
                raise ValueError("recursion limit exceeded")
            yield key, value
        pos = ws(text, end).end()  # type: ignore[union-attr]
        c = text[pos : pos + 1]
        if c == ",":
            pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
        elif c == "}":
            break
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
    pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
    if pos != len(text):
        raise json.JSONDecodeError("Extra data", text, pos)
