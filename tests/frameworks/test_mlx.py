"""pysafetensors.mlx and safe_open(framework="mlx")."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")

from _fw_cases import Case, FrameworkSuite, same, upstream_equal

SUPPORTED = frozenset(
    {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"}
)


def from_np(a: np.ndarray) -> Any:
    if a.dtype == np.float64:
        return mx.array(a, dtype=mx.float64)
    return mx.array(a)


def to_np(t: Any) -> np.ndarray:
    if t.dtype == mx.bfloat16:
        return np.array(t.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.array(t)


CASE = Case(
    face="mlx",
    names=("mlx",),
    upstream_name="mlx",
    supported=SUPPORTED,
    from_np=from_np,
    to_np=to_np,
    tensor_type=mx.array,
)


class TestMlx(FrameworkSuite):
    case = CASE


def test_float64_stays_float64() -> None:
    arr = np.array([1 / 3, 2.0**-40], np.float64)  # not exact in float32
    loaded = CASE.module.load(CASE.module.save({"x": from_np(arr)}))
    assert loaded["x"].dtype == mx.float64 and same(to_np(loaded["x"]), arr)


def test_lazy_arrays_are_evaluated_on_save() -> None:
    x = mx.arange(6, dtype=mx.float32).reshape(2, 3) * 2  # a lazy graph, not yet computed
    loaded = CASE.module.load(CASE.module.save({"x": x}))
    assert same(to_np(loaded["x"]), (np.arange(6, dtype=np.float32).reshape(2, 3) * 2))


def test_equal_to_upstream_load(tmp_path: Any) -> None:
    upstream = pytest.importorskip("safetensors.mlx")

    def upstream_narrowing_f64(path: str) -> dict[str, Any]:
        out = upstream.load_file(path)
        if out["x"].dtype == mx.float32 and "F64" in path:
            raise TypeError("upstream narrows float64 to float32")  # a documented difference
        return out

    compared = upstream_equal(CASE, tmp_path, upstream_narrowing_f64)
    assert {"F32", "BF16", "I64", "BOOL", "C64"} <= set(compared)
