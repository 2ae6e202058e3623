"""Sharded checkpoints, Hugging Face layout: the index JSON, shard names, shard planning.

PURE: stdlib only.  ``model.safetensors.index.json`` is
``{"metadata": {"total_size": <tensor bytes>, ...}, "weight_map": {tensor: shard file}}``,
written with sorted keys, indent 2 and a trailing newline, as transformers writes it.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidIndex

SUFFIX = ".safetensors"
INDEX_SUFFIX = ".index.json"
DEFAULT_MAX_SHARD_SIZE = "5GB"

# Decimal units, as huggingface_hub and transformers use for "5GB"; binary ones spelled out.
_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")
_DRIVE = re.compile(r"^[A-Za-z]:")


def parse_size(size: int | str) -> int:
    """Bytes from an int or a string like ``"5GB"``, ``"500MB"``, ``"100KB"``, ``"2GiB"``.

    KB/MB/GB/TB are decimal (1 GB = 10**9), KiB/MiB/GiB/TiB binary; units are case-insensitive.
    """
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f"max_shard_size must be an int or a string like '5GB', got {size!r}")
    if isinstance(size, int):
        value = size
    else:
        m = _SIZE.match(size)
        unit = m.group(2).upper() if m else None
        if m is None or unit not in _UNITS:
            raise ValueError(
                f"cannot parse size {size!r}: expected a number and a unit among B, KB, MB, GB, TB "
                "(decimal) or KiB, MiB, GiB, TiB (binary)"
            )
        value = int(float(m.group(1)) * _UNITS[unit]) if "." in m.group(1) else int(m.group(1)) * _UNITS[unit]
    if value <= 0:
        raise ValueError(f"max_shard_size must be positive, got {size!r}")
    return value


def validate_shard_name(name: Any, index_name: str = "index") -> str:
    """Return ``name`` if it is a plain ``*.safetensors`` file name in the index's directory.

    The rules hold for the name as written and once percent-decoded: a server resolves
    ``%2e%2e%2fsecret.safetensors`` to ``../secret.safetensors``.
    """

    def bad(why: str) -> InvalidIndex:
        return InvalidIndex(f"{index_name}: unsafe shard name {name!r}: {why}", shard=name)

    if not isinstance(name, str) or not name:
        raise bad("not a non-empty string")
    for form, how in ((name, ""), (urllib.parse.unquote(name), " (percent-decoded)")):
        if "\x00" in form:
            raise bad("contains a NUL byte" + how)
        if form.startswith(("/", "\\")) or _DRIVE.match(form):
            raise bad("absolute paths are not allowed" + how)
        if ".." in re.split(r"[\\/]", form):
            raise bad("'..' is not allowed" + how)
        if "/" in form or "\\" in form:
            raise bad("shards must be in the same directory as the index" + how)
    if not name.endswith(SUFFIX) or name == SUFFIX:
        raise bad(f"shard files must end in {SUFFIX}")
    return name


@dataclass(frozen=True)
class ShardIndex:
    """A parsed index: ``metadata`` (total_size and user entries) and tensor -> shard file."""

    weight_map: Mapping[str, str]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def shards(self) -> list[str]:
        """Shard file names, sorted (so model-00001-of-N comes first)."""
        return sorted(set(self.weight_map.values()))

    def tensors_in(self, shard: str) -> list[str]:
        return sorted(k for k, v in self.weight_map.items() if v == shard)


def parse_index(data: bytes | str, name: str = "index") -> ShardIndex:
    """Parse and validate an index file's contents."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidIndex(f"{name}: not valid JSON: {e}") from e
    if not isinstance(obj, dict):
        raise InvalidIndex(f"{name}: expected a JSON object, found {type(obj).__name__}")
    weight_map = obj.get("weight_map")
    if not isinstance(weight_map, dict):
        raise InvalidIndex(f"{name}: 'weight_map' must be an object of tensor name -> shard file")
    metadata = obj.get("metadata")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise InvalidIndex(f"{name}: 'metadata' must be an object, found {type(metadata).__name__}")
    for tensor, shard in weight_map.items():
        if not isinstance(tensor, str):  # JSON keys always are; kept for hand-built dicts
            raise InvalidIndex(f"{name}: tensor name {tensor!r} is not a string")
        validate_shard_name(shard, name)
    return ShardIndex(weight_map=dict(weight_map), metadata=dict(metadata))


def encode_index(index: ShardIndex) -> str:
    """The index as transformers writes it: sorted keys, indent 2, trailing newline."""
    obj = {"metadata": dict(index.metadata), "weight_map": dict(index.weight_map)}
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


# --- names ------------------------------------------------------------------------------


def _with_variant(filename: str, variant: str | None) -> str:
    # transformers' _add_variant: "model.safetensors" + "fp16" -> "model.fp16.safetensors".
    if not variant:
        return filename
    parts = filename.split(".")
    return ".".join(parts[:-1] + [variant] + parts[-1:])


def single_file_name(basename: str = "model", variant: str | None = None) -> str:
    return _with_variant(f"{basename}{SUFFIX}", variant)


def index_file_name(basename: str = "model", variant: str | None = None) -> str:
    """``model.safetensors.index.json`` (``model.safetensors.index.fp16.json`` for a variant)."""
    return _with_variant(f"{basename}{SUFFIX}{INDEX_SUFFIX}", variant)


def shard_file_name(i: int, n: int, basename: str = "model", variant: str | None = None) -> str:
    """The ``i``-th (0-based) of ``n`` shard names: ``model-00001-of-00003.safetensors``."""
    stem = f"{basename}.{variant}" if variant else basename
    return f"{stem}-{i + 1:05d}-of-{n:05d}{SUFFIX}"


def shard_name_pattern(basename: str = "model", variant: str | None = None) -> re.Pattern[str]:
    stem = re.escape(f"{basename}.{variant}" if variant else basename)
    return re.compile(rf"^{stem}-\d{{5}}-of-\d{{5}}{re.escape(SUFFIX)}$")


# --- planning ---------------------------------------------------------------------------


def plan_shards(
    entries: Iterable[tuple[str, int, Hashable | None]], max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE
) -> list[list[str]]:
    """Split tensors into shards: greedy in key order, exactly huggingface_hub's algorithm.

    ``entries`` are (name, nbytes, storage id or None).  Tensors with the same storage id go
    to the shard of the first of them; a group's size is the sum of its members' bytes (each
    member is written in full).  A group bigger than the limit gets a shard of its own, added
    before the shard being filled (which keeps filling), as huggingface_hub does.
    """
    limit = parse_size(max_shard_size)
    groups: dict[Hashable, list[str]] = {}
    sizes: dict[str, int] = {}  # first member -> group size
    order: list[str] = []  # first members in key order
    seen: set[str] = set()
    for name, nbytes, storage in entries:
        if name in seen:
            raise ValueError(f"tensor name {name!r} appears twice")
        seen.add(name)
        key: Hashable = ("name", name) if storage is None else ("storage", storage)
        if key in groups:
            groups[key].append(name)
            sizes[groups[key][0]] += nbytes
            continue
        groups[key] = [name]
        sizes[name] = nbytes
        order.append(name)
    members = {g[0]: g for g in groups.values()}
    shards: list[list[str]] = []
    current: list[str] = []
    current_size = 0
    for first in order:
        size = sizes[first]
        if size > limit:
            shards.append(list(members[first]))
            continue
        if current and current_size + size > limit:
            shards.append(current)
            current, current_size = [], 0
        current.extend(members[first])
        current_size += size
    if current or not shards:
        shards.append(current)
    return shards


def shard_names(n: int, basename: str = "model", variant: str | None = None) -> list[str]:
    """File names for ``n`` shards (one shard: the plain ``model.safetensors``)."""
    if n == 1:
        return [single_file_name(basename, variant)]
    return [shard_file_name(i, n, basename, variant) for i in range(n)]
