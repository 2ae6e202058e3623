"""pysafetensors.paddle and safe_open(framework="paddle")."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    paddle = pytest.importorskip("paddle")

from _fw_cases import Case, FrameworkSuite, _write, np_dtype, same, sample, upstream_equal

import pysafetensors.numpy as ps_numpy
from pysafetensors import safe_open
from pysafetensors.errors import InvalidDevice

SUPPORTED = frozenset(
    {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "C64", "F64", "I64", "U64",
     "F8_E4M3", "F8_E5M2"}
)
_BY_NAME = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "BF16": "bfloat16", "U16": "uint16",
            "U32": "uint32", "U64": "uint64"}


def from_np(a: np.ndarray) -> Any:
    """Built without pysafetensors.  bfloat16/float8 go in as bits (paddle's float32 ->
    float8_e5m2 cast rounds 2.5 down to 2.0), unsigned types through astype."""
    for code, name in _BY_NAME.items():
        if a.dtype == np_dtype(code):
            if code in ("BF16", "F8_E4M3", "F8_E5M2"):
                return paddle.to_tensor(a.view(f"i{a.itemsize}")).view(getattr(paddle, name))
            return paddle.to_tensor(a.astype(np.int64)).astype(getattr(paddle, name))
    return paddle.to_tensor(a)


def to_np(t: Any) -> np.ndarray:
    for code, name in _BY_NAME.items():
        if t.dtype == getattr(paddle, name) and code not in ("U16", "U32", "U64"):
            bits = paddle.int16 if code == "BF16" else paddle.int8
            return t.view(bits).numpy().view(np_dtype(code))
    return t.numpy()


CASE = Case(
    face="paddle",
    names=("paddle",),
    upstream_name="paddle",
    supported=SUPPORTED,
    from_np=from_np,
    to_np=to_np,
    tensor_type=paddle.Tensor,
    numpy_only=False,
)


class TestPaddle(FrameworkSuite):
    case = CASE


def test_load_takes_a_device() -> None:
    data = ps_numpy.save({"x": sample("F32")})
    assert same(to_np(CASE.module.load(data, device="cpu")["x"]), sample("F32"))
    assert CASE.module.load(data, "cpu")["x"].place.is_cpu_place()


@pytest.mark.parametrize("device", ["cuda", "cuda:3", 0, "xpu:0", "npu", "mps", "xla", "hpu"])
def test_devices_paddle_or_the_machine_lacks(tmp_path: Any, device: Any) -> None:
    if paddle.device.is_compiled_with_cuda() and device in ("cuda", 0):
        pytest.skip("this paddle has CUDA")
    path = _write(tmp_path, ps_numpy.save({"x": sample("F32")}))
    with pytest.raises(InvalidDevice) as info:
        CASE.module.load_file(path, device=device)
    assert "paddle" in str(info.value) and str(device).split(":")[0] in str(info.value).replace("cuda", "cuda")
    with pytest.raises(InvalidDevice):
        CASE.module.load(ps_numpy.save({"x": sample("F32")}), device=device)


def test_non_contiguous_tensors_save_in_logical_order() -> None:
    base = paddle.to_tensor(sample("F32", (3, 4)))
    t = base.transpose([1, 0])
    loaded = CASE.module.load(CASE.module.save({"t": t}))
    assert same(loaded["t"].numpy(), sample("F32", (3, 4)).T)


def test_loaded_tensors_are_writable_and_private(tmp_path: Any) -> None:
    arrays = {"a": sample("F32", (16,)), "b": sample("I64", (4,))}
    data = ps_numpy.save(arrays)
    path = _write(tmp_path, data)
    for loaded in (CASE.module.load_file(path), CASE.module.load(data)):
        loaded["a"][0] = 99.0  # in-place write on a shared (copy-on-write) or copied buffer
        assert float(loaded["a"][0]) == 99.0
    assert same(CASE.module.load_file(path)["a"].numpy(), arrays["a"])
    with open(path, "rb") as fh:
        assert fh.read() == data
    assert os.path.getsize(path) == len(data)


def test_equal_to_upstream_load(tmp_path: Any) -> None:
    upstream = pytest.importorskip("safetensors.paddle")
    # Upstream loads U16 as paddle.bfloat16 (its legacy alias), reinterpreting the bits.
    compared = upstream_equal(CASE, tmp_path, upstream.load_file, dtype_differs=frozenset({"U16"}))
    assert {"F32", "BF16", "I64", "BOOL", "F64", "F8_E4M3"} <= set(compared)


def test_shares_aligned_buffers_of_the_map(tmp_path: Any) -> None:
    arr = sample("BF16", (64,))
    for pad in range(64):
        data = ps_numpy.save({"x": arr}, metadata={"pad": "p" * pad})
        start = 8 + int.from_bytes(data[:8], "little")
        if start % 64 == 0:
            break
    path = _write(tmp_path, data)
    with safe_open(path, "paddle") as f:
        t = f.get_tensor("x")
        addr = np.frombuffer(f._file.source.view(start, 2), np.uint8).ctypes.data
    assert t.data_ptr() == addr and same(to_np(t), arr)
    t[0] = 5.0  # writes reach private copy-on-write pages only
    with open(path, "rb") as fh:
        assert fh.read() == data
