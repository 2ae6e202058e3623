"""serialize, serialize_file, deserialize and TensorSpec; compared with upstream."""

from __future__ import annotations

import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors import SafetensorError, TensorSpec, errors

st = pytest.importorskip("safetensors")


def test_a_0d_float4_pair_is_refused_when_serialized_as_upstream() -> None:
    # Two F4 values have no file shape that reads back as 0-d: the spec keeps shape [], the
    # layout refuses half a byte, with upstream's words.
    buf = np.array([0x12], dtype=np.uint8)
    kw = {"dtype": "float4_e2m1fn_x2", "shape": [], "data_ptr": buf.ctypes.data, "data_len": 1}
    spec, upspec = TensorSpec(**kw), st.TensorSpec(**kw)  # type: ignore[arg-type]
    assert spec.shape == upspec.shape == []
    with pytest.raises(errors.MisalignedSubByte) as ours:
        pysafetensors.serialize({"a": spec})
    with pytest.raises(st.SafetensorError) as up:
        st.serialize({"a": upspec})
    reason = str(up.value).removeprefix("Error while serializing: ")
    assert str(ours.value).startswith(reason) and "'a'" in str(ours.value)


def test_tensorspec_validation() -> None:
    with pytest.raises(TypeError):
        TensorSpec("float32", [1], 0, 0)  # type: ignore[misc]
    with pytest.raises(errors.UnknownDtype) as ours:
        TensorSpec(dtype="F32", shape=[1], data_ptr=0, data_len=4)
    with pytest.raises(st.SafetensorError) as up:
        st.TensorSpec(dtype="F32", shape=[1], data_ptr=0, data_len=4)
    assert str(ours.value).startswith(str(up.value))
    spec = TensorSpec(dtype="float4_e2m1fn_x2", shape=[2, 3], data_ptr=0, data_len=6)
    upspec = st.TensorSpec(dtype="float4_e2m1fn_x2", shape=[2, 3], data_ptr=0, data_len=6)
    assert (spec.dtype, spec.shape, spec.data_len) == (upspec.dtype, upspec.shape, upspec.data_len) == ("F4", [2, 6], 6)
    with pytest.raises(SafetensorError):
        TensorSpec(dtype="float32", shape=[-1], data_ptr=0, data_len=4)
    with pytest.raises(SafetensorError):
        TensorSpec(dtype="float32", shape=[1], data_ptr=-1, data_len=4)


def test_serialize_tensorspec_f4_matches_upstream() -> None:
    buf = np.array([0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC], dtype=np.uint8)
    kw = {"dtype": "float4_e2m1fn_x2", "shape": [2, 3], "data_ptr": buf.ctypes.data, "data_len": 6}
    ours = pysafetensors.serialize({"w": TensorSpec(**kw)}, metadata={"m": "1"})
    assert ours == st.serialize({"w": st.TensorSpec(**kw)}, metadata={"m": "1"})
    assert pysafetensors.deserialize(ours) == [("w", {"shape": [2, 6], "dtype": "F4", "data": buf.tobytes()})]


@pytest.mark.parametrize(
    "value, dtype, shape",
    [
        (memoryview(np.arange(4, dtype=np.float32)), "F32", [4]),
        (array.array("h", [1, -2, 3]), "I16", [3]),
        (array.array("Q", [1, 2]), "U64", [2]),
        (np.arange(6, dtype=np.int32).reshape(2, 3), "I32", [2, 3]),
        (np.arange(6, dtype=np.int32).reshape(2, 3).T, "I32", [3, 2]),
        (np.arange(10, dtype=np.float64)[::3], "F64", [4]),
        (np.array([True, False]), "BOOL", [2]),
        (np.array([1 + 2j], dtype=np.complex64), "C64", [1]),
        (bytearray(b"ab"), "U8", [2]),
        (b"xyz", "U8", [3]),
    ],
    ids=lambda v: type(v).__name__,
)
def test_serialize_buffer_protocol(value: Any, dtype: str, shape: list[int]) -> None:
    data = pysafetensors.serialize({"t": value})
    [(name, info)] = pysafetensors.deserialize(data)
    assert (name, info["dtype"], info["shape"]) == ("t", dtype, shape)
    expected = np.asarray(value).tobytes() if not isinstance(value, (bytes, bytearray)) else bytes(value)
    if isinstance(value, np.ndarray):
        assert data == pnp.save({"t": value})  # logical C order, same bytes as the numpy face
    assert info["data"] == expected
    [(_, up)] = st.deserialize(data)
    assert bytes(up["data"]) == expected and up["dtype"] == dtype


def test_serialize_legacy_dict_form() -> None:
    raw = np.arange(3, dtype=np.float32).tobytes()
    for code in ("F32", "float32"):
        data = pysafetensors.serialize({"t": {"dtype": code, "shape": [3], "data": raw}})
        assert pysafetensors.deserialize(data) == [("t", {"shape": [3], "dtype": "F32", "data": raw})]


def test_serialize_rejects_bad_input() -> None:
    spec = TensorSpec(dtype="float32", shape=[0], data_ptr=0, data_len=0)
    with pytest.raises(SafetensorError):
        pysafetensors.serialize({1: spec})  # type: ignore[dict-item]
    with pytest.raises(errors.InvalidMetadata):
        pysafetensors.serialize({"a": spec}, metadata={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(errors.UnsupportedValue):
        pysafetensors.serialize({"a": object()})
    with pytest.raises(SafetensorError):
        pysafetensors.serialize({"a": TensorSpec(dtype="float32", shape=[2], data_ptr=0, data_len=4)})
    with pytest.raises(errors.UnsupportedValue, match="big-endian"):
        pysafetensors.serialize({"a": np.zeros(2, dtype=">f4")})


def test_deserialize_format_and_file_order() -> None:
    data = pnp.save({"z": np.array([1], dtype=np.int8), "a": np.array([2.5], dtype=np.float64),
                     "m": np.array([3], dtype=np.int8)})
    out = pysafetensors.deserialize(data)
    assert out == [
        ("a", {"shape": [1], "dtype": "F64", "data": np.array([2.5]).tobytes()}),
        ("m", {"shape": [1], "dtype": "I8", "data": b"\x03"}),
        ("z", {"shape": [1], "dtype": "I8", "data": b"\x01"}),
    ]
    assert sorted(out) == sorted((n, {**d, "data": bytes(d["data"])}) for n, d in st.deserialize(data))
    assert pysafetensors.deserialize(bytearray(data)) == out
    assert pysafetensors.deserialize(memoryview(data)) == out


def test_serialize_file_round_trip(tmp_path: Path) -> None:
    a = np.arange(8, dtype=np.uint16)
    path = tmp_path / "sf.safetensors"
    pysafetensors.serialize_file({"a": a}, path, metadata={"k": "v"})
    st.serialize_file({"a": st.TensorSpec(dtype="uint16", shape=[8], data_ptr=a.ctypes.data, data_len=16)},
                      str(tmp_path / "up.safetensors"), metadata={"k": "v"})
    assert path.read_bytes() == (tmp_path / "up.safetensors").read_bytes()
