"""Tensor names between llama.cpp (GGUF) and Hugging Face, through gguf-py's TensorNameMap.

gguf-py maps each Hugging Face name of every architecture it knows to llama.cpp's name
(``model.layers.3.self_attn.q_proj.weight`` -> ``blk.3.attn_q.weight``).  Going back is
ambiguous: one llama.cpp name has candidates from several naming schemes (``model.layers.N``
from transformers, ``layers.N`` from Meta's original checkpoints...).  :func:`hf_names`
picks one scheme for the whole model: the leading name component most candidates share (the
transformers layout, ``model.``, for llama), and, for the tensors that have no candidate under
it (``lm_head``), the candidate gguf-py lists for the same source (its comments tag each
candidate with the checkpoints it comes from).

llama.cpp's converter permutes the rows of the q and k projections (weights, and for most
architectures biases) of the models whose Hugging Face layout differs from the one its rotary
embedding expects; :func:`qk_order` says, tensor by tensor, which rows to put back (and which
it cannot vouch for); the reader (``DecodedBytes``) undoes the permutation.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from .._optional import require
from .header import GGUFArray, GGUFHeader

_SUFFIXES = (".weight", ".bias")


@dataclass(frozen=True)
class QKPermutation:
    """How llama.cpp's ``convert_hf_to_gguf.py`` permuted one architecture's q/k rows.

    Attributes:
        biases: ``q_proj.bias``/``k_proj.bias`` were permuted too (as 1-D tensors), not only
            the weights.
        kv_ratio: k was regrouped over ``head_count // head_count_kv`` heads (the
            ``_reverse_hf_permute`` of the Baichuan and Xverse converters) rather than over
            ``head_count_kv`` heads (``LlamaModel.permute``).
        by_name: the converter permuted only tensors whose source name ends in ``q_proj`` or
            ``k_proj``; a checkpoint that keeps Meta's layout under Meta's names
            (``layers.N.attention.wq``) was written as it is.  False where q and k are always
            split out of a fused projection and permuted.
        source: the converter class that does it.
    """

    biases: bool
    kv_ratio: bool
    by_name: bool
    source: str


# What llama.cpp's convert_hf_to_gguf.py does to attn_q/attn_k, class by class, read at
# ggml-org/llama.cpp commit 0024aa7417efd50a7c2a79e049dfbbbceb0beaaf (the converter of the
# architectures gguf-py 0.19 lists; `general.architecture` is the class's MODEL_ARCH name).
_LLAMA = "LlamaModel.modify_tensors (undo_permute = True): q_proj/k_proj .weight and .bias"
#: architectures whose q/k rows the converter permutes, and how
PERMUTED_QK: dict[str, QKPermutation] = {
    # LlamaModel and the subclasses that keep its modify_tensors and undo_permute = True
    "llama": QKPermutation(True, False, True, _LLAMA + " (also InternLM3Model, JanusProModel)"),
    "arcee": QKPermutation(True, False, True, "ArceeModel(LlamaModel)"),
    "smollm3": QKPermutation(True, False, True, "SmolLM3Model(LlamaModel)"),
    "llama-embed": QKPermutation(True, False, True, "LlamaEmbedNemotronModel(LlamaModel)"),
    "mistral3": QKPermutation(True, False, True, "Mistral3Model.Ministral3Model(LlamaModel)"),
    "granite": QKPermutation(True, False, True, "GraniteModel(LlamaModel)"),
    "granitemoe": QKPermutation(True, False, True, "GraniteMoeModel(GraniteModel)"),
    "granitehybrid": QKPermutation(True, False, True, "GraniteHybridModel: attention layers via GraniteMoeModel"),
    "nemotron_h": QKPermutation(True, False, True, "NemotronHModel(GraniteHybridModel)"),
    "nemotron_h_moe": QKPermutation(True, False, True, "NemotronHModel(GraniteHybridModel), MoE"),
    # classes with their own copy of the permutation
    "deci": QKPermutation(True, False, True, "DeciModel.permute, head counts per layer"),
    "deepseek": QKPermutation(True, False, True, "DeepseekModel.permute"),
    "llada": QKPermutation(True, False, True, "LLaDAModel.permute"),
    "chameleon": QKPermutation(True, False, True, "ChameleonModel: LlamaModel.permute"),
    "minicpm": QKPermutation(False, False, True, "MiniCPMModel: LlamaModel.permute, weights only"),
    "olmo": QKPermutation(False, False, True, "OlmoModel: LlamaModel.permute, weights only"),
    "arctic": QKPermutation(False, False, True, "ArcticModel: LlamaModel.permute, weights only"),
    "xverse": QKPermutation(False, True, True, "XverseModel._reverse_hf_permute, weights only"),
    # q and k split out of a fused projection, then permuted
    "baichuan": QKPermutation(False, True, False, "BaichuanModel: W_pack split, _reverse_hf_permute"),
    "internlm2": QKPermutation(False, False, False, "InternLM2Model: wqkv split, LlamaModel.permute"),
    "bailingmoe": QKPermutation(False, False, False, "BailingMoeModel: query_key_value split, permute"),
}
#: architectures whose converter writes attn_q/attn_k rows as the checkpoint holds them (at the
#: commit above): Llama4Model and ApertusModel set undo_permute = False, AfmoeModel and
#: CogVLMModel replace LlamaModel.modify_tensors, the rest never permute (plamo's q heads and
#: glm4's M-RoPE rows are rearranged another way: REARRANGED).  Not in either set: "clip"
#: (multimodal projectors, whose vision q/k some projector types permute) and "gptj" (no
#: converter class), whose q/k rows are reported as left in GGUF order.
UNPERMUTED_QK_ARCHS = frozenset({
    "afmoe", "apertus", "arwkv7", "bailingmoe2", "bert", "bitnet", "bloom", "chatglm", "codeshell", "cogvlm",
    "cohere2", "command-r", "dbrx", "deepseek2", "deepseek2-ocr", "dots1", "dream", "ernie4_5", "ernie4_5-moe",
    "eurobert", "exaone", "exaone-moe", "exaone4", "falcon", "falcon-h1", "gemma", "gemma-embedding", "gemma2",
    "gemma3", "gemma3n", "gemma4", "glm-dsa", "glm4", "glm4moe", "gpt-oss", "gpt2", "gptneox", "grok", "grovemoe",
    "hunyuan-dense", "hunyuan-moe", "hunyuan_vl", "jais", "jais2", "jamba", "jina-bert-v2", "jina-bert-v3",
    "kimi-linear", "lfm2", "lfm2moe", "llada-moe", "llama4", "maincoder", "mamba", "mamba2", "mimo2",
    "minicpm3", "minimax-m2", "mistral4", "modern-bert", "mpt", "nemotron", "neo-bert", "nomic-bert",
    "nomic-bert-moe", "olmo2", "olmoe", "openelm", "orion", "paddleocr", "pangu-embedded", "phi2", "phi3",
    "phimoe", "plamo", "plamo2", "plamo3", "plm", "qwen", "qwen2", "qwen2moe", "qwen2vl", "qwen3", "qwen3moe",
    "qwen3next", "qwen35", "qwen35moe", "qwen3vl", "qwen3vlmoe", "refact", "rnd1", "rwkv6", "rwkv6qwen2",
    "rwkv7", "seed_oss", "smallthinker", "stablelm", "starcoder", "starcoder2", "step35", "t5", "t5encoder",
    "wavtokenizer-dec",
})
#: tensors the converter rearranges some other way, which are not put back (arch -> (pattern, how))
REARRANGED: dict[str, tuple[tuple[str, str], ...]] = {
    "plamo": ((r"attn_q\.weight", "PlamoModel.shuffle_attn_q_weight regroups the q heads"),
              (r"attn_output\.weight", "PlamoModel.shuffle_attn_output_weight regroups the columns")),
    "chameleon": ((r"attn_(q|k)_norm\.(weight|bias)", "ChameleonModel._reverse_hf_permute rewrites the q/k norms"),),
    "gptneox": ((r"attn_qkv\.(weight|bias)", "GPTNeoXModel regroups the fused q/k/v rows"),),
    "bloom": ((r"attn_qkv\.(weight|bias)", "BloomModel regroups the fused q/k/v rows"),),
    "falcon": ((r"attn_qkv\.weight", "FalconModel regroups the fused q/k/v rows per kv group"),),
}
#: glm4 files with M-RoPE sections: Glm4Model.normal_to_neox reordered each head's rotary rows
_GLM4_MROPE = (r"attn_(q|k)\.(weight|bias)", "Glm4Model.normal_to_neox reorders the rotary rows (M-RoPE)")
#: q/k of a text block, and of a multimodal projector's vision (v.) or audio (a.) blocks
_QK = re.compile(r"(?:[va]\.)?blk\.(\d+)\.attn_(q|k)\.(weight|bias)")
_HF_QK = ("q_proj.weight", "k_proj.weight")
_HF_QK_BIAS = ("q_proj.bias", "k_proj.bias")


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
    # (a multimodal projector's blocks are v.blk.N / a.blk.N)
    named = [int(m.group(1)) for t in header.tensors if (m := re.match(r"(?:[va]\.)?blk\.(\d+)\.", t.name))]
    blocks = header.value(f"{arch_name}.block_count", 0)
    n_blocks = max(int(blocks) if isinstance(blocks, int) else 0, max(named, default=-1) + 1)
    n_blocks = min(n_blocks, len(header.tensors) + 1)  # a crafted count must not build a huge map
    return gguf.get_tensor_name_map(arch, n_blocks)


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


def _per_block(value: Any, block: int) -> int | None:
    """A head count: a number, or the block's entry of a per-layer array (Deci, hybrids)."""
    if isinstance(value, GGUFArray):
        if block >= len(value):
            return None
        value = value.items[block]
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _qk(header: GGUFHeader, gguf_name: str, hf_name: str | None, rows: int) -> tuple[int | None, str | None]:
    """(heads to un-permute with, None) or (None, why the rows are left in GGUF order) or
    (None, None) when the rows are known to be the checkpoint's."""
    m = _QK.fullmatch(gguf_name)
    if m is None:
        return None, None
    arch = header.architecture or ""
    rule = PERMUTED_QK.get(arch)
    if rule is None:
        if arch in UNPERMUTED_QK_ARCHS:
            return None, None
        return None, (f"architecture {arch!r} is not one whose converter is known to keep or permute q/k rows: "
                      "left as llama.cpp stored them")
    block, kind, suffix = int(m.group(1)), m.group(2), m.group(3)
    if suffix == "bias" and not rule.biases:
        return None, None
    if rule.by_name and hf_name is not None and not hf_name.endswith(_HF_QK + _HF_QK_BIAS):
        return None, None  # a name in Meta's layout (layers.N.attention.wq): not permuted
    n_head = _per_block(header.value(f"{arch}.attention.head_count"), block)
    n_kv = _per_block(header.value(f"{arch}.attention.head_count_kv"), block)
    if n_kv is None:
        n_kv = n_head
    if not n_head or n_head < 0:
        return None, f"{arch}.attention.head_count gives no head count for block {block}: rows left in GGUF order"
    heads: int | None = n_head
    if kind == "k" and n_kv != n_head:
        heads = (n_head // n_kv if n_kv else None) if rule.kv_ratio else n_kv
    if not heads or heads < 0:
        return None, f"no kv head count for block {block}: rows left in GGUF order"
    if rows % (2 * heads):
        return None, f"{rows} rows do not split into {heads} heads of row pairs: rows left in GGUF order"
    return heads, None


def qk_order(header: GGUFHeader, shown: Mapping[str, str]) -> tuple[dict[str, int], dict[str, str]]:
    """For GGUF tensors shown under other names (``shown``: GGUF name -> Hugging Face name):
    the head count to un-permute each permuted q/k tensor with, and the tensors left in GGUF
    order although llama.cpp may have rearranged their rows (GGUF name -> why)."""
    heads: dict[str, int] = {}
    left: dict[str, str] = {}
    arch = header.architecture or ""
    rearranged = list(REARRANGED.get(arch, ()))
    if arch == "glm4" and header.value("glm4.rope.dimension_sections") is not None:
        rearranged.append(_GLM4_MROPE)
    rows = {t.name: t.shape[0] if t.shape else 0 for t in header.tensors}
    for gguf_name, hf_name in shown.items():
        if hf_name == gguf_name:
            continue
        h, why = _qk(header, gguf_name, hf_name, rows.get(gguf_name, 0))
        if h is not None:
            heads[gguf_name] = h
        elif why is not None:
            left[gguf_name] = why
        for pattern, how in rearranged:
            if re.fullmatch(rf"blk\.\d+\.{pattern}", gguf_name):
                left[gguf_name] = f"{how}: left as llama.cpp stored it"
    return heads, left


__all__ = [
    "PERMUTED_QK",
    "REARRANGED",
    "UNPERMUTED_QK_ARCHS",
    "NameMapping",
    "QKPermutation",
    "hf_candidates",
    "hf_names",
    "qk_order",
]
