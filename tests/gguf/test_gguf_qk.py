"""llama.cpp's q/k row permutation, undone for every architecture whose converter applies it.

Each GGUF here is made the way llama.cpp's convert_hf_to_gguf.py makes it: Hugging Face names
through gguf-py's map, and q/k rows (weights, and biases where the converter permutes those)
regrouped with a copy of the converter's own permutation, written below from its source
(``LlamaModel.permute``, Xverse's and Baichuan's ``_reverse_hf_permute``).  Converting back
with Hugging Face names, and diffing against the source checkpoint, must give the source
bit for bit; rows the tool cannot vouch for must be listed, never passed off silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf_helpers import V, cli_json, gguf, write_gguf
from safetensors import numpy as upstream_numpy

from pysafetensors.gguf import GGUFFile
from pysafetensors.gguf import convert as gguf_convert
from pysafetensors.gguf.convert import convert_gguf
from pysafetensors.gguf.names import PERMUTED_QK, UNPERMUTED_QK_ARCHS
from pysafetensors.io.sources import MmapSource
from pysafetensors.numpy import save_file
from pysafetensors.tools import _chunks
from pysafetensors.tools.diff import GGUFDiffResult, diff_files


def llama_permute(weights: np.ndarray, n_head: int, n_head_kv: int | None) -> np.ndarray:
    """LlamaModel.permute, as convert_hf_to_gguf.py has it."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def reverse_hf_permute(weights: np.ndarray, n_head: int, n_kv_head: int | None = None) -> np.ndarray:
    """XverseModel/BaichuanModel._reverse_hf_permute, as convert_hf_to_gguf.py has it."""
    if n_kv_head is not None and n_head != n_kv_head:
        n_head //= n_kv_head
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def attention_source(heads: list[tuple[int, int]], *, dim: int = 32, head_dim: int = 8, biases: bool = True,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """A checkpoint with transformers' names: per block (n_head, n_head_kv), q/k/v and biases."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    out = {"model.embed_tokens.weight": w(64, dim), "model.norm.weight": w(dim)}
    for b, (n_head, n_kv) in enumerate(heads):
        p = f"model.layers.{b}.self_attn."
        out |= {p + "q_proj.weight": w(n_head * head_dim, dim), p + "k_proj.weight": w(n_kv * head_dim, dim),
                p + "v_proj.weight": w(n_kv * head_dim, dim)}
        if biases:
            out |= {p + "q_proj.bias": w(n_head * head_dim), p + "k_proj.bias": w(n_kv * head_dim),
                    p + "v_proj.bias": w(n_kv * head_dim)}
    return out


def convert_like_llama_cpp(path: Path, arch: str, source: dict[str, np.ndarray], heads: list[tuple[int, int]], *,
                           permute: Any = llama_permute, permute_biases: bool = True,
                           per_layer: bool = False) -> Path:
    """What the converter class of ``arch`` writes: q/k permuted by ``permute`` (None: not at all).
    Tensors the architecture has no name for (olmo's final norm) are dropped from ``source``."""
    member = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch)
    tmap = gguf.get_tensor_name_map(member, len(heads))
    suffixes = (".weight", ".bias") if permute_biases else (".weight",)
    tensors: dict[str, tuple[np.ndarray, Any]] = {}
    for name, array in list(source.items()):
        block = int(name.split(".")[2]) if name.startswith("model.layers.") else 0
        n_head, n_kv = heads[block]
        if permute is not None and name.endswith(tuple("q_proj" + s for s in suffixes)):
            array = permute(array, n_head, n_head)
        elif permute is not None and name.endswith(tuple("k_proj" + s for s in suffixes)):
            array = permute(array, n_head, n_kv)
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            del source[name]
            continue
        tensors[new] = (array, None)
    kv: dict[str, tuple[Any, Any]] = {f"{arch}.block_count": (len(heads), V.UINT32)}
    arrays: dict[str, tuple[list[Any], Any]] = {}
    if per_layer:
        arrays = {f"{arch}.attention.head_count": ([h for h, _ in heads], V.UINT32),
                  f"{arch}.attention.head_count_kv": ([k for _, k in heads], V.UINT32)}
    else:
        kv |= {f"{arch}.attention.head_count": (heads[0][0], V.UINT32),
               f"{arch}.attention.head_count_kv": (heads[0][1], V.UINT32)}
    return write_gguf(path, tensors, arch=arch, kv=kv, arrays=arrays)


def convert_back(path: Path, out: Path) -> Any:
    with GGUFFile(MmapSource(path)) as f:
        return convert_gguf(f, out, hf=True)


def assert_same(back: dict[str, np.ndarray], source: dict[str, np.ndarray]) -> None:
    assert sorted(back) == sorted(source)
    for name, array in source.items():
        np.testing.assert_array_equal(back[name], array, err_msg=name)


def qk_names(source: dict[str, np.ndarray], biases: bool = True) -> list[str]:
    ends = ("q_proj.weight", "k_proj.weight") + (("q_proj.bias", "k_proj.bias") if biases else ())
    return sorted(n for n in source if n.endswith(ends))


CASES = {
    # arch: (heads per block, permutation, biases permuted, head counts per layer)
    "granite": ([(4, 2), (4, 2)], llama_permute, True, False),
    "llama": ([(4, 2)], llama_permute, True, False),
    "nemotron_h": ([(4, 1)], llama_permute, True, False),
    "deci": ([(4, 2), (4, 4)], llama_permute, True, True),
    "olmo": ([(4, 4)], llama_permute, False, False),
    "xverse": ([(4, 2)], reverse_hf_permute, False, False),
}


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 7 elements: smaller than a row, a head or a bias, so every slice is widened."""
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 7)
    monkeypatch.setattr(gguf_convert, "CHUNK_ELEMENTS", 7)


@pytest.mark.parametrize("arch", sorted(CASES))
def test_hf_names_round_trip_to_the_source(arch: str, tmp_path: Path, small_chunks: None) -> None:
    heads, permute, biases, per_layer = CASES[arch]
    source = attention_source(heads)
    g = convert_like_llama_cpp(tmp_path / "m.gguf", arch, source, heads, permute=permute,
                               permute_biases=biases, per_layer=per_layer)
    report = convert_back(g, tmp_path / "back.safetensors")
    assert sorted(report.unpermuted) == qk_names(source, biases)
    assert report.left_in_gguf_order == {}
    assert_same(upstream_numpy.load_file(tmp_path / "back.safetensors"), source)


@pytest.mark.parametrize("arch", ["granite", "deci", "xverse"])
def test_diff_against_the_source_is_identical(arch: str, tmp_path: Path, small_chunks: None) -> None:
    heads, permute, biases, per_layer = CASES[arch]
    source = attention_source(heads, seed=1)
    st = tmp_path / "src.safetensors"
    save_file(source, st)
    g = convert_like_llama_cpp(tmp_path / "m.gguf", arch, source, heads, permute=permute,
                               permute_biases=biases, per_layer=per_layer)
    r = diff_files(str(g), str(st), values=True)
    assert isinstance(r, GGUFDiffResult)
    assert r.unpermuted == qk_names(source, biases) and r.left_in_gguf_order == {}
    assert r.same, [v for v in r.values or [] if v.differing]


def test_safe_architectures_are_not_unpermuted(tmp_path: Path) -> None:
    """qwen2's converter keeps q/k rows (and biases) as transformers holds them."""
    heads = [(4, 2)]
    source = attention_source(heads)
    g = convert_like_llama_cpp(tmp_path / "q.gguf", "qwen2", source, heads, permute=None)
    report = convert_back(g, tmp_path / "back.safetensors")
    assert report.unpermuted == [] and report.left_in_gguf_order == {}
    assert_same(upstream_numpy.load_file(tmp_path / "back.safetensors"), source)


def test_metas_layout_is_not_unpermuted(tmp_path: Path) -> None:
    """A llama GGUF compared with a checkpoint under Meta's names (layers.N.attention.wq, the
    layout llama.cpp stores): the rows are compared as they are."""
    rng = np.random.default_rng(3)
    meta = {"layers.0.attention.wq.weight": rng.standard_normal((32, 32)).astype(np.float32),
            "layers.0.attention.wk.weight": rng.standard_normal((16, 32)).astype(np.float32),
            "tok_embeddings.weight": rng.standard_normal((64, 32)).astype(np.float32)}
    st = tmp_path / "meta.safetensors"
    save_file(meta, st)
    kv = {"llama.attention.head_count": (4, V.UINT32), "llama.attention.head_count_kv": (2, V.UINT32)}
    g = write_gguf(tmp_path / "m.gguf", {"blk.0.attn_q.weight": (meta["layers.0.attention.wq.weight"], None),
                                         "blk.0.attn_k.weight": (meta["layers.0.attention.wk.weight"], None),
                                         "token_embd.weight": (meta["tok_embeddings.weight"], None)}, kv=kv)
    r = diff_files(str(g), str(st), values=True)
    assert isinstance(r, GGUFDiffResult) and r.names_mapped == 3
    assert r.unpermuted == [] and r.same


@pytest.mark.parametrize(("arch", "prefix"), [("gptj", "blk"), ("clip", "v.blk")])
def test_rows_of_an_unknown_architecture_are_reported(arch: str, prefix: str, tmp_path: Path) -> None:
    """Not known to be permuted or kept (a multimodal projector's vision q/k are permuted for
    some projector types): written as stored, and said so."""
    rng = np.random.default_rng(4)
    tensors = {f"{prefix}.0.attn_q.weight": (rng.standard_normal((32, 32)).astype(np.float32), None),
               f"{prefix}.0.attn_k.weight": (rng.standard_normal((32, 32)).astype(np.float32), None)}
    kv = {f"{arch}.attention.head_count": (4, V.UINT32)}
    g = write_gguf(tmp_path / "u.gguf", tensors, arch=arch, kv=kv)
    report = convert_back(g, tmp_path / "back.safetensors")
    assert report.renamed == 2 and report.unpermuted == []
    assert len(report.left_in_gguf_order) == 2
    for out_name, why in report.left_in_gguf_order.items():
        assert f"architecture {arch!r}" in why and "left as llama.cpp stored them" in why
        assert why.startswith((f"{prefix}.0.attn_q.weight", f"{prefix}.0.attn_k.weight")), out_name
    back = upstream_numpy.load_file(tmp_path / "back.safetensors")
    for out_name, why in report.left_in_gguf_order.items():
        np.testing.assert_array_equal(back[out_name], tensors[why.split(":")[0]][0])
    code, d = cli_json("convert", g, tmp_path / "cli.safetensors", "--hf-names")
    assert code == 0 and d["left_in_gguf_order"] == report.left_in_gguf_order
    r = diff_files(str(g), str(tmp_path / "back.safetensors"), values=True)
    assert isinstance(r, GGUFDiffResult) and r.same and r.left_in_gguf_order == report.left_in_gguf_order
    code, d = cli_json("diff", g, tmp_path / "back.safetensors")
    assert code == 0 and d["left_in_gguf_order"] == report.left_in_gguf_order


def test_rows_that_do_not_split_into_heads_are_reported(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    kv = {"llama.attention.head_count": (3, V.UINT32)}  # 32 rows are not 3 heads of row pairs
    g = write_gguf(tmp_path / "x.gguf", {"blk.0.attn_q.weight": (rng.standard_normal((32, 8)).astype(np.float32),
                                                                 None)}, kv=kv)
    report = convert_back(g, tmp_path / "back.safetensors")
    assert report.unpermuted == []
    assert list(report.left_in_gguf_order) == ["model.layers.0.self_attn.q_proj.weight"]
    assert "do not split into 3 heads" in report.left_in_gguf_order["model.layers.0.self_attn.q_proj.weight"]


def test_other_rearrangements_are_reported(tmp_path: Path) -> None:
    """plamo's converter regroups its q heads another way: not undone, and said so."""
    rng = np.random.default_rng(6)
    kv = {"plamo.attention.head_count": (4, V.UINT32), "plamo.attention.head_count_kv": (4, V.UINT32)}
    tensors = {f"blk.0.{n}.weight": (rng.standard_normal((32, 32)).astype(np.float32), None)
               for n in ("attn_q", "attn_k", "attn_output")}
    g = write_gguf(tmp_path / "p.gguf", tensors, arch="plamo", kv=kv)
    report = convert_back(g, tmp_path / "back.safetensors")
    assert report.unpermuted == []
    assert sorted(why.split(":")[0] for why in report.left_in_gguf_order.values()) == [
        "blk.0.attn_output.weight", "blk.0.attn_q.weight"]
    assert all("PlamoModel.shuffle" in why for why in report.left_in_gguf_order.values())


def test_every_architecture_gguf_py_knows_is_classified() -> None:
    """Each architecture of the installed gguf-py is either permuted (and how) or known not to
    be; only the two with no text converter class are neither, and those are reported."""
    names = set(gguf.MODEL_ARCH_NAMES.values())
    assert not set(PERMUTED_QK) & UNPERMUTED_QK_ARCHS
    assert set(PERMUTED_QK) | UNPERMUTED_QK_ARCHS <= names
    assert names - set(PERMUTED_QK) - UNPERMUTED_QK_ARCHS == {"clip", "gptj"}
