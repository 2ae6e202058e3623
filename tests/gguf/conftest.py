"""The GGUF files llama.cpp's converter writes from tiny transformers models, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from llamacpp import ARCHS, build_all, converter_root

#: the architectures also converted with ``--outtype q8_0``
QUANTIZED = ["llama", "gpt2", "qwen2_moe", "bloom", "gemma2"]


@pytest.fixture(scope="session")
def llamacpp_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    if converter_root() is None:
        pytest.skip("llama.cpp's converter is not unpacked (make venv puts it in <venv>/llama.cpp)")
    pytest.importorskip("transformers")
    return build_all(tmp_path_factory.mktemp("llamacpp"), list(ARCHS), QUANTIZED)
