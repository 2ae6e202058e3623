"""inspect: repeated blocks (text and JSON), the tree that shows a block once, and ``--depth``.

The models: all-MiniLM-L6-v2 (6 BERT layers; upstream safetensors reads the oracle shapes) and a
32-layer llama-like checkpoint written here, whole and with one layer that differs.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import run_cli

LAYER = [("self_attn.q_proj.weight", (16, 16)), ("self_attn.k_proj.weight", (4, 16)),
         ("self_attn.v_proj.weight", (4, 16)), ("self_attn.o_proj.weight", (16, 16)),
         ("mlp.gate_proj.weight", (40, 16)), ("mlp.up_proj.weight", (40, 16)), ("mlp.down_proj.weight", (16, 40)),
         ("input_layernorm.weight", (16,)), ("post_attention_layernorm.weight", (16,))]
PER_LAYER = sum(math.prod(s) for _, s in LAYER)


def llama(path: Path, layers: int = 32, odd: int | None = None) -> Path:
    """A llama-like checkpoint: ``layers`` decoder layers; layer ``odd``'s up_proj 8 rows wider."""
    from pysafetensors.numpy import save_file

    tensors = {"model.embed_tokens.weight": np.zeros((50, 16), np.float16), "model.norm.weight": np.zeros(16, np.float16),
               "lm_head.weight": np.zeros((50, 16), np.float16)}
    for i in range(layers):
        for name, shape in LAYER:
            if i == odd and name == "mlp.up_proj.weight":
                shape = (48, 16)
            tensors[f"model.layers.{i}.{name}"] = np.zeros(shape, np.float16)
    save_file(tensors, str(path))
    return path


def tree_part(out: str) -> list[str]:
    return out.split("\ntree (", 1)[1].splitlines()[1:]


def test_minilm_summary_names_its_six_layers(real_model: Path) -> None:
    from safetensors import safe_open

    with safe_open(str(real_model), framework="numpy") as f:
        layer = sum(math.prod(f.get_slice(k).get_shape()) for k in list(f.keys()) if k.startswith("encoder.layer.0."))
    out = run_cli("inspect", real_model).out
    assert ("repeated blocks:\n  encoder.layer.[0–5] × 6: 16 tensors and "
            f"{layer:,} params each; {6 * layer:,} params in all (46.9%)\nmetadata:") in out
    data = json.loads(run_cli("inspect", real_model, "--json").out)
    (block,) = data["repeated_blocks"]
    assert block == {"path": "encoder.layer", "label": "encoder.layer.[0–5] × 6", "indices": [0, 1, 2, 3, 4, 5],
                     "count": 6, "tensors": 16, "parameters": layer, "nbytes": 4 * layer, "copies": 6,
                     "total_parameters": 6 * layer, "total_nbytes": 24 * layer, "differing": [],
                     "whole_group": True, "nested": False}


def test_minilm_tree_shows_one_layer(real_model: Path) -> None:
    lines = tree_part(run_cli("inspect", real_model, "--tree").out)
    assert "    layer.[0–5] × 6/  16 tensors and 1,774,464 params each; 10,646,784 params in all (46.9%)" in lines
    assert sum("query/" in ln for ln in lines) == 1  # one layer's attention, not six
    assert not [ln for ln in lines if re.match(r"\s+[0-5]/", ln)]
    assert len([ln for ln in lines if " F32 " in ln or " I64 " in ln]) == 104 - 5 * 16  # tensors shown once


def test_a_32_layer_model_prints_one_layer(tmp_path: Path) -> None:
    path = llama(tmp_path / "llama.safetensors")
    out = run_cli("inspect", path, "--tree").out
    assert (f"  model.layers.[0–31] × 32: 9 tensors and {PER_LAYER:,} params each; {32 * PER_LAYER:,} params in all"
            in out)
    lines = tree_part(out)
    assert lines[:3] == ["  lm_head/  800 params, 1 tensor", "    weight  F16 [50, 16]  800 params",
                         f"  model/  {816 + 32 * PER_LAYER:,} params, 290 tensors"]
    block = lines.index(f"    layers.[0–31] × 32/  9 tensors and {PER_LAYER:,} params each; "
                        f"{32 * PER_LAYER:,} params in all ({100 * 32 * PER_LAYER / (1616 + 32 * PER_LAYER):.1f}%)")
    assert lines[block + 1:block + 3] == ["      input_layernorm/  16 params, 1 tensor",
                                          "        weight  F16 [16]  16 params"]
    # lm_head (2 lines), model, embed_tokens (2), the block, one layer (9 tensors in 11 groups), norm (2)
    assert len(lines) == 2 + 1 + 2 + 1 + 20 + 2
    data = json.loads(run_cli("inspect", path, "--json").out)
    assert [b["label"] for b in data["repeated_blocks"]] == ["model.layers.[0–31] × 32"]


def test_a_layer_that_differs_is_shown_beside_the_block(tmp_path: Path) -> None:
    path = llama(tmp_path / "odd.safetensors", odd=5)
    out = run_cli("inspect", path, "--tree").out
    assert ("  model.layers.[0–4, 6–31] × 31: 9 tensors and 2,592 params each; 80,352 params in all (94.9%)\n"
            "    model.layers.5 is not in it: mlp.up_proj.weight is F16 [48, 16], the block's F16 [40, 16]\n") in out
    lines = tree_part(out)
    assert "    layers/  83,072 params, 288 tensors" in lines  # the group is not the block: shown as itself
    block = lines.index("      [0–4, 6–31] × 31/  9 tensors and 2,592 params each; 80,352 params in all (94.9%)")
    five = lines.index("      5/  2,720 params, 9 tensors  (not in [0–4, 6–31] × 31: mlp.up_proj.weight is "
                       "F16 [48, 16], the block's F16 [40, 16])")
    assert block < five and "            weight  F16 [48, 16]  768 params" in lines[five:]
    (block_json,) = json.loads(run_cli("inspect", path, "--json").out)["repeated_blocks"]
    assert block_json["indices"] == [i for i in range(32) if i != 5] and not block_json["whole_group"]
    assert block_json["differing"] == [{"index": 5, "path": "model.layers.5",
                                        "reason": "mlp.up_proj.weight is F16 [48, 16], the block's F16 [40, 16]"}]


def test_depth_limits_the_tree(real_model: Path) -> None:
    full = tree_part(run_cli("inspect", real_model, "--tree").out)
    for depth in (1, 2, 4):
        r = run_cli("inspect", real_model, "--depth", str(depth))  # --depth implies --tree
        assert r.code == 0 and f"tree (22,713,728 params, {depth} level{'s' if depth > 1 else ''}):" in r.out
        lines = tree_part(r.out)
        assert lines == [ln for ln in full if (len(ln) - len(ln.lstrip())) // 2 <= depth]
    assert [ln.strip().split("/")[0] for ln in tree_part(run_cli("inspect", real_model, "--depth", "1").out)] == [
        "embeddings", "encoder", "pooler"]
    tree = json.loads(run_cli("inspect", real_model, "--tree", "--depth", "2", "--json").out)["tree"]
    assert [c["label"] for c in tree["children"]] == ["embeddings", "encoder", "pooler"]
    encoder = tree["children"][1]
    assert [c["label"] for c in encoder["children"]] == ["layer"] and encoder["children"][0]["children"] == []
    assert encoder["children"][0]["tensors"] == 96  # the totals stay


@pytest.mark.parametrize("bad", ["0", "-1", "x"])
def test_a_bad_depth_is_a_usage_error(real_model: Path, bad: str) -> None:
    r = run_cli("inspect", real_model, "--depth", bad)
    assert r.code == 2 and "number of levels" in r.err


def test_the_tree_sorts_numbers_by_value(tmp_path: Path) -> None:
    path = llama(tmp_path / "l.safetensors", layers=12, odd=10)
    lines = tree_part(run_cli("inspect", path, "--depth", "3").out)
    groups = [ln.strip().split("/")[0] for ln in lines if ln.startswith("      ") and "/" in ln]
    assert groups == ["[0–9, 11] × 11", "10"]
    names = [n["label"] for n in json.loads(run_cli("inspect", path, "--tree", "--json").out)["tree"]["children"][1]
             ["children"][1]["children"]]
    assert names == [str(i) for i in range(12)]  # 2 before 10


_parts = ["0", "1", "2", "10", "01", "a", "b", "", "h9", "h10"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_parts), min_size=1, max_size=3).map(".".join).flatmap(
    lambda block: st.tuples(st.just(block), st.sets(st.sampled_from([0, 1, 2, 9, 10, 11]), min_size=1),
                            st.sets(st.lists(st.sampled_from(_parts), min_size=1, max_size=4).map(".".join),
                                    max_size=12))))
def test_the_text_tree_from_either_grouping_is_the_same(case: tuple[str, set[int], set[str]]) -> None:
    # inspect draws the text tree from name_order_groups, sorting the siblings it shows;
    # prefix_groups lists them in natural order already: the lines must be the same.
    import dataclasses
    import tempfile

    from pysafetensors.cli.inspect import render_inspect
    from pysafetensors.numpy import save_file
    from pysafetensors.tools.summary import summarize

    block, layers, strays = case
    names = {f"x.{i}.{block}" for i in layers} | {f"{i}.{block}" for i in layers} | strays
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "m.safetensors")
        save_file({n: np.zeros(len(n) % 3 + 1, np.float32) for n in names}, path)
        by_name, natural = summarize(path, rows=False), summarize(path, tree=True, rows=False)
    assert by_name._groups is not None and not by_name._groups[0].natural
    assert natural._groups is not None and natural._groups[0].natural
    for depth in (None, 1, 2):
        assert render_inspect(by_name, tree=True, depth=depth) == render_inspect(
            dataclasses.replace(natural, tree=None), tree=True, depth=depth)
