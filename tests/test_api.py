"""The top-level API: safe_open, serialize/deserialize, TensorSpec, errors; compared with upstream."""

from __future__ import annotations

import array
import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors import SafetensorError, TensorSpec, errors, safe_open

st = pytest.importorskip("safetensors")
snp = pytest.importorskip("safetensors.numpy")

BACKENDS = ["mmap", "pread"]


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "s.safetensors"
    pnp.save_file(
        {
            "b": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
            "a": np.arange(5, dtype=np.int16),
            "c": np.array(7, dtype=np.uint64),
            "e": np.zeros((0, 3), dtype=np.float64),
        },
        path,
    )
    return path


# --- safe_open -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_keys_offset_keys_metadata(sample: Path, backend: str) -> None:
    with safe_open(sample, "np", backend=backend) as f, st.safe_open(str(sample), "np") as g:
        assert f.keys() == ["a", "b", "c", "e"] == g.keys()
        assert f.offset_keys() == g.offset_keys() == ["c", "e", "b", "a"]  # U64, F64, F32, I16
        assert f.metadata() is None and g.metadata() is None
        tensors = f.get_tensors()
        assert list(tensors) == f.offset_keys()
        for k in f.keys():  # noqa: SIM118 - safe_open is not iterable
            assert np.array_equal(f.get_tensor(k), g.get_tensor(k))
            assert f.get_tensor(k).dtype == g.get_tensor(k).dtype


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_with_and_close(sample: Path, backend: str) -> None:
    f = safe_open(sample, "numpy", backend=backend)
    assert f.get_tensor("a").tolist() == [0, 1, 2, 3, 4]
    sl = f.get_slice("b")
    f.__exit__(None, None, None)
    for call in (lambda: f.get_tensor("a"), f.keys, f.offset_keys, f.metadata, lambda: f.get_slice("a"),
                 lambda: sl[0], f.get_tensors, f.__enter__):
        with pytest.raises(errors.FileClosed, match="^File is closed$"):
            call()
    f.close()  # idempotent


def test_metadata_present(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    pnp.save_file({"x": np.ones(2, dtype=np.float16)}, path, metadata={"format": "np", "k": "\u2603"})
    with safe_open(path, "np") as f:
        assert f.metadata() == {"format": "np", "k": "\u2603"}
    with st.safe_open(str(path), "np") as g:
        assert g.metadata() == {"format": "np", "k": "\u2603"}


def test_unknown_tensor(sample: Path) -> None:
    with safe_open(sample, "np") as f:
        for call in (f.get_tensor, f.get_slice):
            with pytest.raises(errors.TensorNotFound) as e:
                call("zz")
            assert str(e.value) == "File does not contain tensor zz"
            assert isinstance(e.value, KeyError)
    with st.safe_open(str(sample), "np") as g, pytest.raises(st.SafetensorError, match="^File does not contain tensor zz$"):
        g.get_tensor("zz")


def test_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope.safetensors"
    for opener in (lambda: safe_open(missing, "np"), lambda: safe_open(str(missing), "np", backend="pread")):
        with pytest.raises(FileNotFoundError) as ours:
            opener()
        with pytest.raises(FileNotFoundError) as up:
            st.safe_open(str(missing), "np")
        assert str(ours.value) == str(up.value) == f"No such file or directory: {missing}"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"framework": "foo"},
        {"framework": "NP"},
        {"framework": "np", "device": "cuda"},
        {"framework": "np", "device": "cuda:1"},
        {"framework": "np", "device": 0},
        {"framework": "np", "device": "foo"},
        {"framework": "np", "device": -1},
        {"framework": "pt", "device": "foo"},
        {"framework": "pt", "device": "mps:1"},
        {"framework": "pt", "device": "cpu:0"},
        {"framework": "np", "backend": "x"},
    ],
)
def test_invalid_arguments_match_upstream(sample: Path, kwargs: dict[str, Any]) -> None:
    if kwargs["framework"] == "pt":
        pytest.importorskip("torch")
    with pytest.raises(SafetensorError) as ours:
        safe_open(sample, **kwargs)
    with pytest.raises(st.SafetensorError) as up:
        st.safe_open(str(sample), **kwargs)
    assert str(ours.value) == str(up.value)
    assert isinstance(ours.value, (errors.InvalidFramework, errors.InvalidDevice, errors.InvalidBackend))


@pytest.mark.parametrize("framework", ["pt", "torch", "pytorch", "np", "numpy"])
def test_framework_aliases(sample: Path, framework: str) -> None:
    if framework in ("pt", "torch", "pytorch"):
        pytest.importorskip("torch")
    with safe_open(sample, framework) as f:
        assert f.get_tensor("a").tolist() == [0, 1, 2, 3, 4]


def test_header_error_prefix_safe_open_vs_deserialize(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00[]")
    with pytest.raises(errors.InvalidHeaderJson, match="^Error while deserializing header: invalid JSON in header"):
        safe_open(bad, "np")
    with pytest.raises(errors.InvalidHeaderJson, match="^Error while deserializing: invalid JSON in header"):
        pysafetensors.deserialize(bad.read_bytes())


# --- slicing (numpy framework: upstream's strict rules) -----------------------------------------

OK_INDEXES: list[Any] = [
    0, -1, 1, np.int64(1), True, slice(None), slice(1, None), slice(None, None, 2), slice(0, 0), (..., 1),
    (0, ..., 1), (), ..., (1, slice(0, 3, 2)), (slice(1, 2), -1), (0, 1, 2), (slice(None), slice(1, 1)),
    (slice(1, None), slice(None, None, 5)), (slice(None), 2, slice(1, 4, 2)), (-2, -3, -4), [],
]
BAD_INDEXES: list[Any] = [
    2, -3, 3, -4, (0, 3), (0, -4), slice(5, 10), slice(None, 7), slice(3, 5), slice(2, 3), slice(3, 3),
    slice(1, 3), slice(None, None, 0), slice(None, None, -1), (..., ...), (0, 0, 0, 0), (None,), (0, None),
    [0], "x", 1.0, (0, []),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", OK_INDEXES, ids=repr)
def test_get_slice_equals_numpy_and_upstream(sample: Path, backend: str, index: Any) -> None:
    full = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with safe_open(sample, "np", backend=backend) as f, st.safe_open(str(sample), "np") as g:
        sl = f.get_slice("b")
        assert sl.get_shape() == [2, 3, 4] and sl.get_dtype() == "F32"
        ours = sl[index]
        expected = full[int(index) if isinstance(index, bool) else index]  # upstream reads True as 1
        assert ours.shape == expected.shape and np.array_equal(ours, expected)
        assert np.array_equal(ours, g.get_slice("b")[index])


@pytest.mark.parametrize("index", BAD_INDEXES, ids=repr)
def test_get_slice_errors_match_upstream(sample: Path, index: Any) -> None:
    with safe_open(sample, "np") as f, st.safe_open(str(sample), "np") as g:
        with pytest.raises(errors.SliceError) as ours:
            f.get_slice("b")[index]
        with pytest.raises(st.SafetensorError) as up:
            g.get_slice("b")[index]
        assert str(ours.value) == str(up.value)
        assert isinstance(ours.value, IndexError)


@pytest.mark.parametrize(
    "index", [slice(-1, None), slice(-2, -1), slice(None, -1), slice(2, None), slice(1, 0), slice(2, 2)], ids=repr
)
def test_get_slice_where_upstream_is_broken(sample: Path, index: Any) -> None:
    # Upstream raises OverflowError for negative bounds, SystemError for reversed bounds and an
    # out-of-bounds error for an empty slice at the end; we follow numpy for these in-range cases.
    full = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with safe_open(sample, "np") as f:
        assert np.array_equal(f.get_slice("b")[index], full[index])


def test_get_slice_scalar_and_empty(sample: Path) -> None:
    with safe_open(sample, "np") as f:
        assert f.get_slice("c")[...] == 7
        assert f.get_slice("c")[()] == 7
        with pytest.raises(errors.SliceError, match="more slicing indexes than dimensions"):
            f.get_slice("c")[0]
        assert f.get_slice("e")[:, 1:].shape == (0, 2)


@settings(max_examples=60, deadline=None)
@given(data=hs.data())
def test_get_slice_hypothesis(data: Any, tmp_path_factory: Any) -> None:
    shape = tuple(data.draw(hs.lists(hs.integers(1, 5), min_size=1, max_size=4)))
    full = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    path = tmp_path_factory.mktemp("sl") / "x.safetensors"
    pnp.save_file({"x": full}, path)
    def item(d: int) -> Any:
        if data.draw(hs.booleans()):
            return data.draw(hs.integers(-d, d - 1))
        start = data.draw(hs.integers(0, d - 1))
        return slice(start, data.draw(hs.integers(start, d)), data.draw(hs.integers(1, 3)))

    n_front = data.draw(hs.integers(0, len(shape)))
    items: list[Any] = [item(d) for d in shape[:n_front]]
    if data.draw(hs.booleans()):  # an ellipsis, then indexes for some trailing dims
        n_back = data.draw(hs.integers(0, len(shape) - n_front))
        items += [...] + [item(d) for d in shape[len(shape) - n_back :]]
    index = tuple(items)
    for backend in BACKENDS:
        with safe_open(path, "np", backend=backend) as f:
            got = f.get_slice("x")[index]
            assert got.shape == full[index].shape and np.array_equal(got, full[index])
    with st.safe_open(str(path), "np") as g:
        assert np.array_equal(g.get_slice("x")[index], full[index])


# --- serialize / deserialize / TensorSpec --------------------------------------------------------


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


def test_safe_open_handle_file_object_and_bytesio(sample: Path) -> None:
    data = sample.read_bytes()
    with open(sample, "rb") as fh:
        f = pysafetensors._safe_open_handle(fh, "np")
        g = st._safe_open_handle(fh, "np")
        assert f.keys() == g.keys()
        for k in f.keys():  # noqa: SIM118 - safe_open is not iterable
            assert np.array_equal(f.get_tensor(k), g.get_tensor(k))
    f = pysafetensors._safe_open_handle(io.BytesIO(data), "np")
    assert f.offset_keys() == ["c", "e", "b", "a"]
    assert np.array_equal(f.get_slice("b")[1, :, ::2], np.arange(24, dtype=np.float32).reshape(2, 3, 4)[1, :, ::2])
    with pytest.raises(errors.InvalidFramework):
        pysafetensors._safe_open_handle(io.BytesIO(data), "foo")


def test_safe_open_bytes_and_pathlike(sample: Path) -> None:
    with safe_open(sample.read_bytes(), "np") as f:
        assert f.get_tensor("a").tolist() == [0, 1, 2, 3, 4]
    with safe_open(os.fspath(sample), "np") as f:
        assert f.keys() == ["a", "b", "c", "e"]


# --- errors ---------------------------------------------------------------------------------------


def _error_classes() -> list[type[SafetensorError]]:
    return [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, SafetensorError)]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_errors_pickle(cls: type[SafetensorError]) -> None:
    if issubclass(cls, errors.HeaderError):
        err: SafetensorError = cls.make("header too small", "detail here", tensor="t")
    else:
        err = cls("something went wrong: x", tensor="t")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err)
    assert getattr(back, "tensor", None) == "t"
    assert isinstance(back, SafetensorError)


def test_missing_dependency_pickles() -> None:
    err = errors.MissingDependency("jax", "jax")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is errors.MissingDependency and str(back) == str(err)
    assert "pip install 'pysafetensors[jax]'" in str(back)


def test_public_api() -> None:
    for name in ("safe_open", "serialize", "serialize_file", "deserialize", "TensorSpec", "SafetensorError",
                 "_safe_open_handle", "__version__"):
        assert hasattr(pysafetensors, name)
    assert set(st.__all__) - {"__version__", "_safetensors_rust"} <= set(dir(pysafetensors)) if hasattr(st, "__all__") \
        else True


@settings(max_examples=int(os.environ.get("PYSAFETENSORS_EXAMPLES", "150")), deadline=None)
@given(data=hs.data())
def test_get_slice_differential(data: Any, tmp_path_factory: Any) -> None:
    """Arbitrary (also out-of-range) indexes: same result or same error text as upstream.

    Deliberate differences: where upstream crashes on negative slice bounds (OverflowError) or
    reversed bounds (SystemError, ValueError, a Rust panic), or refuses an empty slice at the end, we follow numpy.
    """
    shape = (2, 3, 4)
    full = np.arange(24, dtype=np.int32).reshape(shape)
    path = tmp_path_factory.mktemp("d") / "x.safetensors"
    pnp.save_file({"x": full}, path)
    bound = hs.one_of(hs.none(), hs.integers(-6, 6))
    item = hs.one_of(hs.integers(-5, 5), hs.builds(slice, bound, bound, hs.one_of(hs.none(), hs.integers(-1, 3))),
                     hs.just(...))
    index = tuple(data.draw(hs.lists(item, max_size=4)))
    at = index.index(...) if ... in index else None
    for pos, it in enumerate(index):
        axis = pos if at is None or pos < at else len(shape) - (len(index) - pos)
        if isinstance(it, slice) and 0 <= axis < len(shape):
            # an empty slice starting at the end: upstream refuses it, we follow numpy (tested above)
            assume(it.start != shape[axis])
    with st.safe_open(str(path), "np") as g:
        try:
            up: Any = g.get_slice("x")[index]
        except st.SafetensorError as e:
            up = e
        except (OverflowError, SystemError, ValueError) as e:
            up = e
        except BaseException as e:  # pyo3's PanicException (e.g. reversed bounds with a step)
            if type(e).__name__ != "PanicException":
                raise
            up = e
    with safe_open(path, "np") as f:
        try:
            ours: Any = f.get_slice("x")[index]
        except errors.SliceError as e:
            ours = e
    if isinstance(up, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.shape == up.shape and np.array_equal(ours, up)
    elif isinstance(up, st.SafetensorError):
        if isinstance(ours, np.ndarray):  # an empty slice at the end: numpy's answer
            assert ours.size == 0 and np.array_equal(ours, full[index])
        else:
            assert str(ours) == str(up)
    elif isinstance(ours, np.ndarray):  # upstream crashed
        assert np.array_equal(ours, full[index]) and ours.shape == full[index].shape


_DEVICES: list[Any] = ["cpu", "cuda", "cuda:0", "cuda:1", 0, 1, "mps", "mps:0", "mps:1", "npu", "npu:3", "xpu:0", "xla",
                       "mlu:1", "musa", "hpu:2", "CPU", "cuda:", "cuda:-1", ":0", "gpu", True, None, 1.5, "cpu:0",
                       "meta", -1, "cuda:01", "cuda:+1", " cuda", "xla:1", "mps:00", "mps:+0", "mps:01",
                       "npu:00", "cuda:1_0", "cuda:\u0661"]


@pytest.mark.parametrize("framework", ["np", "pt"])
@pytest.mark.parametrize("device", _DEVICES, ids=repr)
def test_device_parsing_matches_upstream(sample: Path, framework: str, device: Any) -> None:
    if framework == "pt":
        pytest.importorskip("torch")
    try:
        st.safe_open(str(sample), framework, device=device)
    except st.SafetensorError as up:
        with pytest.raises(SafetensorError) as ours:
            safe_open(sample, framework, device=device)
        assert str(ours.value) == str(up)
    except ValueError:  # upstream leaks Rust's integer-parse errors; ours is an InvalidDevice (a ValueError)
        with pytest.raises(errors.InvalidDevice):
            safe_open(sample, framework, device=device)
    else:
        safe_open(sample, framework, device=device).close()


@pytest.mark.parametrize("face", ["numpy", "torch"])
def test_faces_expose_upstream_public_names(face: str) -> None:
    import importlib

    if face == "torch":
        pytest.importorskip("torch")
    up = importlib.import_module(f"safetensors.{face}")
    ours = importlib.import_module(f"pysafetensors.{face}")
    wanted = {n for n in dir(up) if not n.startswith("__") and callable(getattr(up, n))
              and getattr(getattr(up, n), "__module__", "").startswith("safetensors")}
    assert wanted - set(dir(ours)) <= {"_flatten_as_ptr", "_getdtype", "_to_ndarray", "_view2torch", "_flatten",
                                       "_is_little_endian", "_view2np"}
