"""numpy scalars and arrays inside torch checkpoints: rebuilt from their bytes, never by
calling the pickled numpy functions; object dtypes refused.  torch.load(weights_only=False)
is the oracle for the values."""

from __future__ import annotations

import pickle
import zipfile

import numpy as np
import pytest

from pysafetensors.convert import convert_file, load_checkpoint
from pysafetensors.errors import CorruptCheckpoint, UnsafePickle, UnsupportedDtype

from .convert_helpers import entry, outcome, read_safetensors, replace_entry

torch = pytest.importorskip("torch")

SCALARS = {
    "f64": np.float64(1.5), "i32": np.int32(3), "u8": np.uint8(250), "bool": np.bool_(True),
    "f16": np.float16(-2.25), "c64": np.complex64(1 - 2j), "i64": np.int64(-(2**62)), "f32": np.float32(np.nan),
}


def arrays():
    rng = np.random.default_rng(1)
    return {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64_fortran": np.asfortranarray(rng.standard_normal((2, 5))),
        "i32_big_endian": np.arange(6, dtype=">i4").reshape(3, 2),
        "f64_big_endian_fortran": np.asfortranarray(np.arange(6, dtype=">f8").reshape(2, 3)),
        "bool": rng.random(7) > 0.5,
        "u16": np.arange(5, dtype=np.uint16),
        "f16": np.linspace(-1, 1, 9).astype(np.float16),
        "c64": (rng.standard_normal(3) + 1j).astype(np.complex64),
        "zero_d": np.array(7.25),
        "empty": np.zeros((0, 3), dtype=np.int8),
        "strided": np.arange(20)[::3],
        "transposed": np.arange(12, dtype=np.int16).reshape(3, 4).T,
    }


def numpy_safe_globals():
    """What torch's weights_only loader needs allowed for these files (its documented convention)."""
    core = np._core if hasattr(np, "_core") else np.core
    kinds = {type(np.dtype(v.dtype)) for v in (*SCALARS.values(), *arrays().values())}
    # bytes: protocol 2 pickles an empty array's data as bytes()
    return [core.multiarray.scalar, core.multiarray._reconstruct, np.ndarray, np.dtype, bytes, *kinds]


def save(obj, path, legacy=False, protocol=2):
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy, pickle_protocol=protocol)
    return str(path)


def open_tree(path):
    with open(path, "rb") as f:
        checkpoint = load_checkpoint(path, f)
        return checkpoint.tree, checkpoint


def assert_same_scalar(ours, theirs):
    assert type(ours) is type(theirs)
    assert ours.dtype == theirs.dtype
    assert ours.tobytes() == theirs.tobytes()  # bit for bit (NaN included)


def assert_written_like(path, expected: dict[str, np.ndarray]):
    got, _ = read_safetensors(path)
    assert set(got) == set(expected)
    for name, a in expected.items():
        _, shape, raw = got[name]
        assert shape == a.shape, name
        assert raw == np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes(), name


@pytest.mark.parametrize("protocol", [2, 4, 5])
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_numpy_values_in_a_checkpoint(tmp_path, legacy, protocol):
    ckpt = {"model": {"w": torch.randn(2, 3)}, "metrics": dict(SCALARS), "arrays": arrays(),
            "epoch": 3, "tag": np.str_("best"), "stamp": np.datetime64("2024-01-02T03:04")}
    src = save(ckpt, tmp_path / "np.pt", legacy, protocol)
    oracle = torch.load(src, weights_only=False)
    tree, _ = open_tree(src)
    for name, value in oracle["metrics"].items():
        assert_same_scalar(tree["metrics"][name], value)

    report = convert_file(src, tmp_path / "np.safetensors")
    assert report.verified
    expected = {f"arrays.{k}": v for k, v in oracle["arrays"].items()}
    expected["model.w"] = oracle["model"]["w"].numpy()
    assert_written_like(str(tmp_path / "np.safetensors"), expected)
    # numpy scalars are values, like the int beside them; strings and datetimes too
    assert set(report.skipped) == {f"metrics.{k}" for k in SCALARS} | {"epoch", "tag", "stamp"}


def test_torch_weights_only_loads_the_same_file_with_numpy_safe_globals(tmp_path):
    """The files are the ones torch's own safe loader accepts once numpy's globals are allowed."""
    data = {"metrics": dict(SCALARS), "arrays": arrays()}
    src = save(data, tmp_path / "wo.pt")
    with pytest.raises(pickle.UnpicklingError):
        torch.load(src, weights_only=True)
    with torch.serialization.safe_globals(numpy_safe_globals()):
        loaded = torch.load(src, weights_only=True)
    tree, _ = open_tree(src)
    for name, value in loaded["metrics"].items():
        assert_same_scalar(tree["metrics"][name], value)
    convert_file(src, tmp_path / "wo.safetensors")
    assert_written_like(str(tmp_path / "wo.safetensors"), {f"arrays.{k}": v for k, v in loaded["arrays"].items()})


def test_numpy_1x_module_names(tmp_path):
    """numpy 1.x pickles name numpy.core.multiarray instead of numpy._core.multiarray."""
    src = save({"s": np.float64(2.5), "a": np.arange(4, dtype=np.int64)}, tmp_path / "np2.pt")
    pkl = entry(src, "/data.pkl")
    assert b"numpy._core.multiarray" in pkl
    old = tmp_path / "np1.pt"
    replace_entry(src, str(old), "/data.pkl", pkl.replace(b"numpy._core.multiarray", b"numpy.core.multiarray"))
    tree, _ = open_tree(str(old))
    assert_same_scalar(tree["s"], np.float64(2.5))
    convert_file(str(old), tmp_path / "np1.safetensors")
    assert_written_like(str(tmp_path / "np1.safetensors"), {"a": np.arange(4, dtype=np.int64)})


def test_unsupported_numpy_dtype_fails_only_when_selected(tmp_path):
    src = save({"ok": np.ones(2, np.float32), "bad": np.ones(2, np.complex128), "ld": np.longdouble(1.5)},
               tmp_path / "c.pt")
    with pytest.raises(UnsupportedDtype, match="complex128"):
        convert_file(src, tmp_path / "c.safetensors")
    convert_file(src, tmp_path / "ok.safetensors", key="ok")
    assert_written_like(str(tmp_path / "ok.safetensors"), {"ok": np.ones(2, np.float32)})


class Evil:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


class ObjectScalar:
    """Pickles as numpy's scalar(dtype('O'), obj), the object-dtype form of a numpy scalar."""

    def __init__(self, obj):
        self.obj = obj

    def __reduce__(self):
        core = np._core if hasattr(np, "_core") else np.core
        return core.multiarray.scalar, (np.dtype("O"), self.obj)


@pytest.mark.parametrize("form", ["array", "scalar"])
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_object_dtypes_are_refused_without_running_anything(tmp_path, form, legacy):
    marker = tmp_path / "pwned"
    value = np.array([Evil(marker), 1], dtype=object) if form == "array" else ObjectScalar(Evil(marker))
    src = save({"w": torch.ones(2), "x": value}, tmp_path / "o.pt", legacy)
    with pytest.raises(UnsafePickle, match="object dtype") as info:
        convert_file(src, tmp_path / "o.safetensors")
    assert info.value.global_name == "numpy.dtype"
    assert not marker.exists()
    assert not (tmp_path / "o.safetensors").exists()


def test_an_object_array_payload_is_live(tmp_path):
    """Control: the object array's elements really are pickled objects a trusting loader runs."""
    marker = tmp_path / "pwned"
    src = save({"x": np.array([Evil(marker), 1], dtype=object)}, tmp_path / "o.pt")
    with pytest.raises(UnsafePickle):
        convert_file(src, tmp_path / "o.safetensors")
    assert not marker.exists()
    torch.load(src, weights_only=False)
    assert marker.exists()


def _forge(tmp_path, pkl: bytes) -> str:
    base = tmp_path / "base.pt"
    torch.save({"w": torch.ones(1)}, base)
    out = tmp_path / "forged.pt"
    replace_entry(str(base), str(out), "/data.pkl", pkl)
    return str(out)


class Reconstructed:
    """Pickles like numpy's own ndarray reduction, with any state we choose."""

    def __init__(self, state, subtype=np.ndarray):
        self.state, self.subtype = state, subtype

    def __reduce__(self):
        core = np._core if hasattr(np, "_core") else np.core
        return core.multiarray._reconstruct, (self.subtype, (0,), b"b"), self.state


@pytest.mark.parametrize("state,match", [
    ((1, (3,), np.dtype("<f4"), False, b"\x00" * 8), "needs 12 bytes"),            # too few bytes
    ((1, (0, 2**63), np.dtype("<f4"), False, b""), r"outside \[0, 2\*\*63\)"),     # huge empty dim
    ((1, (0, 2**62, 2**62), np.dtype("<f4"), False, b""), "2\\*\\*63-byte limit"),  # numpy's own limit
    ((1, (-1,), np.dtype("<f4"), False, b""), "outside"),                          # negative dim
    ((1, (2,), np.dtype("<f4"), False, [1.0, 2.0]), "expected the array's bytes"),  # not bytes
    ((1, (2,)), "unexpected state"),                                                # short state
], ids=["short", "dim-2**63", "numpy-limit", "negative", "list-data", "short-state"])
def test_forged_numpy_arrays_are_refused(tmp_path, state, match):
    src = _forge(tmp_path, pickle.dumps({"a": Reconstructed(state)}, protocol=2))
    with pytest.raises(CorruptCheckpoint, match=match):
        convert_file(src, tmp_path / "out.safetensors")


def test_numpy_subclasses_and_other_numpy_globals_are_refused(tmp_path):
    matrix = np.asmatrix(np.eye(2))
    src = save({"m": matrix}, tmp_path / "m.pt")
    with pytest.raises(UnsafePickle, match="numpy.*matrix"):
        convert_file(src, tmp_path / "m.safetensors")
    src = save({"r": np.random.RandomState(0)}, tmp_path / "r.pt")
    with pytest.raises(UnsafePickle):
        convert_file(src, tmp_path / "r.safetensors")


def test_numpy_array_archive_entries_are_not_torch_storages(tmp_path):
    """A numpy array inside a checkpoint lives in data.pkl, not in data/: nothing else is read."""
    src = save({"a": np.arange(3.0)}, tmp_path / "a.pt")
    with zipfile.ZipFile(src) as z:
        assert not [n for n in z.namelist() if "/data/" in n]
    _, checkpoint = open_tree(src)
    report = convert_file(src, tmp_path / "a.safetensors")
    assert report.source_bytes == report.tensor_bytes == 24
    checkpoint.close()


@pytest.mark.parametrize("protocol", [2, 5])
def test_mutated_numpy_checkpoints_fail_only_with_safetensor_errors(tmp_path, protocol):
    """Random byte flips in a pickle full of numpy values: converted or refused with a
    SafetensorError, never another exception."""
    import random


    ckpt = {"s": np.float64(1.5), "i": np.int32(3), "a": np.arange(6, dtype=np.float32).reshape(2, 3),
            "f": np.asfortranarray(np.ones((2, 3))), "be": np.arange(3, dtype=">i4"), "z": np.zeros((0, 3)),
            "u": np.array("abc"), "t": torch.ones(3), "d": np.datetime64("2020-01-01")}
    src = save(ckpt, tmp_path / "n.pt", protocol=protocol)
    pkl = entry(src, "/data.pkl")
    rng = random.Random(protocol)
    bad = tmp_path / "m.pt"
    outcomes = set()
    for _ in range(150):
        data = bytearray(pkl)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        replace_entry(src, str(bad), "/data.pkl", bytes(data))
        outcomes.add(outcome(bad, tmp_path / "m.safetensors"))
    assert "CorruptCheckpoint" in outcomes
