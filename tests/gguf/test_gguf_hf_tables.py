"""The tables of ``--hf-names`` cover transformers' list of GGUF architectures, each one is tested
against llama.cpp's converter, and the guide names every one (mapped or not, with the reason)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llamacpp import ARCHS, GGUF_ARCH

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
            assert rule.op in OPS, (table.arch, rule)
            assert ("{E}" in rule.hf) == (rule.op == "split"), (table.arch, rule)


def test_the_guide_names_every_architecture() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    mapped = text[text.index("## Hugging Face names") : text.index("## Split sets")]
    unmapped = text[text.index("## Not supported") :]
    for arch in TABLES:
        assert re.search(rf"`{re.escape(arch)}`", mapped), arch
    for arch in NOT_MAPPED:
        assert re.search(rf"`{re.escape(arch)}`", unmapped), arch
