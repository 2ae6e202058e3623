"""Identity of a checkpoint: weight-inspect's structural ID, the content hash, per-tensor hashes.

Each hash is named for what it hashes (the ``Identity`` fields, the ``--json`` keys and the
text labels): ``structure_sha256`` covers names, dtypes, shapes, byte lengths and metadata,
never a tensor value (two checkpoints with different weights share it); ``content_sha256``
covers the tensor data (not the header, so it is not the file's ``sha256sum``); each tensor's
``content_sha256`` its own bytes.

The canonical form hashed (sha256, lowercase hex) is the compact JSON (no spaces, non-ASCII
written raw, UTF-8) of::

    {"format":"safetensors",
     "metadata":{<key, sorted>: "\\"<value>\\"", ...},
     "tensors":{<name, sorted>: {"name":<name>,"dtype":<lowercase code>,"shape":[...],"byte_length":<end-begin>}}}

Each metadata value is first encoded as a JSON string (quotes, backslash, newline, CR, tab and
control characters escaped), and that quoted text is the value stored, so it is escaped
twice in the hashed bytes.  No metadata gives ``"metadata":{}``.  Offsets are not part of the
ID: the same tensors written in another order have the same ID.  The short form is
``wi:safetensors:0:<first 8 hex>``.  The metadata hashed is the checkpoint's (for a sharded
checkpoint, the index's: :mod:`pysafetensors.tools.checkpoint`).

The content hash (ModelSpec's ``hash_sha256``) covers every byte after the header; for a
sharded checkpoint, the shards' data regions in shard order.  Content and per-tensor hashes
come from ONE pass over the data regions (tensors tile a data region with no holes), so a
remote checkpoint crosses the network once, in large requests, whichever hashes are asked for.

A GGUF file's ID is weight-inspect's ``wi:gguf:<version>:<8 hex>``
(:mod:`pysafetensors.gguf.identity` gives its canonical form), from the header alone; its
content hash covers every byte from the aligned start of the tensor data to the end of the
file, and its per-tensor hashes each tensor's stored bytes, in the same single pass.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..errors import GGUFUnsupported
from ..format.header import TensorInfo
from ..gguf.identity import gguf_identity, identity_document
from ..io.protocols import ViewSource, capabilities
from ..reader import alloc
from ._base import JsonResult, Progress, no_progress
from .checkpoint import AnyCheckpoint, Checkpoint, GGUFCheckpoint, open_checkpoint

PREFIX = "wi:safetensors:0:"
HASH_CHUNK = 16 << 20


@dataclass
class TensorHash(JsonResult):
    name: str
    content_sha256: str  # 0x + sha256 of the tensor's bytes as stored (little-endian, packed)


@dataclass
class Identity(JsonResult):
    path: str
    id: str  # the short form of the structural ID
    structure_sha256: str  # the full structural hash: names, dtypes, shapes, byte lengths, metadata; no value
    canonical: str | None = None  # the hashed JSON, when asked for
    content_sha256: str | None = None  # 0x + sha256 of the tensor data (every byte after the header), when asked for
    tensors: list[TensorHash] | None = None  # sorted by name, when asked for


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


def _specs(ckpt: Checkpoint) -> list[tuple[str, str, tuple[int, ...], int]]:
    return [(t.name, t.dtype.code, t.shape, t.nbytes) for t in ckpt.tensors]


def _feed(owned: Sequence[TensorInfo], k: int, off: int, chunk: memoryview, hashers: dict[str, Any]) -> int:
    """Hash the parts of ``owned`` (sorted by begin, not overlapping) that ``chunk`` (at ``off``)
    covers; returns the first one that may overlap the next chunk."""
    n = len(chunk)
    while k < len(owned) and owned[k].end <= off:
        k += 1
    j = k
    while j < len(owned) and owned[j].begin < off + n:
        t = owned[j]
        hashers[t.name].update(chunk[max(t.begin, off) - off : min(t.end, off + n) - off])
        j += 1
    return k


def _hash_region(length: int, view: Callable[[int, int], memoryview] | None, read: Callable[[int, memoryview], Any],
                 owned: Sequence[TensorInfo], whole: Any, hashers: dict[str, Any], bar: Any) -> None:
    """Hash one data region of ``length`` bytes, HASH_CHUNK at a time: all of it into ``whole``
    (unless None), each tensor of ``owned`` (sorted by begin) into its ``hashers`` entry.

    ``view(off, n)`` gives the region's bytes without a copy where the source maps the file;
    otherwise ``read(off, chunk)`` fills one reused buffer."""
    buf: memoryview | None = None
    k = 0  # the first owned tensor that may overlap the current chunk
    for off in range(0, length, HASH_CHUNK):
        n = min(HASH_CHUNK, length - off)
        if view is not None:
            chunk = view(off, n)
        else:
            if buf is None:
                buf = alloc(min(HASH_CHUNK, length))
            chunk = buf[:n]
            read(off, chunk)
        if whole is not None:
            whole.update(chunk)
        k = _feed(owned, k, off, chunk, hashers)
        bar.update(n)


def _digests(whole: Any, hashers: dict[str, Any], per_tensor: bool) -> tuple[str | None, list[TensorHash] | None]:
    digest = "0x" + whole.hexdigest() if whole is not None else None
    tensors = [TensorHash(name, "0x" + hashers[name].hexdigest()) for name in sorted(hashers)] if per_tensor else None
    return digest, tensors


def _view_at(source: Any, start: int) -> Callable[[int, int], memoryview] | None:
    """``view(off, n)`` over ``source`` from ``start`` when it maps the file, else None."""
    if not capabilities(source).view:
        return None
    views = cast(ViewSource, source)
    return lambda off, n: views.view(start + off, n)


def _hash_pass(ckpt: Checkpoint, content: bool, per_tensor: bool, bar: Any) -> tuple[str | None, list[TensorHash] | None]:
    whole = hashlib.sha256() if content else None
    hashers: dict[str, Any] = {}
    for i, (f, start, length) in enumerate(ckpt.data_regions()):
        owned = ckpt.file.part_tensors(i) if per_tensor else []  # in file order: by begin offset
        for t in owned:
            hashers[t.name] = hashlib.sha256()
        # read_data: a failure names the tensor it hit
        _hash_region(length, _view_at(f.source, start), f.read_data, owned, whole, hashers, bar)
    return _digests(whole, hashers, per_tensor)


def _gguf_hash_pass(ckpt: GGUFCheckpoint, content: bool, per_tensor: bool, bar: Any
                    ) -> tuple[str | None, list[TensorHash] | None]:
    whole = hashlib.sha256() if content else None
    owned = sorted(ckpt.tensors, key=lambda t: t.begin) if per_tensor else []
    unknown = [t.name for t in owned if t.type.startswith("unknown")]
    if unknown:
        raise GGUFUnsupported(f"tensor {unknown[0]!r} has an unknown GGML type: its bytes cannot be told apart "
                              "to hash them", tensor=unknown[0])
    hashers: dict[str, Any] = {t.name: hashlib.sha256() for t in owned}
    start = ckpt.header.data_offset
    source = ckpt.file.source
    _hash_region(max(ckpt.file_size - start, 0), _view_at(source, start),
                 lambda off, chunk: source.read_into(start + off, chunk), owned, whole, hashers, bar)
    return _digests(whole, hashers, per_tensor)


def identify(
    ckpt: AnyCheckpoint | str,
    content: bool = False,
    per_tensor: bool = False,
    canonical: bool = False,
    progress: Progress = no_progress,
) -> Identity:
    """The structural ID, and with ``content``/``per_tensor`` the hashes from one pass over the data."""
    if isinstance(ckpt, (str, os.PathLike)):
        # a GGUF's header is all the structural ID needs; hashing its data needs a sound layout
        with open_checkpoint(ckpt, gguf=True, gguf_layout=content or per_tensor) as opened:
            return identify(opened, content, per_tensor, canonical, progress)
    if ckpt.format == "gguf":
        return _identify_gguf(ckpt, content, per_tensor, canonical, progress)
    specs = _specs(ckpt)
    digest = structural_id(ckpt.metadata, specs)
    result = Identity(ckpt.path, PREFIX + digest[:8], digest)
    if canonical:
        result.canonical = canonical_form(ckpt.metadata, specs)
    if content or per_tensor:
        total = sum(length for _, _, length in ckpt.data_regions())
        with progress(total, "hashing") as bar:
            result.content_sha256, result.tensors = _hash_pass(ckpt, content, per_tensor, bar)
    return result


def _identify_gguf(ckpt: GGUFCheckpoint, content: bool, per_tensor: bool, canonical: bool,
                   progress: Progress) -> Identity:
    ident = gguf_identity(ckpt.header)
    result = Identity(ckpt.path, ident.short, ident.sha256)
    if canonical:
        result.canonical = identity_document(ckpt.header).decode("utf-8")
    if content or per_tensor:
        with progress(max(ckpt.file_size - ckpt.header.data_offset, 0), "hashing") as bar:
            result.content_sha256, result.tensors = _gguf_hash_pass(ckpt, content, per_tensor, bar)
    return result
