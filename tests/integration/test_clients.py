"""transformers, sentence-transformers, peft and accelerate on pysafetensors, unchanged.

clients_script.py runs twice, each in its own process: plainly (upstream safetensors) and
through ``python -m pysafetensors.run`` (the alias).  Every output must be bit-identical and
every file the libraries saved byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from ._helpers import minilm_dir, run_env

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "clients_script.py")
RESULTS = [
    "transformers_from_pretrained", "transformers_reloaded", "sentence_transformers_encode", "peft_lora",
    "peft_lora_loaded", "accelerate_load_checkpoint",
]
SAVED = ["sharded", "adapter", "accelerate"]

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """{"alias": OUT_DIR, "upstream": OUT_DIR}, the two runs made side by side."""
    base = tmp_path_factory.mktemp("clients")
    model = minilm_dir()
    commands = {
        "alias": [sys.executable, "-m", "pysafetensors.run", SCRIPT, model, str(base / "alias")],
        "upstream": [sys.executable, SCRIPT, model, str(base / "upstream")],
    }
    env = run_env(str(base / "hf-home"))
    procs = {
        side: subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for side, cmd in commands.items()
    }
    for side, proc in procs.items():
        out, _ = proc.communicate(timeout=800)
        assert proc.returncode == 0, f"{side} run failed:\n{out[-6000:]}"
    return {side: str(base / side) for side in commands}


def _report(out: str) -> dict[str, Any]:
    with open(os.path.join(out, "report.json")) as fh:
        return json.load(fh)


def _load(out: str, name: str) -> np.ndarray:
    return np.load(os.path.join(out, "results", f"{name}.npy"))


def _tree(root: str) -> dict[str, bytes]:
    files = {}
    for where, _, names in os.walk(root):
        for name in names:
            path = os.path.join(where, name)
            with open(path, "rb") as fh:
                files[os.path.relpath(path, root)] = fh.read()
    return files


def test_each_side_ran_the_library_it_should(runs: dict[str, str]) -> None:
    alias, upstream = _report(runs["alias"]), _report(runs["upstream"])
    assert upstream["alias"] is None and upstream["upstream_dir"] is not None
    assert "safetensors._safetensors_rust" in upstream["modules"]
    assert alias["alias"] == "pysafetensors" and alias["version"] == upstream["version"] == "0.8.0"
    assert alias["torch_face"] == "pysafetensors.torch" and alias["safe_open"] == "pysafetensors.handle.safe_open"
    # Not one module of the real package was loaded on the alias side.
    assert not [f for f in alias["files"] if f.startswith(upstream["upstream_dir"])]
    assert "safetensors._safetensors_rust" not in alias["modules"]


@pytest.mark.parametrize("name", RESULTS)
def test_outputs_are_bit_identical_to_upstream(runs: dict[str, str], name: str) -> None:
    ours, theirs = _load(runs["alias"], name), _load(runs["upstream"], name)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert ours.tobytes() == theirs.tobytes()


def test_reloads_give_the_original_outputs(runs: dict[str, str]) -> None:
    out = runs["alias"]
    original = _load(out, "transformers_from_pretrained")
    assert np.array_equal(_load(out, "transformers_reloaded"), original)
    assert np.array_equal(_load(out, "accelerate_load_checkpoint"), original)
    assert np.array_equal(_load(out, "peft_lora_loaded"), _load(out, "peft_lora"))
    assert not np.array_equal(_load(out, "peft_lora"), original)  # the adapter changed something


@pytest.mark.parametrize("saved", SAVED)
def test_saved_files_are_byte_identical(runs: dict[str, str], saved: str) -> None:
    ours, theirs = _tree(os.path.join(runs["alias"], saved)), _tree(os.path.join(runs["upstream"], saved))
    assert sorted(ours) == sorted(theirs)
    assert any(name.endswith(".safetensors") for name in ours)
    for name in ours:
        assert ours[name] == theirs[name], name
    if saved != "adapter":  # save_pretrained / save_model sharded as asked
        assert "model.safetensors.index.json" in ours and sum(n.endswith(".safetensors") for n in ours) >= 2
