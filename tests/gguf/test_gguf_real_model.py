"""A real quantized GGUF: all-MiniLM-L6-v2 written by llama.cpp's converter (``--outtype q8_0``).

transformers' GGUF loader does not read BERT files, and no package reachable here ships a real
model of an architecture it does read, so this real file is checked against the other two
references: gguf-py's ``dequantize`` (every value, bit for bit) and the model's own checkpoint
(every name llama.cpp keeps, the shapes, and the unquantized tensors bit for bit).
"""

from __future__ import annotations

from pathlib import Path

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
