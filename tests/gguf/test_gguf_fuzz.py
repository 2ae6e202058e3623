"""The GGUF fuzz target (fuzz/gguf_target.py) on fixed seeds, and a regression test for each
bug it found.  tests/reliability/test_fuzz_targets.py replays it with the other targets."""

from __future__ import annotations

import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fuzz.gen import random_input
from fuzz.targets import TARGETS, classify

from pysafetensors.errors import UnsupportedShape
from pysafetensors.gguf import GGUFFile
from pysafetensors.io.sources import MemorySource

ROOT = Path(__file__).resolve().parents[2]


def _file(dims: list[int], qtype: int) -> bytes:
    name = b"t"
    out = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", len(name)) + name
    out += struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, qtype, 0)
    return out + bytes(-len(out) % 32)


def test_the_target_is_registered() -> None:
    assert "gguf" in TARGETS


@pytest.mark.parametrize("seed", [2, 75, 4873])
def test_seeds_that_found_bugs(seed: int) -> None:
    assert classify("gguf", random_input(random.Random(seed)), seed) is None


def test_empty_quantized_tensor_reads_as_empty() -> None:
    """Found by the fuzzer (seed 2): a Q4_0 tensor with no rows went to gguf-py, whose
    dequantize cannot reshape an empty array (ValueError); now an empty float32 array."""
    for dims in ([32, 0], [0, 5]):
        with GGUFFile(MemorySource(_file(dims, 2))) as f:
            assert f.array("t").shape == tuple(reversed(dims)) and f.array("t").dtype == np.float32
            assert len(f.decoded("t")) == 0


def test_empty_tensor_with_a_row_too_long_for_numpy() -> None:
    """Found by the fuzzer (seed 4873): no rows, but a row of 2**62 elements: numpy refuses the
    (0, 2**62) float32 array ('array is too big'); now UnsupportedShape naming the tensor."""
    with GGUFFile(MemorySource(_file([2**62, 0], 0))) as f, pytest.raises(UnsupportedShape, match="'t'"):
        f.array("t")


def test_the_runner_fuzzes_gguf() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "fuzz" / "run.py"), "--target", "gguf", "--seconds", "3",
                           "--seed", "11"], check=False, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "no bugs" in proc.stdout, proc.stdout + proc.stderr
