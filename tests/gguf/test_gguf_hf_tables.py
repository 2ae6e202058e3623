"""The tables of ``--hf-names`` cover transformers' list of GGUF architectures, each one is tested
against llama.cpp's converter, and the guide names every one (mapped or not, with the reason)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llamacpp import ARCHS, GGUF_ARCH

from pysafetensors.gguf.hf_map import op_parts
from pysafetensors.gguf.hf_tables import NOT_MAPPED, OPS, TABLES

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "gguf.md"
#: transformers' model_type -> the general.architecture llama.cpp writes for it
_AS_GGUF = {"qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "gpt_oss": "gpt-oss", "minimax_m2": "minimax-m2",
            "umt5": "t5", "mistral": "llama"}


def test_every_architecture_transformers_loads_is_mapped_or_named() -> None:
    ggml = pytest.importorskip("transformers.integrations.ggml")
    from transformers.integrations.gguf.gguf_conversion_mapping import GGUF_ARCHS

    listed = {_AS_GGUF.get(k, k) for k in ggml.GGUF_CONFIG_MAPPING if k not in ("general", "tokenizer")}
    listed |= set(GGUF_ARCHS)
    assert listed - set(TABLES) - set(NOT_MAPPED) == set()
    assert not set(TABLES) & set(NOT_MAPPED)


def test_every_table_is_checked_against_llama_cpp() -> None:
    tested = {GGUF_ARCH.get(name, name) for name in ARCHS}
    assert set(TABLES) - tested == set()


def test_every_rule_names_a_known_op() -> None:
    for table in TABLES.values():
        for rule in table.rules:
            assert all(part in OPS for part in op_parts(rule.op)), (table.arch, rule)
            assert ("{E}" in rule.hf) == (rule.op == "split"), (table.arch, rule)


def test_the_guide_names_every_architecture() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    mapped = text[text.index("## Hugging Face names") : text.index("## Split sets")]
    unmapped = text[text.index("## Not supported") :]
    for arch in TABLES:
        assert re.search(rf"`{re.escape(arch)}`", mapped), arch
    for arch in NOT_MAPPED:
        assert re.search(rf"`{re.escape(arch)}`", unmapped), arch


def _plan(tmp_path: Path, arch: str, tensors: dict, kv: dict):  # type: ignore[no-untyped-def]
    import numpy as np
    from gguf_helpers import write_gguf

    from pysafetensors.gguf import GGUFFile
    from pysafetensors.gguf.hf_map import plan_hf
    from pysafetensors.io.sources import MmapSource

    path = write_gguf(tmp_path / f"{arch}.gguf", {k: (np.zeros(v, np.float32), None) for k, v in tensors.items()},
                      arch=arch, kv=kv)
    with GGUFFile(MmapSource(str(path))) as f:
        return plan_hf(f.header)


def test_multi_token_prediction_blocks_are_left_out(tmp_path: Path) -> None:
    from gguf_helpers import V

    kv = {"qwen35.block_count": (2, V.UINT32), "qwen35.nextn_predict_layers": (1, V.UINT32)}
    m = _plan(tmp_path, "qwen35", {"blk.0.attn_norm.weight": (8,), "blk.1.attn_norm.weight": (8,),
                                   "blk.1.nextn.eh_proj.weight": (8, 16)}, kv)
    assert [t.name for t in m.tensors] == ["model.layers.0.input_layernorm.weight"]
    assert sorted(m.dropped) == ["blk.1.attn_norm.weight", "blk.1.nextn.eh_proj.weight"]
    assert all("multi-token-prediction" in why for why in m.dropped.values())


def test_what_a_table_cannot_map_or_undo_is_named(tmp_path: Path) -> None:
    from gguf_helpers import V

    kv = {"llama.attention.head_count": (3, V.UINT32)}
    m = _plan(tmp_path, "llama", {"blk.0.attn_q.weight": (8, 16), "blk.0.mystery.weight": (4,),
                                  "rope_freqs.weight": (4,)}, kv)
    assert m.table and m.warning is None
    assert m.unmapped == ["blk.0.mystery.weight"]
    assert list(m.dropped) == ["rope_freqs.weight"]
    q = "model.layers.0.self_attn.q_proj.weight"
    assert list(m.left_in_gguf_order) == [q] and "do not split into 3 heads" in m.left_in_gguf_order[q]
