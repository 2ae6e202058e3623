"""Repeated blocks and the tree's columns in a real browser (Debian's Chromium driven by Playwright):
MiniLM's six BERT layers and a 32-layer llama-like model built here (whole, and with one layer that
differs) are shown once, as ``layers.[0–31] × 32`` with per-block and total parameters, expandable
to each layer; natural order (layer 2 before 10) in the tree and the table; expand/collapse all.
The numbers are checked against inspect's (``repeated_blocks``) and upstream safetensors' shapes."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors.view import ViewSession

from .conftest import open_page, serving
from .test_data import cli_json

LAYER = [("self_attn.q_proj.weight", (16, 16)), ("self_attn.k_proj.weight", (4, 16)),
         ("self_attn.v_proj.weight", (4, 16)), ("self_attn.o_proj.weight", (16, 16)),
         ("mlp.gate_proj.weight", (40, 16)), ("mlp.up_proj.weight", (40, 16)), ("mlp.down_proj.weight", (16, 40)),
         ("input_layernorm.weight", (16,)), ("post_attention_layernorm.weight", (16,))]
PER_LAYER = sum(math.prod(s) for _, s in LAYER)


def llama(path: Path, layers: int = 32, odd: int | None = None) -> Path:
    """A llama-like checkpoint of ``layers`` decoder layers; layer ``odd``'s up_proj 8 rows wider."""
    from pysafetensors.numpy import save_file

    tensors = {"model.embed_tokens.weight": np.zeros((50, 16), np.float16), "model.norm.weight": np.zeros(16, np.float16),
               "lm_head.weight": np.zeros((50, 16), np.float16)}
    for i in range(layers):
        for name, shape in LAYER:
            tensors[f"model.layers.{i}.{name}"] = np.zeros((48, 16) if (i == odd and name == "mlp.up_proj.weight")
                                                           else shape, np.float16)
    save_file(tensors, str(path))
    return path


def rows(page: Any) -> list[str]:
    """The tree's rows drawn, top to bottom: a tensor's name, else the row's path."""
    return page.locator("#tree .row[data-k]").evaluate_all("rs => rs.map(r => r.dataset.tensor ?? r.dataset.path)")


def cells(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(f"{selector} .cell").all_text_contents()]


def natural(name: str) -> list[list[Any]]:
    """An independent natural key: each dotted part as its digit runs (numbers) and the rest (text)."""
    return [[(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", part) if p]
            for part in name.split(".")]


def test_minilm_shows_its_six_layers_once(page: Any, minilm: Path) -> None:
    from safetensors import safe_open  # the oracle

    with safe_open(str(minilm), framework="numpy") as f:
        shapes = {k: f.get_slice(k).get_shape() for k in list(f.keys())}
    layer = sum(math.prod(s) for k, s in shapes.items() if k.startswith("encoder.layer.0."))
    total = sum(math.prod(s) for s in shapes.values())
    (expected,) = cli_json("inspect", minilm)["repeated_blocks"]
    assert (expected["parameters"], expected["total_parameters"]) == (layer, 6 * layer)
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.wait_for_selector("#block-list")
        line = page.text_content("#block-list li")
        assert line.startswith(f"encoder.layer.[0–5] × 6 16 tensors and {layer:,} parameters each; "
                               f"{6 * layer:,} parameters in all ({100 * 6 * layer / total:.1f}%)")
        page.click("#block-list button")  # "show in the tree"
        assert page.get_attribute("#tabs [aria-selected=true]", "data-tab") == "tree"
        block = "#tree .row[data-path='encoder.layer']"
        assert rows(page) == ["embeddings", "encoder", "encoder.layer", "pooler"]  # the layers as one row
        assert page.text_content(f"{block} .name").strip("▸▾ ") == f"layer.[0–5]× 6 {layer:,} params each"
        assert cells(page, block) == ["96", f"{6 * layer:,}", "42.6 MB", "46.9%"]
        assert page.get_attribute(block, "aria-expanded") == "false"
        page.click(block)  # to each layer
        assert rows(page) == ["embeddings", "encoder", "encoder.layer"] + [f"encoder.layer.{i}" for i in range(6)] + ["pooler"]
        for i in range(6):
            assert cells(page, f"#tree .row[data-path='encoder.layer.{i}']") == ["16", f"{layer:,}", "7.1 MB", "7.8%"]
        page.click("#tree .row[data-path='encoder.layer.4']")
        assert "encoder.layer.4.attention" in rows(page)
        assert page.log.errors == []


@pytest.fixture(scope="module")
def llamas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("llama")
    return {"whole": llama(d / "whole.safetensors"), "odd": llama(d / "odd.safetensors", odd=5)}


def test_a_32_layer_model_is_one_block_of_32(page: Any, llamas: dict[str, Path]) -> None:
    total = 1616 + 32 * PER_LAYER
    with serving(ViewSession.open([str(llamas["whole"])])) as server:
        open_page(page, server.url)
        page.wait_for_selector("#block-list")
        assert page.text_content("#block-list li .label") == "model.layers.[0–31] × 32"
        page.click("button[data-tab=tree]")
        page.click("#tree .row[data-path=model]")
        block = "#tree .row[data-path='model.layers']"
        assert rows(page) == ["lm_head", "model", "model.embed_tokens", "model.layers", "model.norm"]
        assert "layers.[0–31]× 32" in page.text_content(f"{block} .name")
        assert cells(page, block) == ["288", f"{32 * PER_LAYER:,}", f"{64 * PER_LAYER / 1000:.1f} kB",
                                      f"{100 * 32 * PER_LAYER / total:.1f}%"]
        page.click(block)
        layers = [r for r in rows(page) if r.startswith("model.layers.")]
        assert layers[:12] == [f"model.layers.{i}" for i in range(12)]  # 2 before 10: natural order
        page.click("button[data-tab=table]")
        page.click("#table [data-sort=name]")
        names = page.locator("#table .row[data-tensor]").evaluate_all("rs => rs.map(r => r.dataset.tensor)")
        assert names[:20] == sorted(names[:20], key=natural) and names[0] == "lm_head.weight"
        assert [n for n in names if n.endswith("q_proj.weight")][:3] == [f"model.layers.{i}.self_attn.q_proj.weight"
                                                                         for i in range(3)]
        assert page.log.errors == []


def test_a_layer_that_differs_is_shown_beside_the_block(page: Any, llamas: dict[str, Path]) -> None:
    (expected,) = cli_json("inspect", llamas["odd"])["repeated_blocks"]
    reason = expected["differing"][0]["reason"]
    assert reason == "mlp.up_proj.weight is F16 [48, 16], the block's F16 [40, 16]"
    with serving(ViewSession.open([str(llamas["odd"])])) as server:
        open_page(page, server.url)
        page.wait_for_selector("#block-list")
        item = page.text_content("#block-list li")
        assert item.startswith("model.layers.[0–4, 6–31] × 31") and f"model.layers.5 is not in it: {reason}" in item
        page.click("button[data-tab=tree]")
        page.click("#tree .row[data-path=model]")
        page.click("#tree .row[data-path='model.layers']")  # a plain group: it holds layer 5 too
        block = "#tree .row[data-path='model.layers.[0–4, 6–31]']"
        assert rows(page) == ["lm_head", "model", "model.embed_tokens", "model.layers", "model.layers.[0–4, 6–31]",
                              "model.layers.5", "model.norm"]
        assert cells(page, block)[:2] == [str(9 * 31), f"{31 * PER_LAYER:,}"]
        five = page.locator("#tree .row[data-path='model.layers.5'] .name")
        assert "differs" in five.text_content() and reason in five.text_content()
        assert five.get_attribute("title") == f"model.layers.5 is not in model.layers.[0–4, 6–31] × 31: {reason}"
        page.click(block)
        # Under the block its 31 layers, in order; then layer 5, beside the block (the rows in view).
        expected = [f"model.layers.{i}" for i in range(32) if i != 5] + ["model.layers.5"]
        members = [r for r in rows(page) if re.fullmatch(r"model\.layers\.\d+", r)]
        assert len(members) > 10 and members == expected[:len(members)]
        page.locator("#tree").evaluate("b => { b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); }")
        page.wait_for_selector("#tree .row[data-path='model.norm']")
        tail = [r for r in rows(page) if re.fullmatch(r"model\.layers\.\d+", r)]
        assert len(tail) > 10 and tail == expected[-len(tail):]
        assert page.log.errors == []


def test_expand_all_and_collapse_all(page: Any, llamas: dict[str, Path]) -> None:
    with serving(ViewSession.open([str(llamas["odd"])])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=tree]")
        page.click("#expand")
        count = page.evaluate("() => document.getElementById('tree').getAttribute('aria-rowcount')")
        groups = 2 + 1 + 32 * (1 + 2 + 2 + 4 + 3) + 2  # lm_head, model, layers; per layer: itself, its groups; embed, norm
        assert int(count) == 1 + 291 + groups + 1  # the header, every tensor, every group, the block's row
        page.locator("#tree").evaluate("b => { b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); }")
        page.wait_for_selector("#tree .row[data-tensor='model.norm.weight']")
        page.click("#collapse")
        assert rows(page) == ["lm_head", "model"]
