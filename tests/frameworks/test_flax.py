"""pysafetensors.flax and safe_open(framework="flax"/"jax")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from _fw_cases import ALL_CODES, Case, FrameworkSuite, _write, same, sample, upstream_equal

import pysafetensors.numpy as ps_numpy
from pysafetensors import safe_open
from pysafetensors.errors import UnsupportedDtype

X64 = bool(jax.config.jax_enable_x64)
WIDE = frozenset({"F64", "I64", "U64"})
SUPPORTED = frozenset(c for c in ALL_CODES if not c.startswith("F6_")) - (frozenset() if X64 else WIDE)

CASE = Case(
    face="flax",
    names=("flax", "jax"),
    upstream_name="flax",
    supported=SUPPORTED,
    narrowed=frozenset() if X64 else WIDE,
    from_np=lambda a: jnp.asarray(a),
    to_np=lambda t: np.asarray(t),
    tensor_type=jax.Array,
)


class TestFlax(FrameworkSuite):
    case = CASE


def test_64_bit_types_without_x64_follow_jax(tmp_path: Any) -> None:
    if X64:
        pytest.skip("jax_enable_x64 is on")
    small = {"i": np.array([1, -2, 3], np.int64), "u": np.array([7], np.uint64), "f": np.array([0.5], np.float64)}
    loaded = CASE.module.load(ps_numpy.save(small))
    assert loaded["i"].dtype == jnp.int32 and np.array_equal(np.asarray(loaded["i"]), [1, -2, 3])
    assert loaded["u"].dtype == jnp.uint32 and loaded["f"].dtype == jnp.float32
    # Values jax's 32-bit types cannot hold are an error, never a silent wrap.
    for name, arr in {"big": np.array([2**40], np.int64), "ubig": np.array([2**33], np.uint64)}.items():
        path = _write(tmp_path, ps_numpy.save({name: arr}))
        with safe_open(path, "flax") as f, pytest.raises(UnsupportedDtype, match="jax_enable_x64"):
            f.get_tensor(name)


def aligned_file(tmp_path: Any, arr: np.ndarray) -> tuple[str, int]:
    """A file whose one tensor starts 64-byte aligned in the (page-aligned) map."""
    for pad in range(64):
        data = ps_numpy.save({"x": arr}, metadata={"pad": "p" * pad})
        start = 8 + int.from_bytes(data[:8], "little")
        if start % 64 == 0:
            return _write(tmp_path, data), start
    raise AssertionError("no padding aligns the tensor")


def test_zero_copy_on_aligned_buffers(tmp_path: Any) -> None:
    arr = sample("F32", (64,))
    path, start = aligned_file(tmp_path, arr)
    with safe_open(path, "flax") as f:
        x = f.get_tensor("x")
        addr = np.frombuffer(f._file.source.view(start, 4), np.uint8).ctypes.data
    assert addr % 64 == 0
    assert x.unsafe_buffer_pointer() == addr  # jax aliases the map: no copy
    assert same(np.asarray(x), arr)


def test_equal_to_upstream_load(tmp_path: Any) -> None:
    upstream = pytest.importorskip("safetensors.flax")
    compared = upstream_equal(CASE, tmp_path, upstream.load_file)
    assert {"F32", "BF16", "I32", "BOOL"} <= set(compared)


def test_64_bit_types_with_x64_are_exact(tmp_path: Any) -> None:
    # jax_enable_x64 is process-wide: check it in a child interpreter.
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, jax.numpy as jnp, pysafetensors.flax as fx\n"
        "a = {'f': np.array([1/3], np.float64), 'i': np.array([2**40], np.int64), 'u': np.array([2**63], np.uint64)}\n"
        "out = fx.load(fx.save({k: jnp.asarray(v) for k, v in a.items()}))\n"
        "assert all(out[k].dtype == v.dtype and np.asarray(out[k]).tobytes() == v.tobytes() for k, v in a.items()), out\n"
    )
    src = os.path.dirname(os.path.dirname(ps_numpy.__file__))
    env = {**os.environ, "JAX_ENABLE_X64": "1", "PYTHONPATH": src}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
