"""Tiny random Hugging Face models of every architecture transformers' GGUF loader lists, written to
GGUF by llama.cpp's own ``convert_hf_to_gguf.py`` (the outside reference for what a GGUF holds).

The converter ships inside the ``llama-cpp-python`` source package; ``make venv`` unpacks it into
``<venv>/llama.cpp`` (the Makefile's ``LLAMA_CPP`` step).  :func:`converter_root` finds it there
(or where ``PYSAFETENSORS_LLAMA_CPP`` points).  Models are built with transformers from tiny
configs, their weights drawn on a grid of multiples of 2**-12 in [-0.25, 0.25) so that llama.cpp's
``w + 1`` on norms and our ``- 1`` are exact in float32.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

H, I, V, L = 64, 128, 128, 2
_ATTN = {"num_attention_heads": 4, "num_key_value_heads": 2}
_DENSE = {"hidden_size": H, "intermediate_size": I, "num_hidden_layers": L, "vocab_size": V, **_ATTN}

#: name -> (transformers model_type, config arguments)
#: the architectures also converted with ``--outtype q8_0``
QUANTIZED = ["llama", "gpt2", "qwen2_moe", "bloom", "gemma2"]

ARCHS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("llama", {**_DENSE, "tie_word_embeddings": False}),
    "mistral": ("mistral", {**_DENSE, "tie_word_embeddings": False}),
    "qwen2": ("qwen2", {**_DENSE, "tie_word_embeddings": False}),
    "qwen3": ("qwen3", {**_DENSE, "head_dim": 16, "tie_word_embeddings": False}),
    "qwen2_moe": ("qwen2_moe", {**_DENSE, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64,
                                "num_experts": 4, "num_experts_per_tok": 2, "tie_word_embeddings": False}),
    "qwen3_moe": ("qwen3_moe", {**_DENSE, "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2,
                                "head_dim": 16, "tie_word_embeddings": False}),
    "phi3": ("phi3", {**_DENSE, "pad_token_id": 0, "tie_word_embeddings": False}),
    "gemma": ("gemma", {**_DENSE, "head_dim": 16}),
    "gemma2": ("gemma2", {**_DENSE, "head_dim": 16}),
    "gemma3": ("gemma3_text", {**_DENSE, "head_dim": 16}),
    "gemma4": ("gemma4_text", {**_DENSE, "head_dim": 16, "global_head_dim": 32, "vocab_size_per_layer_input": V,
                               "hidden_size_per_layer_input": 16,
                               "layer_types": ["sliding_attention", "full_attention"]}),
    "gpt2": ("gpt2", {"n_embd": H, "n_layer": L, "n_head": 4, "vocab_size": V, "n_positions": 32, "n_ctx": 32}),
    "bloom": ("bloom", {"hidden_size": H, "n_layer": L, "n_head": 4, "vocab_size": V}),
    "falcon": ("falcon", {"hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 4, "vocab_size": V,
                          "new_decoder_architecture": True, "num_kv_heads": 2}),
    "falcon-7b": ("falcon", {"hidden_size": H, "num_hidden_layers": L, "num_attention_heads": 4, "vocab_size": V,
                             "multi_query": True, "parallel_attn": True, "bias": False, "num_kv_heads": 1}),
    "stablelm": ("stablelm", {**_DENSE, "num_key_value_heads": 4, "use_qkv_bias": True}),
    "starcoder2": ("starcoder2", _DENSE),
    "nemotron": ("nemotron", {**_DENSE, "head_dim": 16}),
    "mamba": ("mamba", {"hidden_size": H, "intermediate_size": I, "num_hidden_layers": L, "state_size": 16,
                        "time_step_rank": 8, "conv_kernel": 4, "vocab_size": V}),
    "lfm2": ("lfm2", {**_DENSE, "num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"],
                      "block_auto_adjust_ff_dim": False}),
    "minimax_m2": ("minimax_m2", {**_DENSE, "intermediate_size": 32, "head_dim": 16, "num_local_experts": 4,
                                  "num_experts_per_tok": 2, "rotary_dim": 8}),
    "qwen35": ("qwen3_5_text", {**_DENSE, "num_hidden_layers": 4, "head_dim": 16, "linear_key_head_dim": 16,
                                "linear_value_head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                                "layer_types": ["linear_attention"] * 3 + ["full_attention"]}),
    "qwen35moe": ("qwen3_5_moe_text", {**_DENSE, "num_hidden_layers": 4, "head_dim": 16, "linear_key_head_dim": 16,
                                       "linear_value_head_dim": 16, "linear_num_key_heads": 2,
                                       "linear_num_value_heads": 4, "moe_intermediate_size": 32,
                                       "shared_expert_intermediate_size": 32, "num_experts": 4,
                                       "num_experts_per_tok": 2,
                                       "layer_types": ["linear_attention"] * 3 + ["full_attention"]}),
    "t5": ("t5", {"d_model": H, "d_kv": 16, "d_ff": I, "num_layers": L, "num_decoder_layers": L, "num_heads": 4,
                  "vocab_size": V, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False,
                  "decoder_start_token_id": 0}),
    "t5encoder": ("t5", {"d_model": H, "d_kv": 16, "d_ff": I, "num_layers": L, "num_heads": 4, "vocab_size": V,
                         "feed_forward_proj": "gated-gelu"}),
    "umt5": ("umt5", {"d_model": H, "d_kv": 16, "d_ff": I, "num_layers": L, "num_decoder_layers": L,
                      "num_heads": 4, "vocab_size": V, "decoder_start_token_id": 0}),
}
SEQ2SEQ = frozenset({"t5", "umt5"})
#: converter options a model needs (the tiny Qwen3.5 has no multi-token-prediction block to export)
EXTRA_ARGS = {"qwen35": ["--no-mtp"], "qwen35moe": ["--no-mtp"]}
#: the GGUF ``general.architecture`` each model is written as by llama.cpp
GGUF_ARCH = {"mistral": "llama", "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "falcon-7b": "falcon",
             "minimax_m2": "minimax-m2", "umt5": "t5"}


def converter_root() -> Path | None:
    """llama.cpp's converter (``convert_hf_to_gguf.py`` with ``conversion/`` and ``gguf-py/``), if unpacked."""
    env = os.environ.get("PYSAFETENSORS_LLAMA_CPP")
    for candidate in ([Path(env)] if env else []) + [Path(sys.prefix) / "llama.cpp"]:
        if (candidate / "convert_hf_to_gguf.py").is_file() and (candidate / "gguf-py").is_dir():
            return candidate
    return None


def model_class(name: str) -> Any:
    import transformers

    if name == "t5encoder":
        return transformers.T5EncoderModel
    return transformers.AutoModelForSeq2SeqLM if name in SEQ2SEQ else transformers.AutoModelForCausalLM


def new_model(name: str, config: Any) -> Any:
    """A model of ``name``'s class from ``config``, with fresh weights."""
    cls = model_class(name)
    return cls(config) if name == "t5encoder" else cls.from_config(config)


def build_model(name: str, directory: Path) -> Path:
    """A tiny ``name`` model saved by transformers (``save_pretrained``) into ``directory``, with
    a minimal ``tokenizer.json`` (the gemma converters read the vocabulary size from it)."""
    import torch
    from transformers import AutoConfig

    model_type, kwargs = ARCHS[name]
    config = AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(0)
    model = new_model(name, config)
    generator = torch.Generator().manual_seed(sum(map(ord, name)))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_((torch.randint(-1024, 1024, p.shape, generator=generator) / 4096).to(p.dtype))
    model.save_pretrained(directory)
    vocab = {f"<t{i}>": i for i in range(config.vocab_size)}
    (directory / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}, "added_tokens": []}))
    return directory


def convert(root: Path, jobs: list[list[str]], log: Path) -> None:
    """Run the converter on every job in one process (``llamacpp_driver.py``)."""
    spec = log.with_suffix(".jobs.json")
    spec.write_text(json.dumps(jobs))
    driver = Path(__file__).with_name("llamacpp_driver.py")
    with open(log, "w") as out:
        done = subprocess.run([sys.executable, str(driver), str(root), str(spec)], stdout=out,
                              stderr=subprocess.STDOUT, timeout=900, check=False)
    if done.returncode:
        raise RuntimeError(f"llama.cpp's converter failed (log: {log}):\n{log.read_text()[-4000:]}")


def build_all(workdir: Path, names: list[str], quantized: list[str]) -> dict[str, dict[str, Path]]:
    """Each model built and converted: ``{name: {"hf": dir, "f32": gguf, "q8_0": gguf}}``."""
    root = converter_root()
    assert root is not None
    out: dict[str, dict[str, Path]] = {}
    jobs = []
    for name in names:
        hf = build_model(name, workdir / f"tiny-{name}")
        out[name] = {"hf": hf}
        for outtype in ["f32"] + (["q8_0"] if name in quantized else []):
            path = workdir / f"{name}-{outtype}.gguf"
            out[name][outtype] = path
            jobs.append([str(hf), "--outtype", outtype, "--outfile", str(path), *EXTRA_ARGS.get(name, [])])
    if "llama" in out:  # a split set as llama.cpp writes one (convert_hf_to_gguf.py --split-max-tensors)
        (workdir / "split").mkdir()
        jobs.append([str(out["llama"]["hf"]), "--outtype", "f32", "--split-max-tensors", "8", "--outfile",
                     str(workdir / "split" / "llama.gguf")])
    convert(root, jobs, workdir / "convert.log")
    if "llama" in out:
        out["llama"]["split"] = sorted((workdir / "split").glob("llama-*-of-*.gguf"))  # type: ignore[assignment]
    return out
