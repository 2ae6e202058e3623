"""Importing the format core or the package must not import any framework (not even numpy)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FRAMEWORKS = ["numpy", "torch", "jax", "tensorflow", "paddle", "mlx", "ml_dtypes", "flax"]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _loaded_after(statement: str) -> list[str]:
    code = (
        "import sys, json\n"
        f"{statement}\n"
        f"print(json.dumps([m for m in {FRAMEWORKS!r} if m in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "statement",
    [
        "import pysafetensors.format",
        "import pysafetensors.format.header, pysafetensors.format.slicing, pysafetensors.format.layout",
        "import pysafetensors",
        "from pysafetensors import safe_open, serialize, deserialize, TensorSpec, SafetensorError",
        "import pysafetensors.errors",
    ],
)
def test_import_pulls_in_no_framework(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_serialize_and_deserialize_need_no_numpy() -> None:
    statement = (
        "import array, pysafetensors as p\n"
        "d = p.serialize({'a': array.array('f', [1.0, 2.0])}, metadata={'k': 'v'})\n"
        "assert p.deserialize(d)[0][1]['shape'] == [2]"
    )
    assert _loaded_after(statement) == []


def test_the_subprocess_check_can_fail() -> None:
    # guard against a vacuous check: importing the numpy face does load numpy
    assert "numpy" in _loaded_after("import pysafetensors.numpy")


def test_missing_framework_names_the_extra(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    path.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # as if torch were not installed\n"
        "import pysafetensors\n"
        "try:\n"
        f"    pysafetensors.safe_open({str(path)!r}, 'pt')\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.startswith("MissingDependency")
    assert "pip install 'pysafetensors[torch]'" in out.stdout
