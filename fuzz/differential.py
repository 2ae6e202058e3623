"""Differential fuzzing against upstream safetensors 0.8.0: same verdict, same tensors.

``differential_input(rng)`` starts from a valid file (any dtype, zero-size dims, 0-rank,
sub-byte dtypes, tensors out of key order, sometimes written as 3-item arrays) and applies
structured mutations to the header text and the length prefix: number forms, dtype spellings,
duplicate keys, odd metadata, escapes and lone surrogates, BOM/whitespace/NUL around the
JSON, extra and missing fields, 3-item offsets, non-integer shapes, data a byte short or long,
a wrong length prefix; one input in 32 is a header of a single JSON value (numbers with
exponents past decimal's limits among them).

``compare(data)`` runs it through both libraries and says which of these it is:

- ``both_accept``: both open it at ``safe_open`` and agree on keys, metadata, every tensor's
  dtype and shape, the bytes ``get_tensor`` gives (numpy and torch), and ``deserialize``
  (compared as sets: upstream returns tensors in a random order);
- ``both_reject``: both refuse it at ``safe_open`` (and in ``deserialize``);
- ``expected_better``: they agree, except that upstream fails with something other than its
  SafetensorError (numpy's ValueError or torch's TypeError on a 2**63 dimension, numpy's
  AttributeError on a float8 dtype) where we raise a SafetensorError or give the tensor (its
  shape the header's, its bytes the file's: the ones both ``deserialize`` give), or
  upstream's torch face returns an empty tensor whose strides wrapped around int64 (a shape
  ``torch.empty`` refuses) where we raise UnsupportedShape;
- ``ours_extends``: they agree, except that upstream refuses a dtype its framework has no type
  for with exactly "Dtype not understood: <the tensor's dtype>" (F6 in numpy) and ours gives
  the tensor through ml_dtypes, its shape the header's and its bytes (sub-byte values packed
  back, least significant bits first) the file's: the ones both ``deserialize`` give;
- anything else is a disagreement: ``compare`` raises ``Disagreement`` saying what differs.

On an accepted file, ``fuzz.differential_stages`` also saves the tensors with a lone surrogate
in a name or metadata (both must refuse, ours naming the entry) and compares torch slices with
two ``...`` (upstream's tensor or IndexError).
"""

from __future__ import annotations

import copy
import math
import os
import random
import re
import tempfile
import zlib
from collections import Counter
from typing import Any, NamedTuple

from .differential_stages import compare_torch_slices, compare_writes
from .gen import DTYPE_BITS, DTYPES, Obj, Raw, emit, frame, shape_for, valid_tree

CATEGORIES = ("both_accept", "both_reject", "expected_better", "ours_extends")
COUNTS: Counter[str] = Counter()  # what compare() has seen in this process, by category
_RANK = {"both_accept": 0, "both_reject": 0, "ours_extends": 1, "expected_better": 2}


class Disagreement(AssertionError):
    """Ours and upstream differ on an input where they must not."""


# --- inputs --------------------------------------------------------------------------------

_NUMBER_FORMS = [
    "1.0", "1e2", "1E0", "-0", "01", "-1", "0.0", "2.5e-3", str(2**63), str(2**63 - 1), str(2**64),
    str(2**64 - 1), str(2**64 + 1), "9" * 30, "1" * 400, "1e400", "-1e400", "1e-400", str(-(2**63) - 1), "+1",
    "1e9999999", "1e8446744073709551615", "-1E+99999999", "0e99999999999", "1e-8446744073709551615",
]
# Whole headers that are one JSON value, no object: numbers whose exponents pass decimal's own
# limits (the differential fuzz's raw decimal.Overflow / InvalidOperation) among them.
_BARE_HEADERS = ["1e9999999", "1e8446744073709551615", " -1E+99999999 ", "0e99999999999", "1e400", "12", "-0",
                 "[1e9999999]", '"x"', "null", "true", "[]", "1e-8446744073709551615"]
_ESCAPED_NAMES = [
    "\\u0041", "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\ud800\\u0041", "\\\\ud800", "\\/", "\\n", "\\u0000",
    "\\x41", "\\U0041", "\\ud800\\ud800\\udc00", "\\u003a", "a\\\"b",
]
_ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 1.5, "", "x", [], {}, [1], {"a": "b"}, Raw("1e400"), Raw("-0"), Raw('"\\ud800"'),
    Raw("[" * 130 + "]" * 130), Raw("[" * 120 + "]" * 120), Obj([("k", 1), ("k", 2)]), Raw("1" * 320), Raw("NaN"),
]


def _odd(rng: random.Random) -> Any:
    """One of the odd values, as a fresh copy (a shared one could be mutated, even into itself)."""
    return copy.deepcopy(rng.choice(_ODD_VALUES))


def _entries(tree: Obj) -> list[tuple[int, str, Any]]:
    return [(i, k, v) for i, (k, v) in enumerate(tree.pairs) if k != "__metadata__"]


def _raw_entry(tree: Obj, rng: random.Random) -> tuple[int, str, Obj] | None:
    objs = [(i, k, v) for i, k, v in _entries(tree) if isinstance(v, Obj)]
    return rng.choice(objs) if objs else None


def _mutate_numbers(tree: Obj, rng: random.Random) -> None:
    """A shape dim or an offset written in another number form (or replaced by one)."""
    found = _raw_entry(tree, rng)
    if found is None:
        return
    _, _, entry = found
    key = rng.choice(["shape", "data_offsets"])
    values = entry.get(key)
    if not isinstance(values, list) or not values:
        values = [0] if key == "shape" else [0, 0]
    values = list(values)
    j = rng.randrange(len(values))
    v = values[j]
    if isinstance(v, int) and rng.random() < 0.5:  # the same value, spelled another way
        values[j] = Raw(rng.choice([f"{v}.0", f"{v}e0", f"{v}E+0", f"0{v}", f"-{v}" if v == 0 else f"{v}.5"]))
    else:
        values[j] = Raw(rng.choice(_NUMBER_FORMS))
    entry.set(key, values)


def _mutate_dtype(tree: Obj, rng: random.Random) -> None:
    found = _raw_entry(tree, rng)
    if found is None:
        return
    _, _, entry = found
    code = entry.get("dtype") if isinstance(entry.get("dtype"), str) else rng.choice(DTYPES)
    entry.set("dtype", rng.choice([
        code.lower(), code.capitalize(), "F128", "Float32", "", " " + code, code + " ", Raw(f'"{code}\\u0000"'),
        Obj([(code, None)]), Obj([(code, 1)]), Obj([(code, None), (code, None)]), Obj([(code, None), ("F16", None)]),
        Obj([("X", None)]), Obj(), [code], None, 32, True, rng.choice(DTYPES),
    ]))


def _mutate_duplicates(tree: Obj, rng: random.Random) -> None:
    entries = _entries(tree)
    which = rng.randrange(4)
    if which == 0 and entries:  # a tensor name twice
        _, name, value = rng.choice(entries)
        other = rng.choice(entries)[2]
        tree.pairs.insert(rng.randrange(len(tree.pairs) + 1), (name, rng.choice([value, other, _odd(rng)])))
    elif which == 1:  # a field twice
        found = _raw_entry(tree, rng)
        if found:
            entry = found[2]
            key = rng.choice(["dtype", "shape", "data_offsets"])
            entry.pairs.insert(rng.randrange(len(entry.pairs) + 1), (key, rng.choice([entry.get(key), _odd(rng)])))
    elif which == 2:  # __metadata__ twice
        tree.pairs.insert(rng.randrange(len(tree.pairs) + 1), ("__metadata__", rng.choice([None, Obj(), Obj([("k", "v")])])))
    else:  # a metadata key twice
        meta = tree.get("__metadata__")
        pairs = list(meta.pairs) if isinstance(meta, Obj) else []
        pairs += [("k", "v"), ("k", rng.choice(["w", 1, None]))]
        tree.set("__metadata__", Obj(pairs))


def _mutate_metadata(tree: Obj, rng: random.Random) -> None:
    value = rng.choice([
        None, Obj(), [], "s", 5, True, Obj([("k", _odd(rng))]), Obj([("k", Obj([("a", "b")]))]),
        Obj([("k", None)]), Obj([("format", "pt"), ("k", "")]), Raw('{"k":"\\ud800"}'), Raw('{"\\udc00":"v"}'),
    ])
    tree.set("__metadata__", value)


def _mutate_escapes(tree: Obj, rng: random.Random) -> None:
    """A name, metadata key or value written with escapes (valid, lone surrogates, invalid)."""
    escape = rng.choice(_ESCAPED_NAMES)
    entries = _entries(tree)
    if entries and rng.random() < 0.6:
        i, name, value = rng.choice(entries)
        tree.pairs[i] = (Raw(f'"{name}{escape}"'), value)  # type: ignore[arg-type]
    else:
        tree.set("__metadata__", Obj([(Raw(f'"k{escape}"') if rng.random() < 0.5 else "k", Raw(f'"v{escape}"'))]))  # type: ignore[list-item]


def _mutate_fields(tree: Obj, rng: random.Random) -> None:
    """An extra field (any value, deep, huge numbers) or a missing one; or the entry's form."""
    found = _raw_entry(tree, rng)
    if found is None:
        return
    i, name, entry = found
    which = rng.randrange(4)
    if which == 0:
        entry.pairs.insert(rng.randrange(len(entry.pairs) + 1), (rng.choice(["x", "", "__metadata__", "DTYPE"]), _odd(rng)))
    elif which == 1 and entry.pairs:
        del entry.pairs[rng.randrange(len(entry.pairs))]
    elif which == 2:  # the entry as an array of its fields (serde accepts exactly 3)
        fields = [entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")]
        tree.pairs[i] = (name, rng.choice([fields, fields, fields[:2], fields + [0], fields[::-1], [1.5] + fields[1:]]))
    else:
        tree.pairs[i] = (name, _odd(rng))


def _mutate_offsets(tree: Obj, rng: random.Random) -> None:
    found = _raw_entry(tree, rng)
    if found is None:
        return
    entry = found[2]
    offsets = entry.get("data_offsets")
    b, e = offsets if isinstance(offsets, list) and len(offsets) == 2 else (0, 0)
    if type(b) is not int or type(e) is not int:
        b, e = 0, 0
    entry.set("data_offsets", rng.choice([[b, e, e], [b], [], [b, e, 0], [e, b], [b + 1, e + 1], [b, e + 1], [b, e - 1],
                                          {"0": b, "1": e}, [b, Raw(f"{e}.0")], [b, str(e)], [b, [e]]]))


def _mutate_shape(tree: Obj, rng: random.Random) -> None:
    found = _raw_entry(tree, rng)
    if found is None:
        return
    entry = found[2]
    shape = entry.get("shape") if isinstance(entry.get("shape"), list) else [1]
    entry.set("shape", rng.choice([
        [1.5], [True], [False], [[2]], {}, "2", None, shape + [None], [Raw("2.0")], shape[::-1], shape + [1], shape + [0],
        [0, 2**64 - 1], [0, 2**64], [4, 0, 2**64], [2**63, 0], [2**32, 2**32], [2**63, 2], [1] * 65, [0] * 65 + [2**63],
    ]))


_TREE_MUTATIONS = [_mutate_numbers, _mutate_dtype, _mutate_duplicates, _mutate_metadata, _mutate_escapes,
                   _mutate_fields, _mutate_offsets, _mutate_shape]


def _text_and_prefix(header: bytes, data: bytes, rng: random.Random) -> bytes:
    """Mutations of the bytes: around the JSON, the data region and the length prefix."""
    declared = len(header)
    which = rng.randrange(7)
    if which == 0:  # BOM, whitespace, NUL before or after the JSON
        junk = rng.choice([b"\xef\xbb\xbf", b" ", b"\t\n\r ", b"\x00", b"\x0c", b"\x0b", b"\xc2\xa0"])
        header = junk + header if rng.random() < 0.5 else header + junk
        declared = len(header)
    elif which == 1:  # padding the way writers pad (spaces), or with NULs
        header = header + rng.choice([b" ", b"\x00"]) * rng.randint(1, 9)
        declared = len(header)
    elif which == 2:  # data one byte short or long
        data = data[:-1] if data and rng.random() < 0.5 else data + b"\x00"
    elif which == 3:  # a wrong length prefix
        declared = rng.choice([declared - 1, declared + 1, declared - 8, declared + 8, 0, 1, 100_000_001,
                               2**63, 2**64 - 1, declared + len(data), declared + len(data) + 1])
    elif which == 4:  # a NUL or a stray byte inside the JSON text
        at = rng.randrange(len(header) + 1)
        header = header[:at] + rng.choice([b"\x00", b"\xff", b" ", b","]) + header[at:]
        declared = len(header)
    # which 5, 6: unchanged
    return frame(header, data, declared)


def differential_input(rng: random.Random) -> bytes:
    """A valid file of random dtypes and shapes, then 0-3 structured mutations; one in 32 a
    header that is a single JSON value (a number, mostly)."""
    tree, data = valid_tree(rng, max_tensors=6)
    for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
        rng.choice(_TREE_MUTATIONS)(tree, rng)
    text = emit(tree)
    header = text.encode("utf-8", "surrogatepass")
    header += b" " * ((8 - (8 + len(header)) % 8) % 8)
    mutated = _text_and_prefix(header, data, rng) if rng.random() < 0.5 else frame(header, data)
    if rng.random() < 1 / 32:  # drawn last: the other inputs stay what their seeds gave before
        bare = rng.choice(_BARE_HEADERS).encode()
        return frame(bare + b" " * ((8 - (8 + len(bare)) % 8) % 8), b"")
    return mutated


def large_input(rng: random.Random) -> bytes:
    """A header of 512 KiB or more (``TYPED_FROM``: where parse_header takes msgspec's path),
    made large the ways real ones are (thousands of tensors, a large ``__metadata__``) or by
    padding, then 0-2 of the same mutations as ``differential_input``."""
    from pysafetensors.format.header import TYPED_FROM

    form = rng.randrange(3)
    if form == 0:  # thousands of tensors with long names, mostly in file order
        top = Obj([("__metadata__", Obj([("format", "pt")]))] if rng.random() < 0.6 else [])
        pos, i = 0, 0
        while len(top.pairs) * 100 < TYPED_FROM + 4096:  # each entry is over 100 bytes of JSON
            code = rng.choice(DTYPES)
            shape = shape_for(rng, DTYPE_BITS[code])
            size = math.prod(shape) * DTYPE_BITS[code] // 8
            name = f"model.layers.{i // 7}.self_attn.{('q', 'k', 'v', 'o', 'up', 'down', 'gate')[i % 7]}_proj.weight"
            top.pairs.append((name, Obj([("dtype", code), ("shape", shape), ("data_offsets", [pos, pos + size])])))
            pos, i = pos + size, i + 1
        if rng.random() < 0.2:
            rng.shuffle(top.pairs)
        data = rng.randbytes(pos)
    else:
        top, data = valid_tree(rng)
        if form == 1:  # a large __metadata__, first (as writers put it) or anywhere
            meta = rng.choice([Obj([("blob", "x" * (TYPED_FROM + 16))]),
                               Obj([(f"k{j}", "v" * 20) for j in range(TYPED_FROM // 28 + 1)])])
            top.pairs = [p for p in top.pairs if p[0] != "__metadata__"]
            top.pairs.insert(0 if rng.random() < 0.8 else rng.randrange(len(top.pairs) + 1), ("__metadata__", meta))
    for _ in range(rng.choice([0, 1, 1, 2])):
        rng.choice(_TREE_MUTATIONS)(top, rng)
    header = emit(top).encode("utf-8", "surrogatepass")
    if form == 2:  # padded with spaces (as writers align) up to the size
        header += b" " * (TYPED_FROM - len(header) + rng.randrange(64))
    header += b" " * ((8 - (8 + len(header)) % 8) % 8)
    return _text_and_prefix(header, data, rng) if rng.random() < 0.3 else frame(header, data)


# --- comparison ----------------------------------------------------------------------------

_POSITION = re.compile(r" at line \d+ column \d+$")


def _outcome(fn: Any) -> tuple[str, Any]:
    """("ok", value), ("safetensors", error) for either library's own error, or ("other", error)."""
    import safetensors

    from pysafetensors import SafetensorError

    try:
        return "ok", fn()
    except (SafetensorError, safetensors.SafetensorError) as e:
        return "safetensors", e
    except Exception as e:  # noqa: BLE001 - sorted by the caller
        return "other", e


def _deserialized(lib: Any, data: bytes) -> Any:
    return sorted((name, d["dtype"], tuple(d["shape"]), bytes(d["data"])) for name, d in lib.deserialize(data))


def _np_bytes(t: Any) -> tuple[str, tuple[int, ...], bytes]:
    return str(t.dtype), tuple(t.shape), t.tobytes()


_INT64_MAX = (1 << 63) - 1


def _pt_bytes(t: Any) -> tuple[str, tuple[int, ...], bytes] | _WrappedStrides:
    import torch

    if t.numel() == 0 and math.prod(max(d, 1) for d in t.shape[1:]) > _INT64_MAX:
        # An empty tensor whose contiguous strides do not fit int64: torch.empty refuses the
        # shape ("Stride calculation overflowed"); upstream builds it by a view, with the
        # strides wrapped around.  Not a tensor to compare with.
        return _WrappedStrides(tuple(t.stride()))
    raw = b"" if t.numel() == 0 else bytes(t.contiguous().reshape(-1).view(torch.uint8).numpy())
    return str(t.dtype), tuple(t.shape), raw


class _WrappedStrides(tuple):  # type: ignore[type-arg]
    """What upstream's torch face returned: an empty tensor with int64-wrapped strides."""


class _Verdict:
    def __init__(self) -> None:
        self.category = ""

    def note(self, category: str) -> None:
        if _RANK[category] > _RANK.get(self.category, -1):
            self.category = category


class _Stored(NamedTuple):
    """What a tensor is in the file: its dtype code, its shape, its bytes as both ``deserialize``
    give them (None when they do not both give them), and whether the framework's tensor holds
    one sub-byte value per byte (numpy through ml_dtypes) rather than the file's packing."""

    code: str
    shape: tuple[int, ...]
    data: bytes | None
    unpacked: bool


def _refuses_dtype(error: Any, code: str) -> bool:
    """Whether upstream's error is its refusal of a dtype its framework has no type for."""
    import safetensors

    return isinstance(error, safetensors.SafetensorError) and str(error) == f"Dtype not understood: {code}"


def _as_stored(what: str, value: Any, stored: _Stored) -> None:
    """Our tensor (``_np_bytes``/``_pt_bytes``) is the file's tensor: shape and bytes."""
    if stored.data is None:
        raise Disagreement(f"{what}: ours gives a tensor upstream does not, and deserialize does not give its bytes")
    if isinstance(value, _WrappedStrides):
        raise Disagreement(f"{what}: ours gives an empty tensor with wrapped strides {value}")
    _, shape, raw = value
    bits = DTYPE_BITS[stored.code]
    if stored.unpacked:
        if shape != stored.shape:
            raise Disagreement(f"{what}: ours gives shape {shape}, the header says {stored.shape}")
        if bits < 8:
            import numpy as np

            codes = np.frombuffer(raw, np.uint8)
            if (codes >> bits).any():
                raise Disagreement(f"{what}: ours gives {stored.code} values with bits above the low {bits} set")
            # The file packs the values as one bit stream, each value's least significant bit first.
            stream = np.unpackbits(codes[:, None], axis=1, bitorder="little")[:, :bits]
            raw = np.packbits(stream.reshape(-1), bitorder="little").tobytes()
    if raw != stored.data:
        raise Disagreement(f"{what}: ours gives bytes {raw[:64]!r}, the file holds {stored.data[:64]!r}")


def _tensor_stage(verdict: _Verdict, up: tuple[str, Any], ours: tuple[str, Any], what: str, stored: _Stored) -> None:
    """One get_tensor on both sides (same framework): equal, or a difference that is allowed."""
    if ours[0] == "other":
        raise Disagreement(f"{what}: ours raised {type(ours[1]).__name__}: {ours[1]}")
    if up[0] == "ok" and ours[0] == "ok":
        if up[1] != ours[1]:
            raise Disagreement(f"{what}: upstream {up[1]!r:.300} != ours {ours[1]!r:.300}")
    elif up[0] == "ok" and isinstance(up[1], _WrappedStrides) and ours[0] == "safetensors":
        verdict.note("expected_better")  # ours refuses the shape cleanly (UnsupportedShape)
    elif up[0] == "ok":
        raise Disagreement(f"{what}: upstream gives the tensor, ours raised {ours[1]}")
    elif up[0] == "other":
        if ours[0] == "ok":
            _as_stored(what, ours[1], stored)
        verdict.note("expected_better")
    elif ours[0] == "ok":
        if not _refuses_dtype(up[1], stored.code):
            raise Disagreement(f"{what}: upstream raised {type(up[1]).__name__}: {up[1]}, ours gives the tensor")
        _as_stored(what, ours[1], stored)
        verdict.note("ours_extends")


def compare(data: bytes, tmpdir: str | None = None) -> str:
    """The category of ``data`` (see the module docstring); raises Disagreement otherwise."""
    import safetensors

    import pysafetensors

    verdict = _Verdict()
    fd, path = tempfile.mkstemp(suffix=".safetensors", dir=tmpdir)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        up_handle = _outcome(lambda: safetensors.safe_open(path, framework="np"))
        our_handle = _outcome(lambda: pysafetensors.safe_open(path, framework="np"))
        _same_verdict(verdict, "safe_open", up_handle, our_handle)
        up_bytes = _outcome(lambda: _deserialized(safetensors, data))
        our_bytes = _outcome(lambda: _deserialized(pysafetensors, data))
        _same_verdict(verdict, "deserialize", up_bytes, our_bytes)
        if our_handle[0] != "ok":
            verdict.note("both_reject")
            if up_handle[0] == "safetensors" and _same_reason(up_handle[1], our_handle[1]):
                COUNTS["same_reason"] += 1
        else:
            verdict.note("both_accept")
            stored: dict[str, bytes] = {}
            if our_bytes[0] == "ok" and up_bytes[0] == "ok":
                if up_bytes[1] != our_bytes[1]:
                    raise Disagreement(f"deserialize differs: upstream {up_bytes[1]!r:.300}, ours {our_bytes[1]!r:.300}")
                stored = {name: data for name, _, _, data in our_bytes[1]}
            with up_handle[1] as up, our_handle[1] as ours:
                _compare_open(verdict, path, up, ours, stored, random.Random(zlib.crc32(data)))
    finally:
        os.unlink(path)
    COUNTS[verdict.category] += 1
    return verdict.category


def _compare_open(verdict: _Verdict, path: str, up: Any, ours: Any, stored: dict[str, bytes],
                  rng: random.Random) -> None:
    """Both handles of an accepted file; ``stored``: each tensor's bytes as both deserialize give
    them; ``rng`` draws the writes and slices of the further stages (differential_stages)."""
    import safetensors

    import pysafetensors
    import pysafetensors.format

    if up.keys() != ours.keys():
        raise Disagreement(f"keys: upstream {up.keys()!r:.300}, ours {ours.keys()!r:.300}")
    # File order; tensors sharing offsets (zero-size ones) come in a random order upstream.
    spans = {t.name: (t.begin, t.end) for t in pysafetensors.format.parse_header(
        *_header_and_size(path)).tensors}
    if [spans[k] for k in up.offset_keys()] != [spans[k] for k in ours.offset_keys()] or \
            sorted(up.offset_keys()) != sorted(ours.offset_keys()):
        raise Disagreement(f"offset_keys: upstream {up.offset_keys()!r:.300}, ours {ours.offset_keys()!r:.300}")
    if up.metadata() != ours.metadata():
        raise Disagreement(f"metadata: upstream {up.metadata()!r}, ours {ours.metadata()!r}")
    codes: dict[str, tuple[str, tuple[int, ...]]] = {}
    for name in up.keys():  # noqa: SIM118 - handles, not dicts
        a, b = up.get_slice(name), ours.get_slice(name)
        if (a.get_dtype(), a.get_shape()) != (b.get_dtype(), b.get_shape()):
            raise Disagreement(f"{name!r}: upstream {a.get_dtype()} {a.get_shape()}, ours {b.get_dtype()} {b.get_shape()}")
        codes[name] = (a.get_dtype(), tuple(a.get_shape()))
        _tensor_stage(verdict, _outcome(lambda name=name: _np_bytes(up.get_tensor(name))),
                      _outcome(lambda name=name: _np_bytes(ours.get_tensor(name))), f"{name!r} numpy get_tensor",
                      _Stored(*codes[name], stored.get(name), unpacked=True))
    compare_writes(up, ours, rng, Disagreement)
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    with safetensors.safe_open(path, framework="pt") as up_pt, pysafetensors.safe_open(path, framework="pt") as our_pt:
        for name in up_pt.keys():  # noqa: SIM118
            _tensor_stage(verdict, _outcome(lambda name=name: _pt_bytes(up_pt.get_tensor(name))),
                          _outcome(lambda name=name: _pt_bytes(our_pt.get_tensor(name))), f"{name!r} torch get_tensor",
                          _Stored(*codes[name], stored.get(name), unpacked=False))
        compare_torch_slices(up_pt, our_pt, codes, rng, Disagreement)


def _same_verdict(verdict: _Verdict, what: str, up: tuple[str, Any], ours: tuple[str, Any]) -> None:
    if ours[0] == "other":
        raise Disagreement(f"{what}: ours raised {type(ours[1]).__name__}: {ours[1]}")
    if up[0] == ours[0]:
        return
    if up[0] == "other" and ours[0] == "safetensors":
        verdict.note("expected_better")
        return
    raise Disagreement(f"{what}: upstream {_said(up)}, ours {_said(ours)}")


def _header_and_size(path: str) -> tuple[bytes, int]:
    with open(path, "rb") as f:
        data = f.read()
    return data[8 : 8 + int.from_bytes(data[:8], "little")], len(data)


def _said(outcome: tuple[str, Any]) -> str:
    return "accepts" if outcome[0] == "ok" else f"raises {type(outcome[1]).__name__}: {outcome[1]}"


def _same_reason(up_error: Any, our_error: Any) -> bool:
    """Whether our reason is upstream's, word for word (without serde's position)."""
    prefix = "Error while deserializing header: "
    up_text = _POSITION.sub("", str(up_error).removeprefix(prefix))
    return getattr(our_error, "reason", None) == up_text


def placed(counts: Counter[str] | dict[str, int]) -> int:
    """How many inputs the counts place: in a category, or as disagreements."""
    return sum(counts.get(c, 0) for c in CATEGORIES) + counts.get("disagreements", 0)


def summary(counts: Counter[str] | dict[str, int]) -> str:
    """One line: inputs, each category, and how many rejections have upstream's exact words."""
    inputs = placed(counts)
    parts = [f"inputs {inputs}"] + [f"{c.replace('_', '-')} {counts.get(c, 0)}" for c in CATEGORIES]
    parts.append(f"disagreements {counts.get('disagreements', 0)}")
    return ", ".join(parts) + f" (rejections worded exactly as upstream: {counts.get('same_reason', 0)})"
