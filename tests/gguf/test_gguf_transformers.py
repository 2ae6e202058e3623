"""``convert --hf-names`` against the outside references, architecture by architecture.

For every architecture transformers' GGUF loader lists (and gemma 1, which it refuses), a tiny
random model saved by transformers is written to GGUF by llama.cpp's own converter (f32), then
converted back with ``--hf-names``.  The output must be the original checkpoint, name for name and
bit for bit (``A_log``, which llama.cpp stores as ``-exp(A_log)``, up to the rounding of exp/log),
load into the transformers model with no missing or unexpected key, and hold exactly the values
transformers' own GGUF loader (``load_gguf_checkpoint``) builds from the same file, except where
that loader is known to differ (each case asserted, so a fix in transformers shows here).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llamacpp import ARCHS, QUANTIZED, model_class, new_model
from safetensors.numpy import load_file as upstream_load

from pysafetensors.gguf import GGUFFile
from pysafetensors.gguf.convert import convert_gguf
from pysafetensors.io.sources import MmapSource

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

#: tensors whose values llama.cpp cannot give back exactly: exp on the way in, log on the way out
LOSSY = ("A_log",)
#: where transformers' own GGUF loader builds something else than the model held (name part -> why)
TRANSFORMERS_DIFFERS = {
    "falcon": {"query_key_value": "values"},  # fused qkv left in llama.cpp's grouping
    "qwen2_moe": {"shared_expert_gate": "shape"},  # made (1, 1, n) where the model has (1, n)
}
#: transformers' GGUF loader refuses these files (name -> the GGUF architecture it names)
REFUSED = {"gemma": "gemma"}
#: the new GGUF path of transformers 5.24 (from_pretrained(gguf_file=...)) rather than load_gguf_checkpoint
NEW_PATH = {"lfm2", "qwen35", "qwen35moe"}


def _convert(gguf_path: Path, out: Path) -> dict[str, np.ndarray]:
    with GGUFFile(MmapSource(str(gguf_path))) as f:
        report = convert_gguf(f, out, hf=True)
    assert report.unmapped == [] and report.left_in_gguf_order == {} and report.warning is None, report
    return upstream_load(str(out))


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind == "f" else x


def _load(name: str, directory: Path) -> Any:
    logging.getLogger("transformers").setLevel(logging.ERROR)
    model, info = model_class(name).from_pretrained(str(directory), output_loading_info=True)
    return model, info


def _transformers_gguf(name: str, hf_dir: Path, gguf_path: Path) -> dict[str, Any]:
    """What transformers' GGUF loader builds from the file: its tensors by model name."""
    cls = model_class(name)
    if name in NEW_PATH:
        return cls.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name).state_dict()
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = transformers.AutoConfig.from_pretrained(str(hf_dir))
    if config.model_type == "mistral":  # llama.cpp writes Mistral as llama, and transformers loads it so
        config = transformers.LlamaConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
        cls = transformers.AutoModelForCausalLM
    model = new_model(name, config) if name != "mistral" else cls.from_config(config)
    return load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)["tensors"]


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_hf_names_give_back_the_checkpoint_transformers_loads(name: str, llamacpp_models: Any,
                                                              tmp_path: Path) -> None:
    files = llamacpp_models[name]
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    ours = _convert(files["f32"], out_dir / "model.safetensors")
    original = upstream_load(str(files["hf"] / "model.safetensors"))
    assert sorted(ours) == sorted(original)
    for key, want in original.items():
        got = ours[key]
        assert got.shape == want.shape and got.dtype == want.dtype, key
        if key.endswith(LOSSY):
            np.testing.assert_allclose(got, want, rtol=0, atol=2**-20, err_msg=key)
        else:
            assert np.array_equal(_bits(got), _bits(want)), key

    (out_dir / "config.json").write_bytes((files["hf"] / "config.json").read_bytes())
    model, info = _load(name, out_dir)
    assert info["missing_keys"] in (set(), []) and info["unexpected_keys"] in (set(), []), info
    held = model.state_dict()

    if name in REFUSED:
        with pytest.raises(ValueError, match=f"architecture {REFUSED[name]} is not supported"):
            _transformers_gguf(name, files["hf"], files["f32"])
        return
    theirs = _transformers_gguf(name, files["hf"], files["f32"])
    differs = TRANSFORMERS_DIFFERS.get(name, {})
    seen = set()
    for key, value in theirs.items():
        assert key in held, key
        known = next((how for part, how in differs.items() if part in key), None)
        same_shape = tuple(value.shape) == tuple(held[key].shape)
        same = same_shape and torch.equal(value.contiguous().view(torch.uint8), held[key].contiguous().view(torch.uint8))
        if known is None and key.endswith(LOSSY) and name in NEW_PATH and same_shape:
            # transformers' new GGUF path takes torch.log, this numpy's (as its older path does): the
            # two may round the last bit differently
            assert torch.allclose(value, held[key], rtol=2**-22, atol=0), key
        elif known is None:
            assert same, key
        else:
            assert not same and (same_shape if known == "values" else not same_shape), (key, known)
            seen.add(known)
    assert seen == set(differs.values())


@pytest.mark.parametrize("name", QUANTIZED)
def test_quantized_files_match_gguf_py_dequantize_through_transformers(name: str, llamacpp_models: Any,
                                                                       tmp_path: Path) -> None:
    """A q8_0 file (llama.cpp's converter, --outtype q8_0): every tensor transformers' loader builds
    (gguf-py's ``dequantize`` and its layout changes) is the one ``--hf-names`` writes, bit for bit."""
    files = llamacpp_models[name]
    ours = _convert(files["q8_0"], tmp_path / "model.safetensors")
    import gguf

    quantized = [t for t in gguf.GGUFReader(str(files["q8_0"])).tensors if t.tensor_type == gguf.GGMLQuantizationType.Q8_0]
    assert quantized  # the converter did quantize
    theirs = _transformers_gguf(name, files["hf"], files["q8_0"])
    fused = {k for k in theirs if "experts.gate_up_proj" in k or "experts.down_proj" in k}
    differs = TRANSFORMERS_DIFFERS.get(name, {})
    for key, value in theirs.items():
        if key in fused:  # transformers 5 fuses the experts in memory: compare expert by expert
            continue
        if any(part in key for part in differs):  # asserted by the f32 test above
            continue
        want = value.numpy()
        assert np.array_equal(_bits(ours[key]), _bits(want)), key
    for key in fused:
        layer = key.split(".mlp.")[0]
        stacked = theirs[key].numpy()
        for e in range(stacked.shape[0]):
            if key.endswith("down_proj"):
                parts = [ours[f"{layer}.mlp.experts.{e}.down_proj.weight"]]
            else:
                parts = [ours[f"{layer}.mlp.experts.{e}.{p}_proj.weight"] for p in ("gate", "up")]
            assert np.array_equal(np.concatenate(parts), stacked[e]), (key, e)


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_diff_of_the_gguf_against_its_source(name: str, llamacpp_models: Any) -> None:
    """``diff`` reads the GGUF as the same checkpoint ``--hf-names`` writes: against the source
    every tensor is there, with its shape, and equal (``A_log`` within the rounding of exp/log)."""
    from pysafetensors.tools.diff import GGUFDiffResult, diff_files

    files = llamacpp_models[name]
    r = diff_files(str(files["f32"]), str(files["hf"] / "model.safetensors"), values=True)
    assert isinstance(r, GGUFDiffResult)
    assert (r.tensors_added, r.tensors_removed, r.tensors_changed) == ([], [], []), r
    assert r.unmapped == [] and r.left_in_gguf_order == {}
    for v in r.values or []:
        assert v.compared and (v.differing == 0 or v.name.endswith(LOSSY)), v
        if v.differing:
            assert v.max_abs_diff is not None and v.max_abs_diff < 2**-20, v
    assert r.same == (not any(v.differing for v in r.values or []))


def test_cli_names_what_it_undid(llamacpp_models: Any, tmp_path: Path) -> None:
    from gguf_helpers import run_cli

    code, out, err = run_cli("convert", llamacpp_models["gpt2"]["f32"], tmp_path / "g.safetensors", "--hf-names")
    assert code == 0, err
    assert "  layout: llama.cpp's changes undone in 8 tensors (T; --json lists them)" in out.splitlines()
    code, out, err = run_cli("convert", llamacpp_models["gemma3"]["f32"], tmp_path / "m.safetensors", "--hf-names")
    assert code == 0 and "(minus1; --json lists them)" in out, out
    code, out, err = run_cli("convert", llamacpp_models["gemma4"]["f32"], tmp_path / "4.safetensors", "--hf-names")
    assert code == 0 and "  left out 1 tensor llama.cpp generated: rope_freqs.weight" in out.splitlines(), out


def test_a_split_set_from_llama_cpp_converts_as_one_file(llamacpp_models: Any, tmp_path: Path) -> None:
    files = llamacpp_models["llama"]
    parts = files["split"]
    assert [p.name for p in parts] == [f"llama-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    from gguf_helpers import run_cli

    code, _, err = run_cli("convert", parts[1], tmp_path / "model.safetensors", "--hf-names")
    assert code == 0, err
    ours, original = upstream_load(str(tmp_path / "model.safetensors")), upstream_load(str(files["hf"] / "model.safetensors"))
    assert sorted(ours) == sorted(original)
    assert all(np.array_equal(_bits(ours[k]), _bits(original[k])) for k in original)
