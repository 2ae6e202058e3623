"""Hugging Face sharded-checkpoint helpers for the CLI: index reading, shard names, sizes.

TODO(merge): ``pysafetensors.sharded`` is being written in parallel; when it lands, the lead
should route ``read_index``/``plan_shards`` through it and delete the duplicates here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from ..errors import SafetensorError

INDEX_NAME = "model.safetensors.index.json"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


class ShardIndexError(SafetensorError, ValueError):
    """A sharded index that cannot be used (bad JSON, unsafe shard names, missing shards)."""


def parse_size(text: str | int) -> int:
    """``5GB`` -> 5_000_000_000 (decimal units as transformers; ``GiB`` for binary); ints pass."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise ValueError(f"invalid size {text!r}: expected bytes or a number with KB/MB/GB/TB (decimal) or KiB/MiB/GiB")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"invalid size {text!r}: must be positive")
    return value


def shard_name(index: int, count: int, prefix: str = "model") -> str:
    """``model-00001-of-00003.safetensors`` (1-based); a single shard is ``model.safetensors``."""
    if count == 1:
        return f"{prefix}.safetensors"
    return f"{prefix}-{index:05d}-of-{count:05d}.safetensors"


def check_shard_name(name: object) -> str:
    """Reject shard names that escape the checkpoint directory or are not .safetensors files."""
    if (
        not isinstance(name, str)
        or not name.endswith(".safetensors")
        or os.path.isabs(name)
        or re.match(r"^[A-Za-z]:", name)
        or ".." in re.split(r"[\\/]", name)
        or "\\" in name
    ):
        raise ShardIndexError(f"unsafe or invalid shard file name in index: {name!r}")
    return name


@dataclass(frozen=True)
class Index:
    path: str  # the index file, or the directory when there is none
    directory: str
    weight_map: dict[str, str]  # tensor -> shard file name (relative)
    metadata: dict[str, object]

    @property
    def shards(self) -> list[str]:
        """Shard file names in sorted order (each once)."""
        return sorted(set(self.weight_map.values()))


def find_index(path: str) -> str | None:
    """The index JSON for a directory (``model.safetensors.index*.json``), or None."""
    if os.path.isfile(os.path.join(path, INDEX_NAME)):
        return os.path.join(path, INDEX_NAME)
    found = sorted(f for f in os.listdir(path) if f.endswith(".json") and ".safetensors.index" in f)
    if len(found) > 1:
        raise ShardIndexError(f"{path}: several index files ({', '.join(found)}); name the one to use")
    return os.path.join(path, found[0]) if found else None


def read_index(path: str) -> Index:
    """Read an index JSON (or find one in a directory) and check its shard names."""
    if os.path.isdir(path):
        found = find_index(path)
        if found is None:
            raise ShardIndexError(f"{path}: no {INDEX_NAME} in this directory")
        path = found
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ShardIndexError(f"{path}: not a valid index JSON: {e}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("weight_map"), dict):
        raise ShardIndexError(f"{path}: index has no \"weight_map\" object")
    weight_map = {}
    for tensor, shard in obj["weight_map"].items():
        weight_map[tensor] = check_shard_name(shard)
    raw_meta = obj.get("metadata")
    metadata: dict[str, object] = raw_meta if isinstance(raw_meta, dict) else {}
    return Index(path, os.path.dirname(os.path.abspath(path)), weight_map, metadata)


def index_json(total_size: int, weight_map: dict[str, str]) -> bytes:
    """The index as transformers writes it: sorted keys, indent 2, trailing newline."""
    obj = {"metadata": {"total_size": total_size}, "weight_map": weight_map}
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8")


def plan_shards(sizes: list[tuple[str, int]], max_shard_size: int) -> list[list[str]]:
    """Greedy split in the given order; a tensor over the limit gets a shard of its own."""
    shards: list[list[str]] = []
    current: list[str] = []
    current_size = 0
    for name, nbytes in sizes:
        if current and current_size + nbytes > max_shard_size:
            shards.append(current)
            current, current_size = [], 0
        current.append(name)
        current_size += nbytes
    if current:
        shards.append(current)
    return shards
