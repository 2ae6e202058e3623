"""Hypothesis round trips, compared byte for byte with upstream safetensors.

Every dtype (BF16, the F8 kinds, F8_E8M0, C64, packed F4/F6, U16/U32/U64...) through three
faces: TensorSpec/serialize, numpy and torch.  Our bytes must equal upstream's, upstream must
read our files back identically, and we must read upstream's files identically.
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as hs

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors._adapters.numpy import numpy_dtype, unpack
from pysafetensors.format import DType, all_dtypes, by_code

st = pytest.importorskip("safetensors")
snp = pytest.importorskip("safetensors.numpy")

SETTINGS = settings(max_examples=int(os.environ.get("PYSAFETENSORS_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODES = [d.code for d in all_dtypes()]
# Upstream's TensorSpec has no F6 names, and its numpy face knows only numpy's own dtypes.
UPSTREAM_SPEC = {d.code for d in all_dtypes() if not d.code.startswith("F6")}
UPSTREAM_NUMPY = {"BOOL", "U8", "I8", "I16", "U16", "F16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"}

names = hs.text(
    alphabet=hs.characters(blacklist_categories=("Cs",)), min_size=0, max_size=6
).filter(lambda s: s != "__metadata__")
metadata = hs.one_of(
    hs.none(),
    hs.dictionaries(hs.text(max_size=5), hs.text(max_size=5), max_size=3),
).filter(lambda m: m is None or all(_encodable(k) and _encodable(v) for k, v in m.items()))


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@hs.composite
def raw_tensor(draw: Any, codes: list[str] = CODES) -> tuple[DType, tuple[int, ...], bytes]:
    """A dtype, a shape (0-rank and empty included) and valid random bytes for it."""
    dtype = by_code(draw(hs.sampled_from(codes)))
    shape = list(draw(hs.lists(hs.integers(0, 4), min_size=0, max_size=3)))
    if dtype.packed:
        # F4 needs an even element count (torch stores pairs), F6 a multiple of 4.
        unit = 2 if dtype.bits == 4 else 4
        shape = (shape or [1])
        shape[-1] = shape[-1] * unit
    n = 1
    for d in shape:
        n *= d
    nbytes = n * dtype.bits // 8
    data = draw(hs.binary(min_size=nbytes, max_size=nbytes))
    if dtype.code == "BOOL":
        data = bytes(b & 1 for b in data)
    return dtype, tuple(shape), data


def tensor_dicts(codes: list[str] = CODES) -> Any:
    return hs.dictionaries(names, raw_tensor(codes), max_size=4)


def _spec(dtype: DType, shape: tuple[int, ...], data: bytes, keep: list[Any], spec_cls: Any) -> Any:
    buf = ctypes.create_string_buffer(data, len(data) or 1)
    keep.append(buf)
    spec_shape = list(shape)
    if dtype.code == "F4":  # TensorSpec takes float4_e2m1fn_x2 storage shape (pairs)
        spec_shape[-1] //= 2
    return spec_cls(dtype=dtype.spec_name, shape=spec_shape, data_ptr=ctypes.addressof(buf), data_len=len(data))


def _as_numpy(dtype: DType, shape: tuple[int, ...], data: bytes) -> np.ndarray:
    nd = numpy_dtype(dtype)
    if dtype.packed:
        n = int(np.prod(shape, dtype=np.int64))
        return unpack(data, dtype, n).view(nd).reshape(shape)
    return np.frombuffer(data, dtype=nd).reshape(shape).copy()


def _same_file(ours: bytes, up: bytes, meta: dict[str, str] | None) -> None:
    """Byte equality; with several metadata keys (upstream orders them randomly) equal parsed
    headers, equal header length and equal data instead."""
    if not meta or len(meta) < 2:
        assert ours == up
        return
    n = int.from_bytes(ours[:8], "little")
    assert n == int.from_bytes(up[:8], "little") and len(ours) == len(up)
    assert json.loads(ours[8 : 8 + n]) == json.loads(up[8 : 8 + n])
    assert ours[8 + n :] == up[8 + n :]
    # and ours keeps the caller's order
    assert list(json.loads(ours[8 : 8 + n])["__metadata__"]) == list(meta)


def _same_torch(a: Any, b: Any, raw: Any) -> bool:
    return bool(a.dtype == b.dtype and a.shape == b.shape and raw(a) == raw(b))


def _check_deserialized(out: list[tuple[str, dict[str, Any]]], tensors: dict[str, Any]) -> None:
    assert {n for n, _ in out} == set(tensors)
    for name, info in out:
        dtype, shape, data = tensors[name]
        assert info["dtype"] == dtype.code
        assert list(info["shape"]) == list(shape)
        assert bytes(info["data"]) == data


@SETTINGS
@given(tensors=tensor_dicts(), meta=metadata)
def test_serialize_matches_upstream(tensors: dict[str, Any], meta: dict[str, str] | None) -> None:
    keep: list[Any] = []
    ours = pysafetensors.serialize(
        {k: _spec(*v, keep, pysafetensors.TensorSpec) for k, v in tensors.items()}, metadata=meta
    )
    # upstream writes broken JSON for metadata with no tensors (a bug we do not copy)
    if all(v[0].code in UPSTREAM_SPEC for v in tensors.values()) and (tensors or meta is None):
        up = st.serialize({k: _spec(*v, keep, st.TensorSpec) for k, v in tensors.items()}, metadata=meta)
        _same_file(ours, up, meta)
    # upstream reads ours; we read ours; file order equal
    up_out = st.deserialize(ours)
    our_out = pysafetensors.deserialize(ours)
    # upstream's deserialize order is arbitrary; ours is file order (dtype rank, then name)
    assert [n for n, _ in our_out] == sorted(tensors, key=lambda n: (-tensors[n][0].rank, n))
    _check_deserialized(up_out, tensors)
    _check_deserialized(our_out, tensors)
    with pysafetensors.safe_open(ours, "np") as f:
        assert f.metadata() == meta


@SETTINGS
@given(tensors=tensor_dicts(), meta=metadata)
def test_numpy_face_round_trip(tensors: dict[str, Any], meta: dict[str, str] | None) -> None:
    arrays = {k: _as_numpy(*v) for k, v in tensors.items()}
    ours = pnp.save(arrays, metadata=meta)
    keep: list[Any] = []
    spec_bytes = pysafetensors.serialize(
        {k: _spec(*v, keep, pysafetensors.TensorSpec) for k, v in tensors.items()}, metadata=meta
    )
    assert ours == spec_bytes
    _check_deserialized(st.deserialize(ours), tensors)
    back = pnp.load(ours)
    assert list(back) == [n for n, _ in pysafetensors.deserialize(ours)]
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape
        assert back[k].tobytes() == a.tobytes()
    if all(v[0].code in UPSTREAM_NUMPY for v in tensors.values()) and (tensors or meta is None):
        _same_file(ours, snp.save(arrays, metadata=meta), meta)
        up_back = snp.load(ours)
        for k, a in arrays.items():
            assert up_back[k].dtype == a.dtype and up_back[k].tobytes() == a.tobytes()


@SETTINGS
@given(tensors=tensor_dicts([c for c in CODES if not c.startswith("F6")]), meta=metadata)
def test_torch_face_round_trip(tensors: dict[str, Any], meta: dict[str, str] | None) -> None:
    torch = pytest.importorskip("torch")
    stt = pytest.importorskip("safetensors.torch")
    import pysafetensors.torch as ptt
    from pysafetensors._adapters.torch import torch_dtype

    def as_torch(dtype: DType, shape: tuple[int, ...], data: bytes) -> Any:
        tshape = list(shape)
        if dtype.code == "F4":
            tshape[-1] //= 2
        flat = torch.tensor(list(data), dtype=torch.uint8)
        return flat.view(torch_dtype(dtype)).reshape(tshape)

    def raw(t: Any) -> bytes:
        return bytes(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())

    ts = {k: as_torch(*v) for k, v in tensors.items()}
    ours = ptt.save(ts, metadata=meta)
    if ts or meta is None:
        _same_file(ours, stt.save(ts, metadata=meta), meta)
    _check_deserialized(st.deserialize(ours), tensors)
    back = ptt.load(ours)
    for k, t in ptt.load(stt.save(ts, metadata=meta) if ts or meta is None else ours).items():
        assert _same_torch(t, ts[k], raw)  # upstream-written bytes, read by us
    for k, t in ts.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape and raw(back[k]) == raw(t)
    if all(v[0].code not in ("F4", "F8_E8M0") for v in tensors.values()):  # upstream cannot load those
        up_back = stt.load(ours)
        for k, t in ts.items():
            assert up_back[k].dtype == t.dtype and raw(up_back[k]) == raw(t)


@SETTINGS
@given(tensors=tensor_dicts([c for c in CODES if c in UPSTREAM_SPEC]), meta=metadata)
def test_we_read_upstream_files(tensors: dict[str, Any], meta: dict[str, str] | None, tmp_path_factory: Any) -> None:
    assume(tensors or meta is None)  # upstream writes unreadable JSON for metadata without tensors
    keep: list[Any] = []
    path = tmp_path_factory.mktemp("up") / "u.safetensors"
    st.serialize_file({k: _spec(*v, keep, st.TensorSpec) for k, v in tensors.items()}, str(path), metadata=meta)
    for backend in ("mmap", "pread"):
        with pysafetensors.safe_open(path, "np", backend=backend) as f, st.safe_open(str(path), "np") as g:
            assert f.keys() == g.keys()
            # zero-sized tensors share offsets; upstream orders such ties randomly
            if all(v[2] for v in tensors.values()):
                assert f.offset_keys() == g.offset_keys()
            assert sorted(f.offset_keys()) == sorted(g.offset_keys())
            assert f.metadata() == g.metadata()
            for k in f.keys():  # noqa: SIM118 - safe_open is not iterable
                dtype, shape, data = tensors[k]
                a = f.get_tensor(k)
                assert a.shape == shape
                expected = _as_numpy(dtype, shape, data)
                assert a.dtype == expected.dtype and a.tobytes() == expected.tobytes()
