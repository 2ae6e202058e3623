"""Shared pieces of the framework tests: sample data, and one test suite every face runs.

Each test module builds a ``Case`` (how to make and read its framework's tensors, with
conversions that do not go through pysafetensors) and subclasses ``FrameworkSuite``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _helpers import paddle_before_tensorflow

import pysafetensors.numpy as ps_numpy
from pysafetensors import safe_open
from pysafetensors.errors import InvalidDevice, InvalidFramework, SafetensorError, SliceError, UnsupportedDtype
from pysafetensors.format.dtypes import BY_CODE, CODES

ALL_CODES = CODES

paddle_before_tensorflow()  # paddle 3.3 segfaults when imported after tensorflow 2.21


def np_dtype(code: str) -> np.dtype:
    module, _, attr = BY_CODE[code].numpy.partition(":")
    return np.dtype(getattr(np if module == "numpy" else ml_dtypes, attr))


def sample(code: str, shape: tuple[int, ...] = (2, 3), seed: int = 0) -> np.ndarray:
    """Small values that every format dtype holds exactly (sub-byte ones included)."""
    rng = np.random.default_rng(seed)
    kind = BY_CODE[code].kind
    dt = np_dtype(code)
    if kind == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if kind in ("int", "uint"):
        lo = -50 if kind == "int" else 0
        return rng.integers(lo, 100, shape).astype(dt)
    if kind == "complex":
        return (rng.integers(-8, 8, shape) + 1j * rng.integers(-8, 8, shape)).astype(dt)
    if code == "F8_E8M0":  # powers of two only
        return (2.0 ** rng.integers(-4, 4, shape)).astype(dt)
    return (rng.integers(-6, 7, shape) / 2).astype(np.float32).astype(dt)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and bytes."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@dataclass
class Case:
    face: str  # pysafetensors.<face>
    names: tuple[str, ...]  # safe_open framework names
    upstream_name: str  # framework name in upstream's messages
    supported: frozenset[str]  # dtype codes it must load exactly
    from_np: Callable[[np.ndarray], Any]
    to_np: Callable[[Any], np.ndarray]
    tensor_type: type
    numpy_only: bool = True  # upstream rejects every non-CPU device
    narrowed: frozenset[str] = frozenset()  # load, but not exactly (jax without x64)

    @property
    def module(self) -> Any:
        return importlib.import_module(f"pysafetensors.{self.face}")

    @property
    def unsupported(self) -> list[str]:
        return [c for c in ALL_CODES if c not in self.supported and c not in self.narrowed]


class FrameworkSuite:
    """Tests every framework face runs; subclasses set ``case``."""

    case: Case

    # --- sharded checkpoints and remote inputs ------------------------------------------

    def test_save_sharded_round_trip(self, tmp_path: Any) -> None:
        c = self.case
        arrays = {f"layer.{i}.w": sample("F32", (8, 8), seed=i) for i in range(5)}  # 256 bytes each
        arrays["layer.5.b"] = sample("I32", (3,))
        out = os.path.join(tmp_path, "ckpt")
        index = c.module.save_sharded({k: c.from_np(v) for k, v in arrays.items()}, out, "600B",
                                      metadata={"who": c.face})
        assert os.path.basename(index) == "model.safetensors.index.json"
        shards = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
        assert shards == [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)]
        with open(index) as f:
            text = f.read()
        meta = json.loads(text)["metadata"]
        assert meta.pop("pysafetensors.checkpoint_id")  # the save's id, in every shard too
        assert meta == {"who": c.face, "total_size": sum(a.nbytes for a in arrays.values())}
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
        with safe_open(index, c.names[0]) as f:  # every shard read back through the index
            assert f.keys() == sorted(arrays)
            for k, v in arrays.items():
                assert isinstance(f.get_tensor(k), c.tensor_type)
                assert same(c.to_np(f.get_tensor(k)), v), k
        for shard in shards:  # each shard is a plain file any reader opens
            assert set(ps_numpy.load_file(os.path.join(out, shard))) <= set(arrays)
        single = c.module.save_sharded({k: c.from_np(v) for k, v in arrays.items()}, out)
        assert os.listdir(out) == ["model.safetensors"] and single.endswith("model.safetensors")

    def test_load_file_from_index_directory_and_http(self, tmp_path: Any) -> None:
        from servers import RangeServer

        c = self.case
        arrays = {f"t{i}": sample("F32", (16,), seed=i) for i in range(4)}
        out = os.path.join(tmp_path, "ckpt")
        ps_numpy.save_sharded(arrays, out, max_shard_size=100)
        files = {}
        for n in os.listdir(out):
            with open(os.path.join(out, n), "rb") as fh:
                files[f"ckpt/{n}"] = fh.read()
        first = "ckpt/model-00001-of-00004.safetensors"
        assert first in files
        with RangeServer(files) as server:
            for where in (out, server.url("ckpt/model.safetensors.index.json"), server.url(first)):
                loaded = c.module.load_file(where)
                expected = {"t0": arrays["t0"]} if where.endswith(first) else arrays
                assert list(loaded) == list(expected), where
                assert all(same(c.to_np(loaded[k]), v) for k, v in expected.items()), where

    # --- round trips ----------------------------------------------------------------------

    def test_every_supported_dtype_round_trips(self, tmp_path: Any) -> None:
        c = self.case
        arrays = {code: sample(code) for code in sorted(c.supported)}
        tensors = {k: c.from_np(v) for k, v in arrays.items()}
        data = c.module.save(tensors)
        # Framework tensors serialize to the same bytes as the numpy arrays they hold.
        assert data == ps_numpy.save(arrays)
        for loaded in (c.module.load(data), c.module.load_file(_write(tmp_path, data))):
            assert list(loaded) == list(ps_numpy.load(data))
            for code, arr in arrays.items():
                assert isinstance(loaded[code], c.tensor_type)
                assert same(c.to_np(loaded[code]), arr), code

    @pytest.mark.parametrize("backend", ["mmap", "pread"])
    def test_save_file_load_file_backends(self, tmp_path: Any, backend: str) -> None:
        c = self.case
        arrays = {"w": sample("F32", (4, 5)), "b": sample("I32", (5,))}
        path = os.path.join(tmp_path, "m.safetensors")
        c.module.save_file({k: c.from_np(v) for k, v in arrays.items()}, path)
        loaded = c.module.load_file(path, backend=backend)
        assert all(same(c.to_np(loaded[k]), v) for k, v in arrays.items())

    @pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,)])
    def test_zero_rank_and_empty(self, shape: tuple[int, ...]) -> None:
        c = self.case
        arrays = {"f": sample("F32", shape), "i": sample("I32", shape)}
        data = c.module.save({k: c.from_np(v) for k, v in arrays.items()})
        assert data == ps_numpy.save(arrays)
        loaded = c.module.load(data)
        for k, v in arrays.items():
            assert tuple(c.to_np(loaded[k]).shape) == shape
            assert same(c.to_np(loaded[k]), v)

    def test_metadata(self, tmp_path: Any) -> None:
        c = self.case
        path = os.path.join(tmp_path, "m.safetensors")
        c.module.save_file({"x": c.from_np(sample("F32"))}, path, metadata={"format": c.face, "é": "ü"})
        with safe_open(path, c.names[0]) as f:
            assert f.metadata() == {"format": c.face, "é": "ü"}

    def test_caller_dict_is_not_modified(self, tmp_path: Any) -> None:
        c = self.case
        tensors = {"a": c.from_np(sample("F32")), "b": c.from_np(sample("I32"))}
        before = dict(tensors)
        c.module.save(tensors)
        c.module.save_file(tensors, os.path.join(tmp_path, "m.safetensors"))
        assert list(tensors) == list(before)
        assert all(tensors[k] is before[k] for k in before)

    def test_bad_inputs(self) -> None:
        c = self.case
        with pytest.raises(SafetensorError, match="'x'"):
            c.module.save({"x": [1, 2, 3]})
        with pytest.raises(TypeError):
            c.module.save([c.from_np(sample("F32"))])

    # --- safe_open ------------------------------------------------------------------------

    def test_safe_open_names_give_framework_tensors(self, tmp_path: Any) -> None:
        c = self.case
        arr = sample("F32", (3, 4))
        path = _write(tmp_path, ps_numpy.save({"x": arr}))
        for name in c.names:
            with safe_open(path, name) as f:
                t = f.get_tensor("x")
                assert isinstance(t, c.tensor_type) and same(c.to_np(t), arr)
                assert same(c.to_np(f.get_tensors()["x"]), arr)
                assert isinstance(f.get_slice("x")[:1], c.tensor_type)
        with pytest.raises(InvalidFramework):
            safe_open(path, c.names[0].upper())

    @pytest.mark.parametrize("backend", ["mmap", "pread"])
    def test_tensors_outlive_the_handle(self, tmp_path: Any, backend: str) -> None:
        import gc

        c = self.case
        arrays = {f"t{i}": sample("F32", (i + 1, 16), seed=i) for i in range(4)}
        path = _write(tmp_path, ps_numpy.save(arrays))
        with safe_open(path, c.names[0], backend=backend) as f:
            got = f.get_tensors()
            one = f.get_tensor("t2")
        del f
        gc.collect()
        assert all(same(c.to_np(got[k]), v) for k, v in arrays.items())
        assert same(c.to_np(one), arrays["t2"])

    @pytest.mark.parametrize(
        "index",
        [0, -1, slice(None), slice(1, 3), (slice(None), 2), (Ellipsis, 1), (1, Ellipsis), (slice(0, 4, 2), slice(1, None)),
         (slice(2, 2),)],
    )
    def test_slices_match_numpy(self, tmp_path: Any, index: Any) -> None:
        c = self.case
        arr = sample("F32", (4, 5, 3))
        path = _write(tmp_path, ps_numpy.save({"x": arr}))
        with safe_open(path, c.names[0]) as f:
            got = f.get_slice("x")[index]
        assert same(c.to_np(got), arr[index])

    @pytest.mark.parametrize("index", [4, -5, (0, 5), slice(None, None, -1), (0, 0, 0, 0)])
    def test_bad_slices_are_errors(self, tmp_path: Any, index: Any) -> None:
        path = _write(tmp_path, ps_numpy.save({"x": sample("F32", (4, 5, 3))}))
        with safe_open(path, self.case.names[0]) as f, pytest.raises(SliceError):
            f.get_slice("x")[index]

    # --- dtypes the framework lacks -------------------------------------------------------

    def test_unsupported_dtypes_are_clear_errors(self, tmp_path: Any) -> None:
        c = self.case
        if not c.unsupported:
            pytest.skip(f"{c.face} holds every dtype")
        for code in c.unsupported:
            arrays = {"bad": sample(code, (2, 4)), "good": sample("F32")}
            data = ps_numpy.save(arrays)
            path = _write(tmp_path, data)
            for call in (lambda d=data: c.module.load(d), lambda p=path: c.module.load_file(p)):
                with pytest.raises(UnsupportedDtype) as info:
                    call()
                assert code in str(info.value) and c.upstream_name in str(info.value)
                assert not isinstance(info.value, KeyError)
            with safe_open(path, c.names[0]) as f:
                assert same(c.to_np(f.get_tensor("good")), arrays["good"])  # the rest still loads
                with pytest.raises(UnsupportedDtype, match=code):
                    f.get_tensor("bad")
                with pytest.raises(UnsupportedDtype, match=code):
                    f.get_slice("bad")[:1]

    # --- devices --------------------------------------------------------------------------

    def test_devices(self, tmp_path: Any) -> None:
        c = self.case
        path = _write(tmp_path, ps_numpy.save({"x": sample("F32")}))
        with safe_open(path, c.names[0], device="cpu") as f:
            assert same(c.to_np(f.get_tensor("x")), sample("F32"))
        for bad in ("gpu", "cuda:x", "mps:1", -1):
            with pytest.raises(InvalidDevice):
                safe_open(path, c.names[0], device=bad)
        if c.numpy_only:
            for dev, shown in (("cuda", "cuda:0"), ("cuda:1", "cuda:1"), ("mps", "mps"), ("xpu:0", "xpu:0")):
                with pytest.raises(InvalidDevice) as info:
                    safe_open(path, c.names[0], device=dev)
                assert str(info.value) == f"Device {shown} is not supported for framework {c.upstream_name}"


def _write(tmp_path: Any, data: bytes, name: str = "t.safetensors") -> str:
    path = os.path.join(tmp_path, name)
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def upstream_equal(
    case: Case,
    tmp_path: Any,
    upstream_load_file: Callable[[str], dict[str, Any]],
    dtype_differs: frozenset[str] = frozenset(),
) -> list[str]:
    """Write one tensor per supported dtype; compare our load_file with upstream's, per dtype:
    same shape and bytes, and same dtype except for the documented ``dtype_differs`` codes.

    Returns the codes upstream could load (the test asserts it is a sensible set).
    """
    compared = []
    for code in sorted(case.supported):
        arr = sample(code, (3, 2))
        path = _write(tmp_path, ps_numpy.save({"x": arr}), f"{code}.safetensors")
        ours = case.module.load_file(path)["x"]
        try:
            theirs = upstream_load_file(path)["x"]
        except Exception:  # noqa: BLE001, S112 - upstream lacks some dtypes per framework
            continue
        a, b = case.to_np(ours), case.to_np(theirs)
        assert a.shape == b.shape and a.tobytes() == b.tobytes(), code
        assert a.dtype == b.dtype or code in dtype_differs, code
        compared.append(code)
    return compared
