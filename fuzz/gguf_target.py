"""The GGUF fuzz target: random GGUF files, valid and broken, through everything that reads one.

Inputs come from the seeded RNG (the runner's safetensors bytes are only spliced in as noise),
so ``--seed S --count 1`` replays one exactly.  A file is built here, independently of the
code under test, from the format's description (version 1 with u32 counts and lengths, 2 and 3
with u64; every metadata value type, nested arrays; plain and block-quantized tensors with
random alignment), then usually mutated: bits flipped, counts and lengths overwritten with
boundary values (2**63, 2**64 - 1, 2**32...), bytes cut, inserted or duplicated.

The header parser, the layout checks, ``validate_gguf``, the ID, the reader (every tensor
decoded, gguf-py dequantizing), random slices of the streamed values and the tools' summary
and stats may only raise a ``SafetensorError``.  Oracles: an unmutated file reads back exactly
as built (fields, tensor bytes, values; gguf-py's own reader agrees on a quarter of them); an
accepted layout is inside the file, aligned and free of overlaps; validate's verdict is the
reader's; a slice of the streamed values is that slice of the whole tensor.
"""

from __future__ import annotations

import math
import os
import random
import struct
import tempfile
from itertools import pairwise
from typing import Any

import numpy as np

from pysafetensors.errors import GGUFError, SafetensorError
from pysafetensors.gguf import GGUFFile, check_layout, parse_gguf_bytes
from pysafetensors.gguf.check import validate_gguf
from pysafetensors.gguf.identity import gguf_identity
from pysafetensors.io.sources import MemorySource
from pysafetensors.tools.checkpoint import GGUFCheckpoint
from pysafetensors.tools.stats import file_stats
from pysafetensors.tools.summary import summarize

from .targets import FuzzBug

# (type id, block elements, block bytes) from llama.cpp's ggml.h, kept here so the generator
# does not trust the table under test.
TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "Q4_K": (12, 256, 144),
         "Q6_K": (14, 256, 210), "I8": (24, 1, 1), "I16": (25, 1, 2), "I32": (26, 1, 4), "I64": (27, 1, 8),
         "F64": (28, 1, 8), "BF16": (30, 1, 2)}
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
BOUNDARY = [0, 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


class _Writer:
    def __init__(self, version: int) -> None:
        self.version = version
        self.out = bytearray()

    def count(self, n: int) -> None:
        self.out += struct.pack("<Q" if self.version >= 2 else "<I", n)

    def string(self, text: str) -> None:
        raw = text.encode("utf-8", "surrogatepass")
        self.count(len(raw))
        self.out += raw

    def value(self, vtype: int, value: Any) -> None:
        if vtype == 8:
            self.string(value)
        elif vtype == 9:
            item_type, items = value
            self.out += struct.pack("<I", item_type)
            self.count(len(items))
            for item in items:
                self.value(item_type, item)
        else:
            self.out += struct.pack(SCALARS[vtype], value)


def _random_scalar(rng: random.Random, vtype: int) -> Any:
    fmt = SCALARS[vtype]
    if vtype == 7:
        return rng.random() < 0.5
    if vtype in (6, 12):
        value = rng.choice([0.0, -0.0, 1.5, -1e30, rng.uniform(-1e6, 1e6), float("inf"), float("nan")])
        return struct.unpack(fmt, struct.pack(fmt, value))[0]  # as stored (float32 rounding)
    bits = struct.calcsize(fmt) * 8
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if fmt[1].islower() else (0, 2**bits - 1)
    return rng.choice([lo, hi, 0, rng.randint(lo, hi)])


def _random_text(rng: random.Random) -> str:
    alphabet = "abc.xyz_ \"\\\n\t\x01\x7fé中\u202e😀"
    return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))


def _random_value(rng: random.Random, depth: int = 0) -> tuple[int, Any]:
    vtype = rng.choice([*SCALARS, 8, 8, 9] if depth < 2 else [*SCALARS, 8])
    if vtype == 8:
        return 8, _random_text(rng)
    if vtype == 9:
        item_type, _ = _random_value(rng, depth + 1)
        items = [_random_value_of(rng, item_type, depth + 1) for _ in range(rng.randrange(0, 5))]
        return 9, (item_type, items)
    return vtype, _random_scalar(rng, vtype)


def _random_value_of(rng: random.Random, vtype: int, depth: int) -> Any:
    if vtype == 8:
        return _random_text(rng)
    if vtype == 9:
        item_type = rng.choice([*SCALARS, 8])
        return item_type, [_random_value_of(rng, item_type, depth + 1) for _ in range(rng.randrange(0, 3))]
    return _random_scalar(rng, vtype)


def build(rng: random.Random) -> tuple[bytes, dict[str, Any]]:
    """A valid GGUF file and what it holds: ``{"fields": {key: (type, value)}, "tensors": {name:
    (type, dims, stored bytes)}, "alignment": n}``."""
    version = rng.choice([1, 2, 3, 3, 3])
    w = _Writer(version)
    fields: dict[str, tuple[int, Any]] = {}
    alignment = 32
    if rng.random() < 0.3:
        alignment = rng.choice([1, 8, 16, 64, 256])
        fields["general.alignment"] = (4, alignment)
    for i in range(rng.randrange(0, 6)):
        fields[f"k{i}.{_random_text(rng)}"] = _random_value(rng)
    tensors: dict[str, tuple[str, list[int], bytes]] = {}
    for i in range(rng.randrange(0, 5)):
        tname = rng.choice(list(TYPES))
        _, block, size = TYPES[tname]
        dims = [block * rng.randrange(0, 3 if block > 1 else 9)] + [rng.randrange(0, 4) for _ in range(rng.randrange(0, 3))]
        n = int(np.prod(dims))
        nbytes = n // block * size
        tensors[f"t{i}.{rng.choice(['weight', 'bias', '', 'é'])}"] = (tname, dims, rng.randbytes(nbytes))
    w.out += b"GGUF" + struct.pack("<I", version)
    w.count(len(tensors))
    w.count(len(fields))
    for key, (vtype, value) in fields.items():
        w.string(key)
        w.out += struct.pack("<I", vtype)
        w.value(vtype, value)
    offset = 0
    placed = []
    for name, (tname, dims, raw) in tensors.items():
        w.string(name)
        w.out += struct.pack("<I", len(dims))
        for d in dims:
            w.count(d) if version >= 2 else w.out.extend(struct.pack("<I", d))
        w.out += struct.pack("<IQ", TYPES[tname][0], offset)
        placed.append((offset, raw))
        offset += len(raw) + (-len(raw) % alignment)
    w.out += bytes(-len(w.out) % alignment)
    start = len(w.out)
    data = bytearray(offset)
    for at, raw in placed:
        data[at : at + len(raw)] = raw
    out = bytes(w.out) + bytes(data)
    assert len(out) == start + offset
    return out, {"fields": fields, "tensors": tensors, "alignment": alignment}


def mutate(blob: bytes, rng: random.Random, noise: bytes) -> bytes:
    b = bytearray(blob)
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(7)
        at = rng.randrange(0, len(b) + 1)
        if kind == 0 and b:
            b[min(at, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1 and len(b) >= at + 8:
            b[at : at + 8] = struct.pack("<Q", rng.choice(BOUNDARY + [len(b), len(b) + 1]))
        elif kind == 2 and len(b) >= at + 4:
            b[at : at + 4] = struct.pack("<I", rng.choice([0, 1, 9, 13, 31, 99, 2**31, 2**32 - 1]))
        elif kind == 3:
            del b[at:]
        elif kind == 4:
            b[at:at] = noise[: rng.randrange(0, 16)] or b"\xff"
        elif kind == 5:
            del b[at : at + rng.randrange(1, 9)]
        else:
            piece = bytes(b[at : at + rng.randrange(1, 64)])
            b[at:at] = piece
    return bytes(b)


def _check_values(f: GGUFFile, rng: random.Random, strict: bool) -> None:
    for name in f.names():
        info = f.info(name)
        try:
            whole = f.array(name)
        except SafetensorError as e:
            if strict:
                raise FuzzBug(f"{name!r} of an unbroken file cannot be read: {e}") from None
            continue
        if tuple(whole.shape) != info.shape:
            raise FuzzBug(f"{name!r}: array shape {whole.shape} != {info.shape}")
        flat = np.ascontiguousarray(whole).reshape(-1).view(np.uint8)
        data = f.decoded(name)
        if len(data) != flat.size:
            raise FuzzBug(f"{name!r}: decoded length {len(data)} != {flat.size}")
        for _ in range(3):
            lo = rng.randrange(0, flat.size + 1)
            hi = rng.randrange(lo, flat.size + 1)
            if bytes(data[lo:hi]) != flat[lo:hi].tobytes():
                raise FuzzBug(f"{name!r}: decoded bytes [{lo}:{hi}] differ from the whole tensor's")


def _check_expected(f: GGUFFile, blob: bytes, expected: dict[str, Any], rng: random.Random) -> None:
    header = f.header
    for key, (vtype, value) in expected["fields"].items():
        got = header.fields[key]
        if int(got.type) != vtype or _plain(got.value) != _plain_expected(vtype, value):
            raise FuzzBug(f"field {key!r}: read {got.type} {got.value!r}, wrote {vtype} {value!r}")
    if list(header.fields) != list(expected["fields"]):
        raise FuzzBug("the fields read are not the fields written")
    for name, (tname, dims, raw) in expected["tensors"].items():
        t = f.info(name)
        if (t.ggml_type and t.ggml_type.name, list(t.dims)) != (tname, dims) or f.raw_bytes(name).tobytes() != raw:
            raise FuzzBug(f"tensor {name!r} does not read back as written")
    if rng.random() < 0.25 and header.version >= 2:  # gguf-py reads versions 2 and 3 only
        _against_gguf_py(blob, f)


def _plain(value: Any) -> Any:
    items = getattr(value, "items", None)
    if items is not None and not callable(items):
        return [int(value.item_type), [_plain(v) for v in items]]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def _plain_expected(vtype: int, value: Any) -> Any:
    if vtype == 9:
        item_type, items = value
        return [item_type, [_plain_expected(item_type, v) for v in items]]
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def _against_gguf_py(blob: bytes, f: GGUFFile) -> None:
    try:
        import gguf
    except ImportError:
        return
    fd, path = tempfile.mkstemp(suffix=".gguf", prefix="fuzz-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        ref = gguf.GGUFReader(path)
        if ref.data_offset != f.header.data_offset:
            raise FuzzBug(f"gguf-py puts the data at {ref.data_offset}, we at {f.header.data_offset}")
        for t in ref.tensors:
            ours = f.info(t.name)
            if f.header.data_offset + ours.offset != t.data_offset or ours.nbytes != t.n_bytes:
                raise FuzzBug(f"tensor {t.name!r}: gguf-py reads another place or size")
        del ref
    finally:
        os.unlink(path)


def target_gguf(data: bytes, rng: random.Random) -> None:
    blob, expected = build(rng)
    mutated = rng.random() < 0.75
    if mutated:
        blob = mutate(blob, rng, data)
    verdict = validate_gguf(lambda off, n: blob[off : off + n], len(blob))
    try:
        header = parse_gguf_bytes(blob)
    except GGUFError:
        if verdict.header is not None:
            raise FuzzBug("validate parsed a header the parser refuses") from None
        raise
    problems = list(check_layout(header))
    if [p.code for p in verdict.problems] != [p.code for p in problems]:
        raise FuzzBug(f"validate lists {verdict.problems}, check_layout {problems}")
    gguf_identity(header)
    known_problems = [p for p in problems if p.code != "unknown_type"]
    try:
        f = GGUFFile(MemorySource(blob), unknown_types=True)
    except GGUFError:
        if not known_problems:
            raise FuzzBug("opening refused a file whose layout has no problem") from None
        raise
    if known_problems:
        raise FuzzBug(f"opening accepted a file with layout problems: {known_problems}")
    data_size = len(blob) - header.data_offset
    spans = []
    for t in header.tensors:
        if t.nbytes is None:
            continue
        if t.offset % header.alignment or t.offset + t.nbytes > data_size:
            raise FuzzBug(f"accepted tensor {t.name!r} misaligned or past the end")
        if t.nbytes:
            spans.append((t.offset, t.offset + t.nbytes))
    spans.sort()
    if any(b < e for (_, e), (b, _) in pairwise(spans)):
        raise FuzzBug("accepted overlapping tensors")
    if not mutated and not verdict.valid:
        raise FuzzBug(f"validate finds problems in an unbroken file: {verdict.problems}")
    with np.errstate(all="ignore"):
        if not mutated:
            _check_expected(f, blob, expected, rng)
        _check_values(f, rng, strict=not mutated)
        ckpt = GGUFCheckpoint("<fuzz>", f, "fuzz.gguf")
        summarize(ckpt, tree=True)
        try:
            file_stats(ckpt)
        except SafetensorError as e:
            if not mutated:
                raise FuzzBug(f"stats of an unbroken file failed: {e}") from None
            raise
