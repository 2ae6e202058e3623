"""``diff`` of a 4-bit GGUF against the checkpoint it was made from (Q4_0 from gguf-py's
quantizer, Q4_K built block by block), within bounds derived from each format; and stats,
validate and diff reading GGUF files over fsspec (memory://) exactly as they read local ones."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf_helpers import Q, V, cli_json, quants, write_gguf

from pysafetensors.numpy import save_file
from pysafetensors.tools.diff import GGUFDiffResult, diff_files

N_HEAD, N_KV = 4, 2


def llama_permute(x: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute (HF row order -> GGUF row order)."""
    return x.reshape(heads, 2, x.shape[0] // heads // 2, *x.shape[1:]).swapaxes(1, 2).reshape(x.shape)


def unpermuted(x: np.ndarray, heads: int) -> np.ndarray:
    """The rows llama_permute would have moved to ``x``'s: found by permuting row numbers."""
    order = llama_permute(np.arange(x.shape[0]), heads)
    back = np.empty_like(x)
    back[order] = x
    return back


def q4_k_on_a_grid(rows: int, cols: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Valid Q4_K blocks whose eight sub-blocks all use scale 9 and min 5 (6-bit codes, packed as
    llama.cpp's get_scale_min unpacks them), and each value's quantization step, d * 9."""
    scale, low = 9, 5
    blocks = rows * cols // 256
    raw = rng.integers(0, 256, size=(blocks, 144), dtype=np.uint8)
    d = rng.uniform(0.002, 0.02, blocks).astype(np.float16)
    raw[:, 0:2] = d.view(np.uint8).reshape(blocks, 2)
    raw[:, 2:4] = rng.uniform(0.002, 0.02, blocks).astype(np.float16).view(np.uint8).reshape(blocks, 2)
    raw[:, 4:8], raw[:, 8:12], raw[:, 12:16] = scale, low, (scale & 15) | ((low & 15) << 4)
    step = np.repeat(d.astype(np.float32) * scale, 256).reshape(rows, cols)
    return raw.reshape(rows, cols // 256 * 144), step


@pytest.fixture
def quantized(tmp_path: Path) -> dict[str, Any]:
    """A llama GGUF of Q4_0 and Q4_K tensors (q/k permuted), its source checkpoint, and for each
    source tensor the largest error its format allows."""
    rng = np.random.default_rng(11)
    source: dict[str, np.ndarray] = {}
    tensors: dict[str, tuple[np.ndarray, Any]] = {}
    bound: dict[str, float] = {}
    # Q4_0 (gguf-py's quantizer): d = max / -8 per 32 values, stored as float16; a value is off by
    # at most |d| (the one at -max is clipped to 7 * d), plus d's rounding to float16.
    for hf, gguf_name, shape, heads in (("model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight", (4, 64), N_KV),
                                        ("model.layers.0.mlp.up_proj.weight", "blk.0.ffn_up.weight", (16, 64), None)):
        x = rng.standard_normal(shape).astype(np.float32)
        stored = llama_permute(x, heads) if heads else x
        tensors[gguf_name] = (quants.quantize(stored, Q.Q4_0), Q.Q4_0)
        source[hf] = x
        bound[hf] = float(np.abs(stored.reshape(-1, 32)).max(axis=1).max()) / 8 * (1 + 2**-9)
    # Q4_K (gguf-py cannot quantize to it): blocks built here; the source is each value moved by
    # less than half its step, so the blocks are its nearest quantization, off by under step / 2.
    for hf, gguf_name, shape, heads in (("model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight", (8, 512), N_HEAD),
                                        ("model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight", (4, 256), None)):
        raw, step = q4_k_on_a_grid(*shape, rng)
        grid = np.asarray(quants.dequantize(raw, Q.Q4_K))
        # the blocks are what they claim: every value a whole number of steps above the minimum
        levels = (grid - grid.reshape(-1, 32).min(axis=1).repeat(32).reshape(shape)) / step
        assert np.allclose(levels, np.round(levels), atol=1e-3) and levels.max() <= 15 + 1e-3
        moved = (grid + rng.uniform(-0.45, 0.45, shape) * step).astype(np.float32)
        tensors[gguf_name] = (raw, Q.Q4_K)
        source[hf] = unpermuted(moved, heads) if heads else moved
        bound[hf] = float(step.max()) / 2
    source["model.norm.weight"] = rng.standard_normal(64).astype(np.float32)
    tensors["output_norm.weight"] = (source["model.norm.weight"], None)
    bound["model.norm.weight"] = 0.0
    kv = {"llama.block_count": (1, V.UINT32), "llama.attention.head_count": (N_HEAD, V.UINT32),
          "llama.attention.head_count_kv": (N_KV, V.UINT32)}
    g = write_gguf(tmp_path / "q4.gguf", tensors, kv=kv)
    st = tmp_path / "src.safetensors"
    save_file(source, st)
    return {"gguf": g, "source": st, "arrays": source, "bound": bound}


def test_4_bit_gguf_against_its_source(quantized: dict[str, Any]) -> None:
    """Names map back, q/k rows are put back, and each tensor differs from its source by exactly
    the quantization error (computed here from gguf-py's dequantization), within its format's bound."""
    from gguf_helpers import reference_dequantized

    ref = reference_dequantized(quantized["gguf"])
    gguf_of = {"model.layers.0.self_attn.q_proj.weight": ("blk.0.attn_q.weight", N_HEAD),
               "model.layers.0.self_attn.k_proj.weight": ("blk.0.attn_k.weight", N_KV),
               "model.layers.0.mlp.up_proj.weight": ("blk.0.ffn_up.weight", None),
               "model.layers.0.mlp.down_proj.weight": ("blk.0.ffn_down.weight", None),
               "model.norm.weight": ("output_norm.weight", None)}
    r = diff_files(str(quantized["gguf"]), str(quantized["source"]), values=True)
    assert isinstance(r, GGUFDiffResult) and not r.tensors_added and not r.tensors_removed
    assert r.unpermuted == ["model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.q_proj.weight"]
    values = {v.name: v for v in r.values or []}
    assert sorted(values) == sorted(gguf_of)
    for name, (gguf_name, heads) in gguf_of.items():
        x = quantized["arrays"][name]
        back = unpermuted(ref[gguf_name], heads) if heads else ref[gguf_name]
        error = float(np.abs(back.astype(np.float64) - x.astype(np.float64)).max())
        v = values[name]
        assert error <= quantized["bound"][name], name
        assert (v.max_abs_diff or 0.0) == pytest.approx(error, rel=1e-12, abs=0.0), name
        if quantized["bound"][name]:
            assert v.differing > 0 and v.cosine_similarity is not None and v.cosine_similarity > 0.99, name
        else:
            assert v.differing == 0, name


@pytest.fixture
def in_memory(quantized: dict[str, Any]) -> Iterator[str]:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-gguf-q4/q4.gguf", quantized["gguf"].read_bytes())
    fs.pipe("/pst-gguf-q4/src.safetensors", quantized["source"].read_bytes())
    yield "memory://pst-gguf-q4"
    fs.rm("/pst-gguf-q4", recursive=True)


def _without_paths(d: Any) -> Any:
    if isinstance(d, dict):
        return {k: _without_paths(v) for k, v in d.items() if k not in ("path", "a", "b", "file", "files")}
    if isinstance(d, list):
        return [_without_paths(v) for v in d]
    return d


@pytest.mark.parametrize("command", [("stats",), ("validate",), ("diff", "src.safetensors", "--values")])
def test_stats_validate_and_diff_over_fsspec(command: tuple[str, ...], quantized: dict[str, Any],
                                             in_memory: str) -> None:
    name, *rest = command
    local_rest = [str(quantized["source"]) if a == "src.safetensors" else a for a in rest]
    remote_rest = [f"{in_memory}/{a}" if a == "src.safetensors" else a for a in rest]
    local_code, local = cli_json(name, quantized["gguf"], *local_rest)
    code, remote = cli_json(name, f"{in_memory}/q4.gguf", *remote_rest)
    assert code == local_code and _without_paths(remote) == _without_paths(local)
    assert str(remote.get("path", remote.get("a"))).startswith("memory://")
    assert local_code == (1 if name == "diff" else 0)
    if name == "stats":
        assert [t["name"] for t in remote["tensors"]] == [t.name for t in __import__("gguf").GGUFReader(
            quantized["gguf"]).tensors]
    if name == "diff":
        assert remote["unpermuted"] == ["model.layers.0.self_attn.k_proj.weight",
                                        "model.layers.0.self_attn.q_proj.weight"]
