"""The public names: error classes survive pickling, the package and faces expose upstream's names."""

from __future__ import annotations

import pickle

import pytest

import pysafetensors
from pysafetensors import SafetensorError, errors

st = pytest.importorskip("safetensors")


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


@pytest.mark.parametrize(("module", "names", "source"), [
    ("pysafetensors.numpy", ["TensorSpec", "deserialize", "serialize", "serialize_file"], "pysafetensors._api"),
    ("pysafetensors.torch", ["TensorSpec", "deserialize", "serialize", "serialize_file"], "pysafetensors._api"),
    ("pysafetensors.format.header", ["HeaderProblem", "check_header", "check_header_length"],
     "pysafetensors.format.rules"),
])
def test_names_loaded_on_first_use_resolve_as_imported_ones(module: str, names: list[str], source: str) -> None:
    # the faces and the header module name these without importing them; each is the defining
    # module's object, listed by dir(), and a name they do not have is still an AttributeError
    import importlib

    if module.endswith("torch"):
        pytest.importorskip("torch")
    ours = importlib.import_module(module)
    for name in names:
        assert getattr(ours, name) is getattr(importlib.import_module(source), name)
        assert name in dir(ours)
    with pytest.raises(AttributeError, match=f"module '{module}' has no attribute 'nope'"):
        ours.nope  # noqa: B018
