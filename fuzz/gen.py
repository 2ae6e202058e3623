"""Random safetensors files and mutations of them, for the fuzzer and the differential tests.

Everything is driven by a ``random.Random`` so an input is reproducible from its seed.  Headers
are built as trees of ``Obj`` (ordered pairs, duplicates allowed) and ``Raw`` (JSON text used
verbatim, for forms Python's json module never writes: ``-0``, ``1e2``, lone surrogate escapes)
and printed by a small emitter that can put odd whitespace between tokens.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Bits per element, from the format spec (kept here so the generator does not trust the code
# under test's own dtype table).
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16,
    "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
DTYPES = list(DTYPE_BITS)


class Raw(str):
    """JSON text emitted as is."""


@dataclass
class Obj:
    """A JSON object as ordered pairs; duplicate keys allowed (a ``Raw`` key is emitted as is)."""

    pairs: list[tuple[str, Any]] = field(default_factory=list)

    def get(self, key: str) -> Any:
        for k, v in self.pairs:
            if k == key:
                return v
        return None

    def set(self, key: str, value: Any) -> None:
        for i, (k, _) in enumerate(self.pairs):
            if k == key:
                self.pairs[i] = (k, value)
                return
        self.pairs.append((key, value))


_NORMAL_WS = [" ", "\n", "\t", "\r"]
_ODD_WS = ["\f", "\v", "\x00", "\u00a0", "\u2028"]


def emit(value: Any, ws: Callable[[], str] = lambda: "") -> str:
    """Print a header tree as JSON text; ``ws()`` supplies whitespace between tokens."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Obj):
        inner = ",".join(
            f"{ws()}{k if isinstance(k, Raw) else json.dumps(k, ensure_ascii=False)}{ws()}:{ws()}{emit(v, ws)}{ws()}"
            for k, v in value.pairs
        )
        return "{" + (inner or ws()) + "}"
    if isinstance(value, dict):
        return emit(Obj(list(value.items())), ws)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(f"{ws()}{emit(v, ws)}{ws()}" for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def frame(header: bytes, data: bytes, declared: int | None = None) -> bytes:
    """8-byte little-endian length, header, data."""
    n = len(header) if declared is None else declared
    return struct.pack("<Q", n % (1 << 64)) + header + data


# --- valid files ---------------------------------------------------------------------------


def shape_for(rng: random.Random, bits: int) -> list[int]:
    for _ in range(20):
        shape = [rng.choice([0, 1, 1, 2, 3, 4, 5, 8]) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4]))]
        n = 1
        for d in shape:
            n *= d
        if n * bits % 8 == 0:
            return shape
    return [2, 4]


def _name(rng: random.Random, i: int) -> str:
    return rng.choice([f"t{i}", f"layer.{i}.weight", f"ü{i}", f"\U0001f600{i}", f"x y/{i}", f"{i}"])


def valid_tree(rng: random.Random, max_tensors: int = 5) -> tuple[Obj, bytes]:
    """A valid header tree (tensors in random file order) and its data region."""
    top = Obj()
    if rng.random() < 0.4:
        top.pairs.append(("__metadata__", Obj([(f"k{i}", rng.choice(["v", "", "ü", "1"])) for i in range(rng.randint(0, 3))])))
    entries = []
    for i in range(rng.randint(0, max_tensors)):
        code = rng.choice(DTYPES)
        shape = shape_for(rng, DTYPE_BITS[code])
        n = 1
        for d in shape:
            n *= d
        entries.append((_name(rng, i), code, shape, n * DTYPE_BITS[code] // 8))
    order = list(range(len(entries)))
    rng.shuffle(order)  # file order may differ from key order
    offsets = {}
    pos = 0
    for i in order:
        offsets[i] = (pos, pos + entries[i][3])
        pos += entries[i][3]
    for i, (name, code, shape, _) in enumerate(entries):
        top.pairs.append((name, Obj([("dtype", code), ("shape", shape), ("data_offsets", list(offsets[i]))])))
    if rng.random() < 0.5:
        rng.shuffle(top.pairs)
    data = bytes(rng.getrandbits(8) for _ in range(pos))
    return top, data


def encode(tree: Any, data: bytes, rng: random.Random | None = None, odd_ws: bool = False, pad: bool = True) -> bytes:
    """Frame a tree: JSON text, optionally random whitespace, padded with spaces to 8."""
    if rng is None:
        text = emit(tree)
    else:
        pool = _NORMAL_WS + (_ODD_WS if odd_ws else [])
        text = emit(tree, lambda: "".join(rng.choice(pool) for _ in range(rng.choice([0, 0, 0, 1, 2]))))
    header = text.encode("utf-8", "surrogatepass")
    if pad:
        header += b" " * ((8 - (8 + len(header)) % 8) % 8)
    return frame(header, data)


def sample_file() -> bytes:
    """A small valid file: one tensor of every dtype, in file order (the runner's warm-up input)."""
    top, pos, data = Obj([("__metadata__", Obj([("format", "pt")]))]), 0, b""
    for i, (code, bits) in enumerate(DTYPE_BITS.items()):
        size = 8 * bits // 8  # shape [2, 4]: a whole number of bytes for every dtype
        top.pairs.append((f"t{i}", Obj([("dtype", code), ("shape", [2, 4]), ("data_offsets", [pos, pos + size])])))
        data += bytes((i * 37 + j) % 251 for j in range(size))
        pos += size
    return encode(top, data)


def valid_file(rng: random.Random) -> bytes:
    tree, data = valid_tree(rng)
    return encode(tree, data, rng if rng.random() < 0.3 else None)


# --- mutations -------------------------------------------------------------------------------

_ODD_NUMBERS = [
    Raw("-0"), Raw("1e2"), Raw("1.0"), Raw("0.5"), Raw("1E0"), Raw("-1"), Raw("18446744073709551615"),
    Raw("18446744073709551616"), Raw("1" * 400), Raw("1e400"), Raw("-1e400"), Raw("1e-400"), True, None, "1",
    Raw("4294967296"), Raw("9223372036854775808"), Raw("-9223372036854775809"),
]
_ODD_STRINGS = [
    Raw('"\\ud800"'), Raw('"\\udfff"'), Raw('"\\ud83d\\ude00"'), Raw('"\\u0000"'), Raw('"a\\\\ud800"'),
    Raw('"\\uDBFF\\uDFFF"'), Raw('"\\udc00\\ud800"'), "", "__metadata__",
]


def _deep(rng: random.Random) -> Any:
    depth = rng.choice([1, 3, 10, 124, 125, 126, 127, 128, 200])
    opener, closer = rng.choice([("[", "]"), ('{"k":', "}")])
    inner = rng.choice(["1", "[]", "{}", '"s"', "null"])
    return Raw(opener * depth + inner + closer * depth)


def _random_value(rng: random.Random) -> Any:
    return rng.choice([
        lambda: rng.choice(_ODD_NUMBERS),
        lambda: rng.choice(_ODD_STRINGS),
        lambda: _deep(rng),
        lambda: [rng.randint(0, 9) for _ in range(rng.randint(0, 3))],
        lambda: Obj([("a", 1), ("a", 2)]),
        lambda: rng.randint(-5, 2**64 + 5),
        lambda: {"F32": None},
    ])()


def _as_list(value: Any, min_len: int) -> list[Any]:
    if isinstance(value, list) and len(value) >= min_len:
        return list(value)
    return [0] * min_len


def _tensors(tree: Obj) -> list[tuple[int, str, Any]]:
    return [(i, k, v) for i, (k, v) in enumerate(tree.pairs) if k != "__metadata__"]


def _mutate_tree(tree: Obj, rng: random.Random) -> None:
    tensors = _tensors(tree)
    objs = [t for t in tensors if isinstance(t[2], Obj)]
    entry = rng.choice(objs)[2] if objs else None
    which = rng.randrange(16)
    if entry is None or not isinstance(entry, Obj):
        which = rng.choice([6, 8, 9, 10])
    if which == 0:  # offsets
        offs = _as_list(entry.get("data_offsets"), 2)
        j = rng.randrange(2)
        base = offs[j] if type(offs[j]) is int else 0
        offs[j] = rng.choice([base + rng.choice([-8, -1, 1, 2, 8]), 0, 2**64 - 1, 2**63, rng.randint(0, 64)])
        entry.set("data_offsets", rng.choice([offs, offs[:1], offs + [0], [offs[1], offs[0]], _random_value(rng)]))
    elif which == 1:  # shapes
        shape = _as_list(entry.get("shape"), 0)
        if shape and rng.random() < 0.7:
            j = rng.randrange(len(shape))
            d = shape[j] if type(shape[j]) is int else 1
            shape[j] = rng.choice([d + 1, max(d - 1, 0), 0, 2**32, 2**63, 2**64, _random_value(rng)])
        else:
            shape = rng.choice([[2**32, 2**32, 16], [2**63, 2], [2**64 - 1, 2], [2**63, 0], [0, 2**64 - 1], [2**62, 0, 4], [0, 2**63 - 1], [2**63 - 1, 0, 2], [1] * 65, [0] * 70 + [2**63], shape + [1], shape[:-1], [], [0]])
        entry.set("shape", shape)
    elif which == 2:  # dtypes
        code = rng.choice(DTYPES)
        entry.set("dtype", rng.choice([code, code.lower(), "F128", "", {code: None}, {code: []}, Obj([(code, None), (code, None)]), {}, [code], 32]))
    elif which == 3:  # duplicate a tensor name
        i, name, value = rng.choice(tensors)
        other = rng.choice(tensors)[2]
        tree.pairs.insert(rng.randrange(len(tree.pairs) + 1), (name, rng.choice([value, other, _random_value(rng)])))
    elif which == 4:  # duplicate a field
        key = rng.choice(["dtype", "shape", "data_offsets"])
        entry.pairs.insert(rng.randrange(len(entry.pairs) + 1), (key, entry.get(key)))
    elif which == 5:  # unknown field
        entry.pairs.insert(rng.randrange(len(entry.pairs) + 1), (rng.choice(["x", "", "__metadata__", "\ufeff"]), _random_value(rng)))
    elif which == 6:  # names
        if tensors:
            i, _, value = rng.choice(tensors)
            tree.pairs[i] = (rng.choice(["", "__metadata__", "\ud800", "a\x00b", "\ud83d\ude00"]), value)
        else:
            tree.pairs.append(("__metadata__", rng.choice([None, Obj(), Obj([("k", "v"), ("k", 1)])])))
    elif which == 7:  # tensor as a list
        i, name, value = rng.choice([t for t in tensors if isinstance(t[2], Obj)])
        fields = [value.get("dtype"), value.get("shape"), value.get("data_offsets")]
        tree.pairs[i] = (name, rng.choice([fields, fields[:2], fields + [None], fields[::-1]]))
    elif which == 8:  # metadata
        meta = rng.choice([None, Obj([("k", _random_value(rng))]), Obj([("k", "v"), ("k", "w")]), [], Raw('{"k":"\\ud800"}'), "s"])
        tree.pairs.insert(rng.randrange(len(tree.pairs) + 1), ("__metadata__", meta))
    elif which == 9:  # the top level itself
        tree.pairs.append((rng.choice(["x", ""]), _random_value(rng)))
    elif which == 10:
        if tensors:
            del tree.pairs[rng.choice(tensors)[0]]
    elif which == 11:  # remove a field
        if entry.pairs:
            del entry.pairs[rng.randrange(len(entry.pairs))]
    elif which == 12:  # swap offsets between two tensors
        other = rng.choice(tensors)[2]
        if isinstance(other, Obj):
            a, b = entry.get("data_offsets"), other.get("data_offsets")
            entry.set("data_offsets", b)
            other.set("data_offsets", a)
    elif which == 13:  # sub-byte dtype with an element count that is not whole bytes
        entry.set("dtype", rng.choice(["F4", "F6_E2M3", "F6_E3M2"]))
    elif which == 14:  # entry of the wrong type
        i, name, _ = rng.choice(tensors)
        tree.pairs[i] = (name, rng.choice([None, "x", 1, [], Obj()]))
    else:  # odd numbers in place of good ones
        key = rng.choice(["shape", "data_offsets"])
        vals = _as_list(entry.get(key), 1)
        vals[rng.randrange(len(vals))] = rng.choice(_ODD_NUMBERS)
        entry.set(key, vals)


def mutate_bytes(blob: bytes, rng: random.Random) -> bytes:
    b = bytearray(blob)
    n = int.from_bytes(b[:8], "little") if len(b) >= 8 else 0
    which = rng.randrange(9)
    if which == 0 and b:  # flip bytes anywhere
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    elif which == 1 and len(b) > 8:  # flip bytes in the header
        for _ in range(rng.randint(1, 3)):
            b[8 + rng.randrange(max(1, min(n, len(b) - 8)))] = rng.randrange(256)
    elif which == 2:  # header length
        n2 = rng.choice([n + rng.choice([-9, -8, -1, 1, 8]), 0, 1, 7, 100_000_000, 100_000_001, 2**63, 2**64 - 1, len(b)])
        b[:8] = struct.pack("<Q", n2 % (1 << 64))
    elif which == 3:  # truncate
        del b[rng.randrange(len(b) + 1):]
    elif which == 4:  # append
        b += bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 8])))
    elif which == 5 and len(b) > 8:  # non-UTF-8 bytes in the header
        at = 8 + rng.randrange(max(1, min(n, len(b) - 8)))
        b[at:at + 1] = rng.choice([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82"])
        b[:8] = struct.pack("<Q", (n + len(b) - len(blob)) % (1 << 64)) if rng.random() < 0.5 else b[:8]
    elif which == 6 and len(b) > 8:  # odd whitespace before/after the JSON
        ws = rng.choice([b"\f", b"\v", b"\x00", b" ", b"\t", b"\n", b"\r", b"\xc2\xa0"])
        at = 8 if rng.random() < 0.5 else 8 + n
        b[at:at] = ws
        b[:8] = struct.pack("<Q", (n + len(ws)) % (1 << 64))
    elif which == 7 and len(b) > 8:  # pad out the header with spaces / NULs
        pad = rng.choice([b" ", b"\x00"]) * rng.choice([1, 8])
        b[8 + n:8 + n] = pad
        b[:8] = struct.pack("<Q", (n + len(pad)) % (1 << 64))
    else:  # splice a chunk of the header somewhere else
        if len(b) > 16:
            i, j = sorted(rng.randrange(8, len(b)) for _ in range(2))
            k = rng.randrange(8, len(b))
            b[k:k] = b[i:j]
    return bytes(b)


def mutated_file(rng: random.Random) -> bytes:
    """A valid file, then 1-3 header-tree mutations and/or byte mutations."""
    tree, data = valid_tree(rng)
    for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
        _mutate_tree(tree, rng)
    blob = encode(tree, data, rng if rng.random() < 0.3 else None, odd_ws=rng.random() < 0.2, pad=rng.random() < 0.9)
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        blob = mutate_bytes(blob, rng)
    return blob


def random_input(rng: random.Random) -> bytes:
    """What the fuzzer and the differential tests feed in: mostly mutants, some valid files."""
    return valid_file(rng) if rng.random() < 0.15 else mutated_file(rng)


def random_index(rng: random.Random, ndim: int) -> Any:
    """A random index expression, in range or not, valid or not."""
    def item() -> Any:
        return rng.choice([
            lambda: rng.randint(-6, 6),
            lambda: slice(rng.choice([None, -7, -2, -1, 0, 1, 2, 5, 9]), rng.choice([None, -7, -1, 0, 1, 3, 6, 9]), rng.choice([None, None, 1, 2, 3, 0, -1])),
            lambda: Ellipsis,
            lambda: rng.choice([1.5, "a", None, [], [0], True, 2**70, -(2**70)]),
        ])()
    count = rng.choice([0, 1, ndim, ndim, ndim + 1, max(ndim - 1, 0)])
    items = tuple(item() for _ in range(count))
    return items[0] if len(items) == 1 and rng.random() < 0.5 else items
