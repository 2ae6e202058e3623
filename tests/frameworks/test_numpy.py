"""The numpy face: every dtype, byte order, memory layout, read-only mmap views, upstream parity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors import SafetensorError, safe_open

snp = pytest.importorskip("safetensors.numpy")

ALL_NUMPY_DTYPES = [
    np.bool_, np.uint8, np.int8, np.int16, np.uint16, np.float16, np.int32, np.uint32, np.float32, np.complex64,
    np.float64, np.int64, np.uint64, ml_dtypes.bfloat16, ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e8m0fnu, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn,
    ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn,
]
CODES = {
    "bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16", "uint16": "U16", "float16": "F16", "int32": "I32",
    "uint32": "U32", "float32": "F32", "complex64": "C64", "float64": "F64", "int64": "I64", "uint64": "U64",
    "bfloat16": "BF16", "float8_e5m2": "F8_E5M2", "float8_e4m3fn": "F8_E4M3", "float8_e8m0fnu": "F8_E8M0",
    "float8_e4m3fnuz": "F8_E4M3FNUZ", "float8_e5m2fnuz": "F8_E5M2FNUZ", "float4_e2m1fn": "F4",
    "float6_e2m3fn": "F6_E2M3", "float6_e3m2fn": "F6_E3M2",
}


def _values(dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    nd = np.dtype(dtype)
    if nd.kind == "b":
        return (np.arange(n) % 3 == 0).reshape(shape)
    if nd.kind in "iu":
        return (np.arange(n) * 37 % 251).astype(dtype).reshape(shape)
    if nd.kind == "c":
        return (np.arange(n) + 1j * np.arange(n)[::-1]).astype(dtype).reshape(shape)
    # floats incl. ml_dtypes: small exactly representable values, cycling through signs where allowed
    base = np.array([0.5, 1.0, 1.5, 2.0, 4.0, -1.0, -0.5, 3.0], dtype=np.float32)
    vals = np.resize(base, n)
    if "e8m0" in nd.name:
        vals = np.abs(vals) + 0.0  # E8M0 has no sign, no zero-crossing values
        vals[vals == 1.5] = 2.0
        vals[vals == 3.0] = 4.0
    return vals.astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", ALL_NUMPY_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_every_dtype_round_trips(dtype: Any, backend: str, tmp_path: Path) -> None:
    shapes = [(4, 8), (8,), (0, 4)] + ([()] if np.dtype(dtype).itemsize * 8 >= 8 and "float4" not in
                                        np.dtype(dtype).name and "float6" not in np.dtype(dtype).name else [])
    arrays = {f"t{i}": _values(dtype, s) for i, s in enumerate(shapes)}
    path = tmp_path / "x.safetensors"
    pnp.save_file(arrays, path)
    back = pnp.load_file(path, backend=backend)
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape
        assert back[k].tobytes() == a.tobytes()
    [(_, info), *_] = pysafetensors.deserialize(path.read_bytes())
    assert info["dtype"] == CODES[np.dtype(dtype).name]
    assert pnp.load(pnp.save(arrays)).keys() == arrays.keys()


def test_f4_packing_agrees_with_torch() -> None:
    torch = pytest.importorskip("torch")
    import pysafetensors.torch as ptt

    a = np.array([[0.5, 1.0, -2.0, 6.0], [0.0, -0.5, 3.0, 1.5]], dtype=ml_dtypes.float4_e2m1fn)
    t = ptt.load(pnp.save({"w": a}))["w"]
    assert t.dtype == torch.float4_e2m1fn_x2 and tuple(t.shape) == (2, 2)
    # low nibble = first element: 0.5 is code 0x1, 1.0 is 0x2 -> byte 0x21
    assert t.view(torch.uint8)[0, 0].item() == 0x21
    assert np.array_equal(pnp.load(ptt.save({"w": t}))["w"], a)


def test_f6_packs_four_values_in_three_bytes() -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.0, 7.5], dtype=ml_dtypes.float6_e2m3fn)
    [(_, info)] = pysafetensors.deserialize(pnp.save({"a": a}))
    assert len(info["data"]) == 6 and info["shape"] == [8]
    codes = a.view(np.uint8).astype(np.uint32)
    word = codes[0] | codes[1] << 6 | codes[2] << 12 | codes[3] << 18
    assert info["data"][:3] == bytes([word & 0xFF, word >> 8 & 0xFF, word >> 16])
    with pytest.raises(SafetensorError):
        pnp.save({"a": a[:3]})  # 18 bits: not a whole number of bytes


@pytest.mark.parametrize("dtype", ["<f4", ">f4", ">i8", ">u2", ">c8", ">f8", "<i2", "=f4"])
def test_big_endian_swapped_without_mutating_input(dtype: str) -> None:
    a = np.arange(6).astype(dtype).reshape(2, 3)
    before = a.tobytes()
    flags = (a.dtype.byteorder, a.flags.writeable)
    data = pnp.save({"a": a})
    assert a.tobytes() == before and (a.dtype.byteorder, a.flags.writeable) == flags
    native = a.astype(a.dtype.newbyteorder("<"))
    assert data == pnp.save({"a": native}) == snp.save({"a": native})
    back = pnp.load(data)["a"]
    assert back.dtype == native.dtype and np.array_equal(back, a)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
        lambda: np.arange(12, dtype=np.int16).reshape(3, 4).T,
        lambda: np.arange(20, dtype=np.float64)[::2],
        lambda: np.arange(60, dtype=np.int32).reshape(3, 4, 5)[:, ::2, 1:4],
        lambda: np.arange(12, dtype=">f4").reshape(3, 4).T,
        lambda: np.broadcast_to(np.arange(3, dtype=np.uint8), (4, 3)),
        lambda: np.arange(16, dtype=np.float32).reshape(4, 4)[::-1],
        lambda: np.asfortranarray(np.arange(8, dtype=np.float32).reshape(2, 4)).astype(ml_dtypes.float4_e2m1fn),
    ],
)
def test_strided_and_fortran_saved_in_logical_c_order(make: Any, tmp_path: Path) -> None:
    a = make()
    c = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype)
    data = pnp.save({"a": a})
    assert data == pnp.save({"a": c})
    assert np.array_equal(pnp.load(data)["a"], a)
    path = tmp_path / "s.safetensors"
    pnp.save_file({"a": a}, path)
    assert path.read_bytes() == data
    if c.dtype in (np.float32, np.int16, np.float64, np.int32, np.uint8):
        assert snp.load(data)["a"].tolist() == a.tolist()  # upstream reads our logical order


def test_mmap_arrays_are_readonly_views_pread_arrays_writable(tmp_path: Path) -> None:
    path = tmp_path / "v.safetensors"
    pnp.save_file({"a": np.arange(1000, dtype=np.float32), "b": np.ones(3, dtype=np.int8)}, path)
    before = path.read_bytes()
    mm = pnp.load_file(path)
    assert not mm["a"].flags.writeable and not mm["a"].flags.owndata
    with pytest.raises(ValueError):
        mm["a"][0] = 5
    with safe_open(path, "np") as f:
        t = f.get_tensor("a")
        assert not t.flags.writeable
        assert np.shares_memory(t, f.get_tensor("a"))  # zero-copy: both view the one map
    pr = pnp.load_file(path, backend="pread")
    assert pr["a"].flags.writeable
    pr["a"][0] = 42
    with safe_open(path, "np", backend="pread") as f:
        g = f.get_tensor("b")
        g[:] = 9
    assert path.read_bytes() == before
    # a one-range slice is a zero-copy (read-only) view of the map; pread slices are fresh
    with safe_open(path, "np") as f:
        s = f.get_slice("a")[10:20]
        assert not s.flags.writeable and s.tolist() == list(range(10, 20))
    with safe_open(path, "np", backend="pread") as f:
        s = f.get_slice("a")[10:20]
        assert s.flags.writeable and s.tolist() == list(range(10, 20))
    with safe_open(path, "np") as f:
        s = f.get_slice("a")[10:20]
        with pytest.raises(ValueError):
            s[0] = 1
    assert path.read_bytes() == before


def test_mmap_arrays_outlive_the_handle(tmp_path: Path) -> None:
    path = tmp_path / "o.safetensors"
    pnp.save_file({"a": np.arange(100, dtype=np.int64)}, path)
    with safe_open(path, "np") as f:
        a = f.get_tensor("a")
    assert a.sum() == sum(range(100))
    loaded = pnp.load_file(path)["a"]
    del f
    assert loaded[-1] == 99


def test_save_empty_dict_with_metadata_reads_back(tmp_path: Path) -> None:
    data = pnp.save({}, metadata={"k": "v", "a": "b"})
    assert pnp.load(data) == {}
    path = tmp_path / "e.safetensors"
    pnp.save_file({}, path, metadata={"k": "v"})
    with safe_open(path, "np") as f:
        assert f.metadata() == {"k": "v"} and f.keys() == []


def test_load_bytes_matches_upstream() -> None:
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "y": np.array([1, 2], dtype=np.uint32)}
    data = snp.save(arrays, metadata={"format": "np"})
    ours = pnp.load(data)
    up = snp.load(data)
    assert list(ours) == ["x", "y"] and ours.keys() == up.keys()
    for k in arrays:
        assert ours[k].dtype == up[k].dtype and np.array_equal(ours[k], up[k])


def test_numpy_scalars_and_bad_values() -> None:
    data = pnp.save({"s": np.float32(2.5)})
    assert pnp.load(data)["s"].shape == () and pnp.load(data)["s"] == 2.5
    with pytest.raises(SafetensorError):
        pnp.save({"a": [1, 2, 3]})  # type: ignore[dict-item]
    with pytest.raises(SafetensorError):
        pnp.save({"a": np.array(["x"])})
    with pytest.raises(SafetensorError):
        pnp.save({"a": np.zeros(2, dtype=np.float128 if hasattr(np, "float128") else np.object_)})
    with pytest.raises(TypeError):
        pnp.save([np.zeros(2)])  # type: ignore[arg-type]


def test_numpy_device_must_be_cpu(tmp_path: Path) -> None:
    path = tmp_path / "d.safetensors"
    pnp.save_file({"a": np.zeros(1)}, path)
    with pytest.raises(pysafetensors.errors.InvalidDevice, match="not supported for framework numpy"):
        safe_open(path, "np", device="cuda:0")


@pytest.mark.parametrize(
    "dtype, shape, ok, bad",
    [
        (ml_dtypes.float4_e2m1fn, (4, 6), [slice(1, 3), 0, -1, (slice(None, None, 2),), (1, slice(0, 2)), (1, slice(0, 4))],
         [(slice(None), 1), (1, slice(1, 3))]),
        (ml_dtypes.float6_e2m3fn, (6, 4), [slice(1, 3), 0, -1, (slice(None, None, 2),), (1, slice(0, 4))],
         [(1, slice(0, 2)), (slice(None), 1)]),
    ],
)
def test_sub_byte_slicing(dtype: Any, shape: tuple[int, ...], ok: list[Any], bad: list[Any]) -> None:
    full = _values(dtype, shape)
    with safe_open(pnp.save({"x": full}), "np") as f:
        for index in ok:
            got = f.get_slice("x")[index]
            assert got.dtype == full.dtype and got.tobytes() == full[index].tobytes()
        for index in bad:
            with pytest.raises(pysafetensors.errors.MisalignedSubByte, match="^The slice is slicing for subbytes"):
                f.get_slice("x")[index]


@pytest.mark.parametrize("dtype", [np.complex128, np.object_, "U1", np.longdouble], ids=str)
def test_unsupported_dtype_message_matches_upstream(dtype: Any) -> None:
    a = np.zeros(2, dtype=dtype)
    with pytest.raises(pysafetensors.errors.UnsupportedDtype) as ours:
        pnp.save({"a": a})
    with pytest.raises(Exception) as up:
        snp.save({"a": a})
    assert str(ours.value).split(".")[0] == str(up.value).split(".")[0]  # 'Unknown dtype "complex128"'
