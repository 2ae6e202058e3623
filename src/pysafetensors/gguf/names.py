"""Tensor names between llama.cpp (GGUF) and Hugging Face, through gguf-py's TensorNameMap.

gguf-py maps each Hugging Face name of every architecture it knows to llama.cpp's name
(``model.layers.3.self_attn.q_proj.weight`` -> ``blk.3.attn_q.weight``).  Going back is
ambiguous: one llama.cpp name has candidates from several naming schemes (``model.layers.N``
from transformers, ``layers.N`` from Meta's original checkpoints...).  :func:`hf_names`
picks one scheme for the whole model: the leading name component most candidates share (the
transformers layout, ``model.``, for llama), and, for the tensors that have no candidate under
it (``lm_head``), the candidate gguf-py lists for the same source (its comments tag each
candidate with the checkpoints it comes from).

llama.cpp's converter permutes the rows of the q and k projections of llama-family models
(for its rotary embedding layout); :func:`unpermute_qk` undoes it.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

from .._optional import require
from .header import GGUFHeader

#: architectures whose q/k weights llama.cpp's converter permutes
PERMUTED_QK_ARCHS = frozenset({"llama"})
_SUFFIXES = (".weight", ".bias")


@dataclass(frozen=True)
class NameMapping:
    """``hf`` maps GGUF names to Hugging Face names; ``unmapped`` lists the rest."""

    hf: dict[str, str]
    unmapped: list[str]
    architecture: str | None


def _name_map(header: GGUFHeader) -> Any:
    gguf = require("gguf", "gguf")
    arch_name = header.architecture
    if arch_name is None:
        return None
    arch = next((a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch_name), None)
    if arch is None:
        return None
    # Blocks named in the tensors count too, so a file without ``<arch>.block_count`` still maps.
    named = [int(m.group(1)) for t in header.tensors if (m := re.match(r"blk\.(\d+)\.", t.name))]
    blocks = header.value(f"{arch_name}.block_count", 0)
    n_blocks = max(int(blocks) if isinstance(blocks, int) else 0, max(named, default=-1) + 1)
    n_blocks = min(n_blocks, len(header.tensors) + 1)  # a crafted count must not build a huge map
    return gguf.get_tensor_name_map(arch, n_blocks)


def gguf_name_of(header: GGUFHeader, hf_name: str) -> str | None:
    """The llama.cpp name gguf-py gives ``hf_name`` in this file's architecture (None if unknown)."""
    tmap = _name_map(header)
    return None if tmap is None else tmap.get_name(hf_name, try_suffixes=_SUFFIXES)


@cache
def _source_tags() -> dict[str, frozenset[str]]:
    """Each candidate name's tags from gguf-py's comments (``"model.norm", # llama-hf ...``)."""
    tensor_mapping = require("gguf.tensor_mapping", "gguf")
    try:
        source = inspect.getsource(tensor_mapping)
    except (OSError, TypeError):
        return {}
    tags: dict[str, set[str]] = {}
    for m in re.finditer(r'^\s*"([^"]+)",?\s*#\s*(.+)$', source, re.MULTILINE):
        tags.setdefault(m.group(1), set()).update(m.group(2).split())
    return {k: frozenset(v) for k, v in tags.items()}


def _candidates(tmap: Any) -> dict[str, list[str]]:
    """llama.cpp name (no suffix) -> every Hugging Face name gguf-py maps to it, in its order."""
    candidates: dict[str, list[str]] = {}
    for key, (_kind, gguf_name) in tmap.mapping.items():
        if key != gguf_name:
            candidates.setdefault(gguf_name, []).append(key)
    return candidates


def hf_candidates(header: GGUFHeader) -> dict[str, list[str]]:
    """Every Hugging Face name gguf-py knows for each of this file's tensors (suffix included);
    a comparison with a checkpoint picks the one that checkpoint holds."""
    tmap = _name_map(header)
    if tmap is None:
        return {}
    candidates = _candidates(tmap)
    out = {}
    for t in header.tensors:
        base, suffix = _split_suffix(t.name)
        if base in candidates:
            out[t.name] = [c + suffix for c in candidates[base]]
    return out


def _template(candidate: str, gguf_name: str) -> str:
    """A candidate with its block number put back as gguf-py's source writes it (``{bid}``),
    to look up its comment tags."""
    m = re.match(r"blk\.(\d+)\.", gguf_name)
    if m is None:
        return candidate
    return re.sub(rf"(^|\.){m.group(1)}(\.|$)", r"\1{bid}\2", candidate, count=1)


def hf_names(header: GGUFHeader) -> NameMapping:
    """Hugging Face names for this file's tensors, where gguf-py knows the architecture.

    gguf-py's map lists, for each llama.cpp name, the names of every checkpoint family it
    converts (its comments tag each with the families: ``# llama-hf``, ``# bert``).  The
    candidate tagged with the file's architecture (``bert``, or ``llama-hf`` before
    ``llama-pth``) wins; otherwise the naming scheme most candidates share, as said above.
    """
    tmap = _name_map(header)
    names = [t.name for t in header.tensors]
    if tmap is None:
        return NameMapping({}, names, header.architecture)
    candidates = _candidates(tmap)
    split = {n: _split_suffix(n) for n in names}
    prefixes = Counter(
        c.split(".", 1)[0] for base, _ in split.values() for c in candidates.get(base, []) if "." in c
    )
    scheme = prefixes.most_common(1)[0][0] if prefixes else None
    tags = _source_tags()
    arch = header.architecture or ""
    # The sources (gguf-py's comment tags) of the first candidate under the scheme, tallied
    # over the model, say which checkpoint family it comes from ("llama-hf").
    scheme_tags: Counter[str] = Counter()
    for name, (base, _suffix) in split.items():
        under = [c for c in candidates.get(base, []) if scheme and c.startswith(scheme + ".")]
        if under:
            scheme_tags.update(tags.get(_template(under[0], name), ()))

    def rank(name: str, item: tuple[int, str]) -> tuple[int, int, int, int]:
        position, candidate = item
        found = tags.get(_template(candidate, name), frozenset())
        own = 2 if arch in found or f"{arch}-hf" in found else 1 if any(t.startswith(arch) for t in found) else 0
        score = sum(scheme_tags[t] for t in found)
        return (-own, -score, 0 if scheme and candidate.startswith(scheme + ".") else 1, position)

    chosen: dict[str, str] = {}
    for name, (base, _suffix) in split.items():
        options = candidates.get(base)
        if options:
            chosen[name] = min(enumerate(options), key=lambda item, name=name: rank(name, item))[1]  # type: ignore[misc]
    mapping = {n: chosen[n] + split[n][1] for n in names if n in chosen}
    unmapped = [n for n in names if n not in chosen]
    return NameMapping(mapping, unmapped, header.architecture)


def _split_suffix(name: str) -> tuple[str, str]:
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix
    return name, ""


def qk_heads(header: GGUFHeader, gguf_name: str) -> int | None:
    """The head count to undo llama.cpp's q/k permutation with, or None when not permuted."""
    arch = header.architecture
    if arch not in PERMUTED_QK_ARCHS:
        return None
    n_head = header.value(f"{arch}.attention.head_count")
    n_head_kv = header.value(f"{arch}.attention.head_count_kv", n_head)
    if not isinstance(n_head, int) or not isinstance(n_head_kv, int):
        return None
    if re.fullmatch(r"blk\.\d+\.attn_q\.weight", gguf_name):
        return n_head
    if re.fullmatch(r"blk\.\d+\.attn_k\.weight", gguf_name):
        return n_head_kv
    return None


def unpermute_qk(weights: Any, n_head: int) -> Any:
    """Undo llama.cpp's ``permute``: rows were regrouped per head as (2, half) -> (half, 2)."""
    rows = weights.shape[0]
    if n_head <= 0 or rows % (2 * n_head):
        return weights
    rest = weights.shape[1:]
    return weights.reshape(n_head, rows // n_head // 2, 2, *rest).swapaxes(1, 2).reshape(weights.shape)


def permute_qk(weights: Any, n_head: int) -> Any:
    """llama.cpp's own ``permute`` (HF layout -> GGUF layout), used to compare with a source."""
    rows = weights.shape[0]
    if n_head <= 0 or rows % (2 * n_head):
        return weights
    rest = weights.shape[1:]
    return weights.reshape(n_head, 2, rows // n_head // 2, *rest).swapaxes(1, 2).reshape(weights.shape)


__all__ = [
    "PERMUTED_QK_ARCHS",
    "NameMapping",
    "gguf_name_of",
    "hf_candidates",
    "hf_names",
    "permute_qk",
    "qk_heads",
    "unpermute_qk",
]
