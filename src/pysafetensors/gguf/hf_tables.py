"""GGUF -> Hugging Face, architecture by architecture: for each kind of tensor, its name and the
layout change that puts back what llama.cpp's ``convert_hf_to_gguf.py`` changed.

Each :class:`Rule` names one kind of tensor (``blk.{N}.attn_q{S}``: ``{N}`` a block number,
``{S}`` ``.weight`` or ``.bias``), the Hugging Face name it has in the checkpoint transformers
saves (``model.layers.{N}.self_attn.q_proj{S}``; ``{E}`` numbers the pieces of a split tensor),
and an :data:`OPS` entry.  The names are those of ``save_pretrained``'s files, which is what
transformers' ``from_pretrained`` loads and what a Hub checkpoint holds: per-expert tensors for
the MoE models (``mlp.experts.{E}.gate_proj.weight``), where transformers 5 fuses them in memory.
Every row was derived from transformers 5.24's GGUF loader (``GGUF_TO_TRANSFORMERS_MAPPING``,
its ``TENSOR_PROCESSORS``) and gguf-py 0.19's ``TensorNameMap``, and checked against both by
the tests, which convert tiny models with llama.cpp's converter (``tests/gguf/llamacpp.py``).

This module is data only; :mod:`pysafetensors.gguf.hf_map` plans and reads with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the layout changes a rule can ask for, and what each undoes
OPS: dict[str, str] = {
    "": "the values as stored",
    "q": "q rows regrouped per head by llama.cpp's permute, put back (head_count heads)",
    "k": "k rows regrouped per head by llama.cpp's permute, put back (head_count_kv heads)",
    "minus1": "stored as w + 1 (the model adds 1 in its norm): 1 subtracted",
    "T": "transposed by llama.cpp (Conv1D weights): transposed back",
    "log_neg": "stored as -exp(A_log): log(-x) taken back (not bit-exact against the source: exp/log round)",
    "unsqueeze1": "squeezed to 2-D by llama.cpp: the size-1 middle dimension put back",
    "row_vector": "a 1-D vector stored by older converters: made the 1 x n matrix the model has",
    "split": "stacked by llama.cpp (experts, per-head norms): split back, one tensor per slice {E}",
    "bloom_qkv": "q/k/v rows de-interleaved by llama.cpp: interleaved back per head",
    "falcon_qkv": "q/k/v rows regrouped by llama.cpp: put back in kv groups (n_head/n_kv q heads, k, v)",
    "v_rows": "linear-attention value heads tiled by llama.cpp (v0k0 v0k1 v1k0...): rows grouped back by key head",
    "v_rows_tail": "as v_rows, for the value rows after the fused q and k rows",
    "h_rows": "as v_rows, one row per value head",
    "v_cols": "as v_rows, on the columns (the tensor that takes the value heads in)",
}


@dataclass(frozen=True)
class Rule:
    """One kind of tensor: its GGUF name pattern, its Hugging Face name, the layout change.

    ``present``/``absent``: the rule applies only when the file holds / lacks that tensor (same
    block), for names that depend on the model's layout (falcon's one or two attention norms).
    """

    gguf: str
    hf: str
    op: str = ""
    present: str | None = None
    absent: str | None = None


@dataclass(frozen=True)
class ArchTable:
    """One ``general.architecture``'s rules (first match wins), the tensors llama.cpp generates
    that the checkpoint does not have (pattern -> why they are left out), and how transformers'
    own GGUF loader fares on the architecture (``transformers``: "" when it loads exactly this)."""

    arch: str
    rules: tuple[Rule, ...]
    dropped: dict[str, str] = field(default_factory=dict)
    transformers: str = ""
    #: the metadata key (after ``<arch>.``) counting the multi-token-prediction blocks llama.cpp
    #: appends after the model's layers; transformers has no module for them, so they are left out
    mtp_key: str | None = None


def _dense(q: str = "", k: str = "", norm: str = "", prefix: str = "model") -> tuple[Rule, ...]:
    """The llama-like decoder: embeddings, attention, gated MLP, RMS norms (with biases where the
    file has them)."""
    p, b = prefix, f"{prefix}.layers.{{N}}"
    return (
        Rule("token_embd.weight", f"{p}.embed_tokens.weight"),
        Rule("output_norm{S}", f"{p}.norm{{S}}", norm),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm{S}", f"{b}.input_layernorm{{S}}", norm),
        Rule("blk.{N}.ffn_norm{S}", f"{b}.post_attention_layernorm{{S}}", norm),
        Rule("blk.{N}.attn_q{S}", f"{b}.self_attn.q_proj{{S}}", q),
        Rule("blk.{N}.attn_k{S}", f"{b}.self_attn.k_proj{{S}}", k),
        Rule("blk.{N}.attn_v{S}", f"{b}.self_attn.v_proj{{S}}"),
        Rule("blk.{N}.attn_output{S}", f"{b}.self_attn.o_proj{{S}}"),
        Rule("blk.{N}.attn_q_norm.weight", f"{b}.self_attn.q_norm.weight", norm),
        Rule("blk.{N}.attn_k_norm.weight", f"{b}.self_attn.k_norm.weight", norm),
        Rule("blk.{N}.ffn_gate{S}", f"{b}.mlp.gate_proj{{S}}"),
        Rule("blk.{N}.ffn_up{S}", f"{b}.mlp.up_proj{{S}}"),
        Rule("blk.{N}.ffn_down{S}", f"{b}.mlp.down_proj{{S}}"),
    )


def _only_weights(rules: tuple[Rule, ...], op: str) -> tuple[Rule, ...]:
    """``rules`` with ``op`` on the ``norm.weight`` tensors alone (their biases stay as stored)."""
    out: list[Rule] = []
    for r in rules:
        if r.op == op and r.gguf.endswith("{S}"):
            out.append(Rule(r.gguf[:-3] + ".weight", r.hf.replace("{S}", ".weight"), op))
            out.append(Rule(r.gguf[:-3] + ".bias", r.hf.replace("{S}", ".bias")))
        else:
            out.append(r)
    return tuple(out)


_MOE = (
    Rule("blk.{N}.ffn_gate_inp.weight", "model.layers.{N}.mlp.gate.weight"),
    Rule("blk.{N}.ffn_gate_exps.weight", "model.layers.{N}.mlp.experts.{E}.gate_proj.weight", "split"),
    Rule("blk.{N}.ffn_up_exps.weight", "model.layers.{N}.mlp.experts.{E}.up_proj.weight", "split"),
    Rule("blk.{N}.ffn_down_exps.weight", "model.layers.{N}.mlp.experts.{E}.down_proj.weight", "split"),
)
_SHARED_EXPERT = (
    Rule("blk.{N}.ffn_gate_inp_shexp.weight", "model.layers.{N}.mlp.shared_expert_gate.weight", "row_vector"),
    Rule("blk.{N}.ffn_gate_shexp.weight", "model.layers.{N}.mlp.shared_expert.gate_proj.weight"),
    Rule("blk.{N}.ffn_up_shexp.weight", "model.layers.{N}.mlp.shared_expert.up_proj.weight"),
    Rule("blk.{N}.ffn_down_shexp.weight", "model.layers.{N}.mlp.shared_expert.down_proj.weight"),
)
_ROPE_FREQS = {"rope_freqs.weight": "rotary frequency factors llama.cpp computes from the config's rope scaling"}
# gemma 2-4's norms (the op is the caller's: gemma 2 and 3 store them as w + 1, gemma 4 as they are)
_GEMMA_NORMS = (
    Rule("output_norm.weight", "model.norm.weight"),
    Rule("blk.{N}.attn_norm.weight", "model.layers.{N}.input_layernorm.weight"),
    Rule("blk.{N}.post_attention_norm.weight", "model.layers.{N}.post_attention_layernorm.weight"),
    Rule("blk.{N}.ffn_norm.weight", "model.layers.{N}.pre_feedforward_layernorm.weight"),
    Rule("blk.{N}.post_ffw_norm.weight", "model.layers.{N}.post_feedforward_layernorm.weight"),
    Rule("blk.{N}.attn_q_norm.weight", "model.layers.{N}.self_attn.q_norm.weight"),
    Rule("blk.{N}.attn_k_norm.weight", "model.layers.{N}.self_attn.k_norm.weight"),
)


def _gemma_rules(shift: str) -> tuple[Rule, ...]:
    norms = tuple(Rule(r.gguf, r.hf, shift) for r in _GEMMA_NORMS)
    return norms + _dense()


_T5_BLOCK = (
    ("attn_q.weight", "layer.0.SelfAttention.q.weight"),
    ("attn_k.weight", "layer.0.SelfAttention.k.weight"),
    ("attn_v.weight", "layer.0.SelfAttention.v.weight"),
    ("attn_o.weight", "layer.0.SelfAttention.o.weight"),
    ("attn_rel_b.weight", "layer.0.SelfAttention.relative_attention_bias.weight"),
    ("attn_norm.weight", "layer.0.layer_norm.weight"),
)
_T5_CROSS = (
    ("cross_attn_q.weight", "layer.1.EncDecAttention.q.weight"),
    ("cross_attn_k.weight", "layer.1.EncDecAttention.k.weight"),
    ("cross_attn_v.weight", "layer.1.EncDecAttention.v.weight"),
    ("cross_attn_o.weight", "layer.1.EncDecAttention.o.weight"),
    ("cross_attn_norm.weight", "layer.1.layer_norm.weight"),
)


def _t5_ffn(layer: int) -> tuple[tuple[str, str], ...]:
    return (
        ("ffn_gate.weight", f"layer.{layer}.DenseReluDense.wi_0.weight"),
        ("ffn_up.weight", f"layer.{layer}.DenseReluDense.wi_1.weight"),  # gated: wi_1; plain ReLU: wi
        ("ffn_down.weight", f"layer.{layer}.DenseReluDense.wo.weight"),
        ("ffn_norm.weight", f"layer.{layer}.layer_norm.weight"),
    )


def _t5_rules(decoder: bool) -> tuple[Rule, ...]:
    rules = [Rule("token_embd.weight", "shared.weight"), Rule("output.weight", "lm_head.weight"),
             Rule("enc.output_norm.weight", "encoder.final_layer_norm.weight")]
    enc = _T5_BLOCK + _t5_ffn(1)
    # A T5 with a plain (ungated) ReLU MLP has wi, not wi_0/wi_1: ffn_up is wi when there is no ffn_gate.
    rules.append(Rule("enc.blk.{N}.ffn_up.weight", "encoder.block.{N}.layer.1.DenseReluDense.wi.weight",
                      absent="enc.blk.{N}.ffn_gate.weight"))
    rules += [Rule(f"enc.blk.{{N}}.{g}", f"encoder.block.{{N}}.{h}") for g, h in enc]
    if decoder:
        rules.append(Rule("dec.output_norm.weight", "decoder.final_layer_norm.weight"))
        rules.append(Rule("dec.blk.{N}.ffn_up.weight", "decoder.block.{N}.layer.2.DenseReluDense.wi.weight",
                          absent="dec.blk.{N}.ffn_gate.weight"))
        dec = _T5_BLOCK + _T5_CROSS + _t5_ffn(2)
        rules += [Rule(f"dec.blk.{{N}}.{g}", f"decoder.block.{{N}}.{h}") for g, h in dec]
    return tuple(rules)


_FALCON = "transformer.h.{N}"
_GPT2 = "transformer.h.{N}"

TABLES: dict[str, ArchTable] = {t.arch: t for t in (
    ArchTable("llama", _dense(q="q", k="k"), _ROPE_FREQS,
              transformers="a file whose general.name is exactly 'mistral' is refused by transformers' loader "
                            "(it asks gguf-py for a 'mistral' architecture it does not have); otherwise loaded as this"),
    ArchTable("qwen2", _dense()),
    ArchTable("qwen3", _dense()),
    ArchTable("qwen2moe", _dense() + _MOE + _SHARED_EXPERT,
              transformers="transformers' loader makes ffn_gate_inp_shexp a (1, 1, n) tensor, which does not "
                            "fit the model's (1, n) shared_expert_gate; the files llama.cpp writes today hold (1, n)"),
    ArchTable("qwen3moe", _dense() + _MOE),
    ArchTable("phi3", (
        Rule("token_embd.weight", "model.embed_tokens.weight"),
        Rule("output_norm.weight", "model.norm.weight"),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm.weight", "model.layers.{N}.input_layernorm.weight"),
        Rule("blk.{N}.ffn_norm.weight", "model.layers.{N}.post_attention_layernorm.weight"),
        Rule("blk.{N}.attn_qkv.weight", "model.layers.{N}.self_attn.qkv_proj.weight"),
        Rule("blk.{N}.attn_output.weight", "model.layers.{N}.self_attn.o_proj.weight"),
        Rule("blk.{N}.ffn_up.weight", "model.layers.{N}.mlp.gate_up_proj.weight"),
        Rule("blk.{N}.ffn_down.weight", "model.layers.{N}.mlp.down_proj.weight"),
    ), {"rope_factors_long.weight": "long-context rope factors llama.cpp copies from the config",
        "rope_factors_short.weight": "short-context rope factors llama.cpp copies from the config"}),
    ArchTable("gemma", _only_weights(_dense(norm="minus1"), "minus1"),
              transformers="transformers' GGUF loader does not list gemma (1): it refuses such a file"),
    ArchTable("gemma2", _gemma_rules("minus1")),
    ArchTable("gemma3", _gemma_rules("minus1")),
    ArchTable("gemma4", _gemma_rules("") + (
        Rule("per_layer_token_embd.weight", "model.embed_tokens_per_layer.weight"),
        Rule("per_layer_model_proj.weight", "model.per_layer_model_projection.weight"),
        Rule("per_layer_proj_norm.weight", "model.per_layer_projection_norm.weight"),
        Rule("blk.{N}.inp_gate.weight", "model.layers.{N}.per_layer_input_gate.weight"),
        Rule("blk.{N}.proj.weight", "model.layers.{N}.per_layer_projection.weight"),
        Rule("blk.{N}.post_norm.weight", "model.layers.{N}.post_per_layer_input_norm.weight"),
        Rule("blk.{N}.layer_output_scale.weight", "model.layers.{N}.layer_scalar"),
    ), _ROPE_FREQS, transformers="transformers' loader has no name for layer_output_scale: the model's "
                                 "layer_scalar keeps its initial value"),
    ArchTable("gpt2", (
        Rule("token_embd.weight", "transformer.wte.weight"),
        Rule("position_embd.weight", "transformer.wpe.weight"),
        Rule("output_norm{S}", "transformer.ln_f{S}"),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm{S}", f"{_GPT2}.ln_1{{S}}"),
        Rule("blk.{N}.ffn_norm{S}", f"{_GPT2}.ln_2{{S}}"),
        Rule("blk.{N}.attn_qkv.weight", f"{_GPT2}.attn.c_attn.weight", "T"),
        Rule("blk.{N}.attn_qkv.bias", f"{_GPT2}.attn.c_attn.bias"),
        Rule("blk.{N}.attn_output.weight", f"{_GPT2}.attn.c_proj.weight", "T"),
        Rule("blk.{N}.attn_output.bias", f"{_GPT2}.attn.c_proj.bias"),
        Rule("blk.{N}.ffn_up.weight", f"{_GPT2}.mlp.c_fc.weight", "T"),
        Rule("blk.{N}.ffn_up.bias", f"{_GPT2}.mlp.c_fc.bias"),
        Rule("blk.{N}.ffn_down.weight", f"{_GPT2}.mlp.c_proj.weight", "T"),
        Rule("blk.{N}.ffn_down.bias", f"{_GPT2}.mlp.c_proj.bias"),
    )),
    ArchTable("bloom", (
        Rule("token_embd.weight", "transformer.word_embeddings.weight"),
        Rule("token_embd_norm{S}", "transformer.word_embeddings_layernorm{S}"),
        Rule("output_norm{S}", "transformer.ln_f{S}"),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm{S}", "transformer.h.{N}.input_layernorm{S}"),
        Rule("blk.{N}.ffn_norm{S}", "transformer.h.{N}.post_attention_layernorm{S}"),
        Rule("blk.{N}.attn_qkv{S}", "transformer.h.{N}.self_attention.query_key_value{S}", "bloom_qkv"),
        Rule("blk.{N}.attn_output{S}", "transformer.h.{N}.self_attention.dense{S}"),
        Rule("blk.{N}.ffn_up{S}", "transformer.h.{N}.mlp.dense_h_to_4h{S}"),
        Rule("blk.{N}.ffn_down{S}", "transformer.h.{N}.mlp.dense_4h_to_h{S}"),
    )),
    ArchTable("falcon", (
        Rule("token_embd.weight", "transformer.word_embeddings.weight"),
        Rule("output_norm{S}", "transformer.ln_f{S}"),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm{S}", f"{_FALCON}.ln_mlp{{S}}", present="blk.{N}.attn_norm_2.weight"),
        Rule("blk.{N}.attn_norm{S}", f"{_FALCON}.input_layernorm{{S}}"),
        Rule("blk.{N}.attn_norm_2{S}", f"{_FALCON}.ln_attn{{S}}"),
        Rule("blk.{N}.ffn_norm{S}", f"{_FALCON}.post_attention_layernorm{{S}}"),
        Rule("blk.{N}.attn_qkv.weight", f"{_FALCON}.self_attention.query_key_value.weight", "falcon_qkv"),
        Rule("blk.{N}.attn_output{S}", f"{_FALCON}.self_attention.dense{{S}}"),
        Rule("blk.{N}.ffn_up{S}", f"{_FALCON}.mlp.dense_h_to_4h{{S}}"),
        Rule("blk.{N}.ffn_down{S}", f"{_FALCON}.mlp.dense_4h_to_h{{S}}"),
    ), transformers="transformers' loader leaves the fused query_key_value rows regrouped as llama.cpp "
                    "stored them (it has no falcon tensor processor): wrong wherever head_count_kv > 1"),
    # qk_layernorm models keep one norm per head; llama.cpp stacks them into attn_q_norm/attn_k_norm
    ArchTable("stablelm", (
        Rule("blk.{N}.attn_q_norm.weight", "model.layers.{N}.self_attn.q_layernorm.norms.{E}.weight", "split"),
        Rule("blk.{N}.attn_k_norm.weight", "model.layers.{N}.self_attn.k_layernorm.norms.{E}.weight", "split"),
    ) + _dense()),
    ArchTable("starcoder2", (
        Rule("blk.{N}.ffn_up{S}", "model.layers.{N}.mlp.c_fc{S}"),
        Rule("blk.{N}.ffn_down{S}", "model.layers.{N}.mlp.c_proj{S}"),
    ) + _dense()),
    ArchTable("nemotron", _only_weights(_dense(norm="minus1"), "minus1")),
    ArchTable("mamba", (
        Rule("token_embd.weight", "backbone.embeddings.weight"),
        Rule("output_norm.weight", "backbone.norm_f.weight"),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm.weight", "backbone.layers.{N}.norm.weight"),
        Rule("blk.{N}.ssm_in.weight", "backbone.layers.{N}.mixer.in_proj.weight"),
        Rule("blk.{N}.ssm_conv1d.weight", "backbone.layers.{N}.mixer.conv1d.weight", "unsqueeze1"),
        Rule("blk.{N}.ssm_conv1d.bias", "backbone.layers.{N}.mixer.conv1d.bias"),
        Rule("blk.{N}.ssm_x.weight", "backbone.layers.{N}.mixer.x_proj.weight"),
        Rule("blk.{N}.ssm_dt{S}", "backbone.layers.{N}.mixer.dt_proj{S}"),
        Rule("blk.{N}.ssm_a", "backbone.layers.{N}.mixer.A_log", "log_neg"),
        Rule("blk.{N}.ssm_d", "backbone.layers.{N}.mixer.D"),
        Rule("blk.{N}.ssm_out.weight", "backbone.layers.{N}.mixer.out_proj.weight"),
    )),
    ArchTable("lfm2", (
        Rule("token_embd.weight", "model.embed_tokens.weight"),
        Rule("token_embd_norm.weight", "model.embedding_norm.weight"),
        Rule("output.weight", "lm_head.weight"),
        Rule("blk.{N}.attn_norm.weight", "model.layers.{N}.operator_norm.weight"),
        Rule("blk.{N}.ffn_norm.weight", "model.layers.{N}.ffn_norm.weight"),
        Rule("blk.{N}.attn_q.weight", "model.layers.{N}.self_attn.q_proj.weight"),
        Rule("blk.{N}.attn_k.weight", "model.layers.{N}.self_attn.k_proj.weight"),
        Rule("blk.{N}.attn_v.weight", "model.layers.{N}.self_attn.v_proj.weight"),
        Rule("blk.{N}.attn_output.weight", "model.layers.{N}.self_attn.out_proj.weight"),
        Rule("blk.{N}.attn_q_norm.weight", "model.layers.{N}.self_attn.q_layernorm.weight"),
        Rule("blk.{N}.attn_k_norm.weight", "model.layers.{N}.self_attn.k_layernorm.weight"),
        Rule("blk.{N}.ffn_gate.weight", "model.layers.{N}.feed_forward.w1.weight"),
        Rule("blk.{N}.ffn_up.weight", "model.layers.{N}.feed_forward.w3.weight"),
        Rule("blk.{N}.ffn_down.weight", "model.layers.{N}.feed_forward.w2.weight"),
        Rule("blk.{N}.shortconv.conv.weight", "model.layers.{N}.conv.conv.weight", "unsqueeze1"),
        Rule("blk.{N}.shortconv.in_proj{S}", "model.layers.{N}.conv.in_proj{S}"),
        Rule("blk.{N}.shortconv.out_proj{S}", "model.layers.{N}.conv.out_proj{S}"),
    )),
    ArchTable("minimax-m2", (
        Rule("blk.{N}.ffn_gate_inp.weight", "model.layers.{N}.block_sparse_moe.gate.weight"),
        Rule("blk.{N}.exp_probs_b.bias", "model.layers.{N}.block_sparse_moe.e_score_correction_bias"),
        Rule("blk.{N}.ffn_gate_exps.weight", "model.layers.{N}.block_sparse_moe.experts.{E}.w1.weight", "split"),
        Rule("blk.{N}.ffn_down_exps.weight", "model.layers.{N}.block_sparse_moe.experts.{E}.w2.weight", "split"),
        Rule("blk.{N}.ffn_up_exps.weight", "model.layers.{N}.block_sparse_moe.experts.{E}.w3.weight", "split"),
    ) + _dense()),
    ArchTable("t5", _t5_rules(decoder=True)),
    ArchTable("t5encoder", _t5_rules(decoder=False)),
)}

_QWEN35 = _dense(norm="minus1") + (
    Rule("blk.{N}.post_attention_norm.weight", "model.layers.{N}.post_attention_layernorm.weight", "minus1"),
    Rule("blk.{N}.attn_qkv.weight", "model.layers.{N}.linear_attn.in_proj_qkv.weight", "v_rows_tail"),
    Rule("blk.{N}.attn_gate.weight", "model.layers.{N}.linear_attn.in_proj_z.weight", "v_rows"),
    Rule("blk.{N}.ssm_alpha.weight", "model.layers.{N}.linear_attn.in_proj_a.weight", "h_rows"),
    Rule("blk.{N}.ssm_beta.weight", "model.layers.{N}.linear_attn.in_proj_b.weight", "h_rows"),
    Rule("blk.{N}.ssm_conv1d.weight", "model.layers.{N}.linear_attn.conv1d.weight", "v_rows_tail+unsqueeze1"),
    Rule("blk.{N}.ssm_norm.weight", "model.layers.{N}.linear_attn.norm.weight"),  # the one norm not shifted
    Rule("blk.{N}.ssm_out.weight", "model.layers.{N}.linear_attn.out_proj.weight", "v_cols"),
    Rule("blk.{N}.ssm_a", "model.layers.{N}.linear_attn.A_log", "log_neg+h_rows"),
    Rule("blk.{N}.ssm_dt.bias", "model.layers.{N}.linear_attn.dt_bias", "h_rows"),
)
_MTP = "nextn_predict_layers"

TABLES.update({t.arch: t for t in (
    ArchTable("qwen35", _QWEN35, mtp_key=_MTP),
    ArchTable("qwen35moe", _QWEN35 + _MOE + _SHARED_EXPERT, mtp_key=_MTP),
)})

#: transformers' GGUF loader (5.24) lists these, and ``--hf-names`` does not map them (why)
NOT_MAPPED: dict[str, str] = {
    "gpt-oss": "transformers' loader fails on gpt-oss files (its config parsing raises TypeError), and llama.cpp "
               "splits the fused, interleaved gate_up_proj experts into transposed gate and up stacks",
    "deci": "transformers has no DeciLM model (it is remote code): nothing in transformers loads these weights",
}

__all__ = ["NOT_MAPPED", "OPS", "TABLES", "ArchTable", "Rule"]
