"""Sharded checkpoints, Hugging Face layout: the index JSON, shard names, shard planning, and
the rule that says whether a shard agrees with its index.

PURE: stdlib only.  ``model.safetensors.index.json`` is
``{"metadata": {"total_size": <tensor bytes>, ...}, "weight_map": {tensor: shard file}}``,
written with sorted keys, indent 2 and a trailing newline, as transformers writes it.

A checkpoint saved here also carries a random checkpoint id, in the index's ``metadata`` and in
every shard's ``__metadata__`` (``CHECKPOINT_ID_KEY``): a shard whose id differs from the
index's was written by another save, so a set mixed by an interrupted or concurrent save is
detected rather than read.  Checkpoints without ids (transformers, huggingface_hub) agree as
long as neither side has one.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import InvalidIndex
from ._frame import INDEX_SUFFIX
from .json_compat import KeyedObject
from .layout import unique_by_name

SUFFIX = ".safetensors"
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
# The checkpoint id's key in the index's metadata and in each shard's header metadata.  It is
# bookkeeping, not user metadata: readers leave it out of the metadata they present.
CHECKPOINT_ID_KEY = "pysafetensors.checkpoint_id"

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

    # The common name first: no separator, escape, NUL or drive, so no form of it leaves the
    # directory (percent-decoding cannot change a name without '%').
    if (
        type(name) is str
        and name.endswith(SUFFIX)
        and name != SUFFIX
        and "/" not in name
        and "\\" not in name
        and "%" not in name
        and "\x00" not in name
        and not _DRIVE.match(name)
    ):
        return name

    def bad(why: str) -> InvalidIndex:
        return InvalidIndex(f"{index_name}: unsafe shard name {name!r}: {why}", shard=name)

    if not isinstance(name, str) or not name:
        raise bad("not a non-empty string")
    for form, how in ((name, ""), (urllib.parse.unquote(name), " (percent-decoded)")):
        if "\x00" in form:
            raise bad("contains a NUL byte" + how)
        if form.startswith(("/", "\\")) or _DRIVE.match(form):
            raise bad("absolute paths are not allowed" + how)
        if ".." in form.replace("\\", "/").split("/"):  # a component, with either separator
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
        return sorted(self._counts)

    def tensors_in(self, shard: str) -> list[str]:
        """The tensors the weight map puts in ``shard``, sorted."""
        return list(self._by_shard.get(shard, ()))

    @cached_property
    def _counts(self) -> dict[str, int]:
        """How many tensors the weight map puts in each shard (counted in C)."""
        return Counter(self.weight_map.values())

    @cached_property
    def _by_shard(self) -> dict[str, tuple[str, ...]]:
        # Built once: checking every shard of a large index would otherwise scan the whole
        # weight map per shard.
        groups: dict[str, list[str]] = {}
        for tensor, shard in self.weight_map.items():
            groups.setdefault(shard, []).append(tensor)
        return {shard: tuple(sorted(names)) for shard, names in groups.items()}

    @property
    def checkpoint_id(self) -> str | None:
        """The id of the save that wrote this index, or None (written elsewhere)."""
        value = self.metadata.get(CHECKPOINT_ID_KEY)
        return value if isinstance(value, str) else None

    @property
    def user_metadata(self) -> dict[str, Any]:
        """The index's metadata without the checkpoint id (``total_size`` and user entries)."""
        return without_checkpoint_id(self.metadata) or {}


def without_checkpoint_id(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``metadata`` without the checkpoint id; None when nothing else is left."""
    if metadata is None:
        return None
    out = {k: v for k, v in metadata.items() if k != CHECKPOINT_ID_KEY}
    return out or None


@dataclass(frozen=True)
class ShardCheck:
    """How one shard agrees with its index (``check_shard``)."""

    shard: str
    missing: tuple[str, ...] = ()  # mapped to this shard, absent from it
    unmapped: tuple[str, ...] = ()  # in this shard, absent from the weight map
    elsewhere: tuple[str, ...] = ()  # in this shard, mapped to another shard
    index_id: str | None = None
    shard_id: str | None = None

    @property
    def mixed(self) -> bool:
        """The shard was written by another save than the index (their checkpoint ids differ)."""
        return self.index_id != self.shard_id

    @property
    def ignored(self) -> tuple[str, ...]:
        """Tensors in the shard that are not read from it (not mapped here)."""
        return self.unmapped + self.elsewhere

    def describe_mixed(self, index_name: str) -> str:
        def show(v: str | None) -> str:
            return repr(v) if v is not None else "none"

        return (
            f"{index_name}: shard {self.shard} was written by another save than the index "
            f"(checkpoint id {show(self.shard_id)} in the shard, {show(self.index_id)} in the index): "
            "a mixed set, from an interrupted or concurrent save; save the checkpoint again"
        )

    def describe_missing(self, index_name: str) -> str:
        shown = ", ".join(repr(n) for n in self.missing[:5]) + (" ..." if len(self.missing) > 5 else "")
        return (
            f"{index_name}: the index maps {len(self.missing)} tensor(s) to {self.shard}, "
            f"which does not contain them: {shown}"
        )

    def describe_ignored(self, index_name: str) -> str:
        parts = []
        if self.unmapped:
            parts.append(f"{len(self.unmapped)} not in the weight map ({_show(self.unmapped)})")
        if self.elsewhere:
            parts.append(f"{len(self.elsewhere)} mapped to another shard ({_show(self.elsewhere)})")
        return f"{index_name}: shard {self.shard} holds tensors the index does not map to it, left out: " + "; ".join(parts)


def _show(names: tuple[str, ...]) -> str:
    return ", ".join(repr(n) for n in names[:5]) + (" ..." if len(names) > 5 else "")


def check_shard(
    index: ShardIndex, shard: str, tensor_names: Iterable[str], shard_metadata: Mapping[str, str] | None
) -> ShardCheck:
    """Compare one shard's header (its tensor names and metadata) with the index.

    The one rule every reader of sharded checkpoints applies (safe_open, the CLI, validate,
    distributed loading): a mapped tensor the shard lacks is an error, a shard from another
    save (checkpoint ids differ) is an error, and tensors the index does not map to this shard
    are not read from it (callers warn).
    """
    present = list(tensor_names)
    present_set = set(present)
    weight_map = index.weight_map
    missing: tuple[str, ...]
    unmapped: tuple[str, ...]
    elsewhere: tuple[str, ...]
    if len(present_set) == len(present) == index._counts.get(shard, 0) and set(map(weight_map.get, present)) == {shard}:
        # Every tensor present is mapped here and as many are mapped here as are present: the
        # shard holds exactly the tensors mapped to it (checked in C, whatever their number).
        missing = unmapped = elsewhere = ()
    else:
        mapped = index._by_shard.get(shard, ())
        missing = tuple(n for n in mapped if n not in present_set)
        unmapped = tuple(n for n in present if n not in weight_map)
        elsewhere = tuple(n for n in present if n in weight_map and weight_map[n] != shard)
    shard_id = (shard_metadata or {}).get(CHECKPOINT_ID_KEY)
    return ShardCheck(shard, missing, unmapped, elsewhere, index.checkpoint_id, shard_id)


def _no_key_dropped(data: bytes | bytearray | str, obj: Any) -> bool:
    """Whether ``json.loads`` kept every key of ``data`` (gave ``obj``): True only when it
    surely did.  A key given twice drops the first pair, so ``obj`` then holds fewer strings
    than ``data`` has; without a backslash every ``"`` in the text delimits a string, so
    counting them (in C) counts the strings.  With a backslash: False (``KeyedObject`` tells)."""
    if isinstance(data, str):
        if "\\" in data:
            return False
        quotes = data.count('"')
    else:
        if b"\\" in data:
            return False
        quotes = data.count(b'"')
    try:
        return quotes == 2 * _strings(obj)
    except RecursionError:  # nested deeper than this stack allows: the careful parse decides
        return False


def _strings(value: Any) -> int:
    """How many strings a decoded JSON value holds, keys included; the strings and scalars of
    a container counted in C, only nested containers recursed into."""
    if isinstance(value, dict):
        n = len(value)
        values: Any = value.values()
    elif isinstance(value, list):
        n = 0
        values = value
    else:
        return 1 if isinstance(value, str) else 0
    types = list(map(type, values))
    n += types.count(str)
    if dict in types or list in types:
        n += sum(_strings(v) for v in values if type(v) is dict or type(v) is list)
    return n


def parse_index(data: bytes | bytearray | str, name: str = "index") -> ShardIndex:
    """Parse and validate an index file's contents.

    A key given twice in the index object or its ``weight_map`` is an error (which shard holds
    the tensor would depend on the parser), and so is JSON nested too deeply to parse.
    """
    try:
        obj = json.loads(data)
        if not _no_key_dropped(data, obj):  # a key given twice, or a text the count cannot tell
            obj = json.loads(data, object_pairs_hook=KeyedObject.of)
    except RecursionError:
        raise InvalidIndex(f"{name}: JSON nested too deeply to parse (not an index)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidIndex(f"{name}: not valid JSON: {e}") from e
    if isinstance(obj, KeyedObject) and obj.duplicate is not None:
        raise InvalidIndex(f"{name}: key {obj.duplicate[0]!r} appears twice in the index object")
    if not isinstance(obj, dict):
        raise InvalidIndex(f"{name}: expected a JSON object, found {type(obj).__name__}")
    weight_map = obj.get("weight_map")
    if not isinstance(weight_map, dict):
        raise InvalidIndex(f"{name}: 'weight_map' must be an object of tensor name -> shard file")
    if isinstance(weight_map, KeyedObject) and weight_map.duplicate is not None:
        tensor, first, second = weight_map.duplicate
        raise InvalidIndex(
            f"{name}: tensor {tensor!r} appears twice in the weight map ({first!r} and {second!r})",
            tensor=tensor,
        )
    metadata = obj.get("metadata")
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise InvalidIndex(f"{name}: 'metadata' must be an object, found {type(metadata).__name__}")
    # Tensor names are JSON object keys: always strings.
    try:
        # A few shard names, each repeated for hundreds of tensors: each checked once.
        shards: Iterable[Any] = set(weight_map.values())
    except TypeError:  # an unhashable value (a list, an object): every value in order
        shards = weight_map.values()
    try:
        for shard in shards:
            validate_shard_name(shard, name)
    except InvalidIndex:
        if isinstance(shards, set):  # the first bad name in the weight map's order is reported
            for shard in dict.fromkeys(weight_map.values()):
                validate_shard_name(shard, name)
        raise
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


_ANY_SHARD = re.compile(rf"-(\d{{5}})-of-(\d{{5}}){re.escape(SUFFIX)}$")


def shard_position(file_name: str) -> tuple[int, int] | None:
    """(k, n) for a Hugging Face shard name ``...-0000k-of-0000n.safetensors``, else None."""
    m = _ANY_SHARD.search(file_name)
    return (int(m.group(1)), int(m.group(2))) if m else None


# --- planning ---------------------------------------------------------------------------


def plan_shards(
    entries: Iterable[tuple[str, int, Hashable | None]],
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    *,
    names_checked: bool = False,
) -> list[list[str]]:
    """Split tensors into shards: greedy in key order, exactly huggingface_hub's algorithm.

    ``entries`` are (name, nbytes, storage id or None).  Tensors with the same storage id go
    to the shard of the first of them; a group's size is the sum of its members' bytes (each
    member is written in full).  A group bigger than the limit gets a shard of its own, added
    before the shard being filled (which keeps filling), as huggingface_hub does.  A name given
    twice is refused, unless ``names_checked`` (the caller checked them: the save's one check).
    """
    limit = parse_size(max_shard_size)
    groups: dict[Hashable, list[str]] = {}
    sizes: dict[str, int] = {}  # first member -> group size
    order: list[str] = []  # first members in key order
    for name, nbytes, storage in entries if names_checked else unique_by_name(entries, lambda e: e[0]).values():
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
