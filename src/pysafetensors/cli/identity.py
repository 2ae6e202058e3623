"""``pysafetensors id FILE``: weight-inspect's structural ID, optionally content and per-tensor hashes.

The canonical form hashed (sha256, lowercase hex) is the compact JSON (no spaces, non-ASCII
written raw, UTF-8) of::

    {"format":"safetensors",
     "metadata":{<key, sorted>: "\\"<value>\\"", ...},
     "tensors":{<name, sorted>: {"name":<name>,"dtype":<lowercase code>,"shape":[...],"byte_length":<end-begin>}}}

Each metadata value is first encoded as a JSON string (quotes, backslash, newline, CR, tab and
control characters escaped), and that quoted text is the value stored, so it is escaped
twice in the hashed bytes.  No metadata gives ``"metadata":{}``.  Offsets are not part of the
ID: the same tensors written in another order have the same ID.  The short form is
``wi:safetensors:0:<first 8 hex>``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._common import bar_enabled, emit, progress, render_json
from ._inputs import open_input

PREFIX = "wi:safetensors:0:"
_HASH_CHUNK = 16 << 20


@dataclass
class TensorHash:
    name: str
    sha256: str  # 0x + sha256 of the tensor's bytes as stored (little-endian, packed)


@dataclass
class IdResult:
    path: str
    id: str  # the short form
    sha256: str  # the full structural hash
    canonical: str | None = None  # the hashed JSON, with --canonical
    content_sha256: str | None = None  # 0x..., with --content
    tensors: list[TensorHash] | None = None


def canonical_form(metadata: Mapping[str, str] | None, tensors: Sequence[tuple[str, str, Sequence[int], int]]) -> str:
    """The exact text hashed: see the module docstring.  ``tensors`` are (name, code, shape, byte_length)."""
    meta = {k: json.dumps(v, ensure_ascii=False) for k, v in sorted((metadata or {}).items())}
    entries = {
        name: {"name": name, "dtype": code.lower(), "shape": [int(d) for d in shape], "byte_length": int(nbytes)}
        for name, code, shape, nbytes in sorted(tensors, key=lambda t: t[0])
    }
    obj = {"format": "safetensors", "metadata": meta, "tensors": entries}
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def structural_id(metadata: Mapping[str, str] | None, tensors: Sequence[tuple[str, str, Sequence[int], int]]) -> str:
    """Full lowercase sha256 hex of the canonical form."""
    return hashlib.sha256(canonical_form(metadata, tensors).encode("utf-8")).hexdigest()


def compute_id(
    path: str, content: bool = False, per_tensor: bool = False, canonical: bool = False, show_progress: bool = False
) -> IdResult:
    with open_input(path) as inp:
        specs = [(t.name, t.dtype.code, t.shape, t.nbytes) for t in inp.tensors]
        digest = structural_id(inp.metadata, specs)
        result = IdResult(path, PREFIX + digest[:8], digest)
        if canonical:
            result.canonical = canonical_form(inp.metadata, specs)
        total = sum(t.nbytes for t in inp.tensors) * (int(content) + int(per_tensor))
        with progress(total, "hashing", show_progress) as bar:
            if content:
                # The data region: every byte after the header (ModelSpec's hash_sha256).  For a
                # sharded input, the shards' data regions in shard order.
                h = hashlib.sha256()
                for f, start, length in inp.data_regions():
                    for off in range(0, length, _HASH_CHUNK):
                        n = min(_HASH_CHUNK, length - off)
                        h.update(f.source.view(start + off, n) if hasattr(f.source, "view") else _read(f, start + off, n))
                        bar.update(n)
                result.content_sha256 = "0x" + h.hexdigest()
            if per_tensor:
                hashes = []
                for t in sorted(inp.tensors, key=lambda t: t.name):
                    data = inp.data(t.name)
                    th = hashlib.sha256()
                    for off in range(0, len(data), _HASH_CHUNK):
                        th.update(data[off : off + _HASH_CHUNK])
                    bar.update(len(data))
                    hashes.append(TensorHash(t.name, "0x" + th.hexdigest()))
                result.tensors = hashes
        return result


def _read(f: Any, offset: int, n: int) -> bytes:
    buf = bytearray(n)
    f.source.read_into(offset, memoryview(buf))
    return bytes(buf)


def render_id(result: IdResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(result)
    out = [result.id, f"sha256: {result.sha256}"]
    if result.content_sha256:
        out.append(f"content sha256: {result.content_sha256}")
    if result.canonical is not None:
        out.append(f"canonical: {result.canonical}")
    if result.tensors is not None:
        width = max((len(t.name) for t in result.tensors), default=0)
        out.extend(f"{t.name.ljust(width)}  {t.sha256}" for t in result.tensors)
    return "\n".join(out) + "\n"


def add_parser(subparsers: Any) -> None:
    from .main import common_options

    p = subparsers.add_parser("id", parents=[common_options()], help="structural ID (weight-inspect) and content hashes")
    p.add_argument("file")
    p.add_argument("--content", action="store_true", help="also hash the data region (ModelSpec hash_sha256, 0x...)")
    p.add_argument("--tensors", action="store_true", help="also hash each tensor's bytes")
    p.add_argument("--canonical", action="store_true", help="also print the canonical JSON that is hashed")


def run(args: argparse.Namespace) -> int:
    result = compute_id(args.file, args.content, args.tensors, args.canonical, bar_enabled(args))
    emit(render_id(result, "json" if args.json else "text"))
    return 0
