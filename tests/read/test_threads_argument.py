"""``threads`` is None (the CPUs available) or a positive int, for every loader that takes it:
anything else is a clear InvalidArgument, never silently rounded or ignored."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors import safe_open
from pysafetensors.errors import InvalidArgument, InvalidArgumentType, SafetensorError
from pysafetensors.handle import open_file
from pysafetensors.numpy import save_file, save_sharded
from pysafetensors.reader import TensorFile, check_threads

if "tensorflow" not in sys.modules and importlib.util.find_spec("paddle") and importlib.util.find_spec("tensorflow"):
    with warnings.catch_warnings():  # paddle before tensorflow: see tests/frameworks/_fw_cases.py
        warnings.simplefilter("ignore")
        import paddle  # noqa: F401

ARRAYS = {"a": np.arange(6, dtype=np.float32), "b": np.ones((2, 2), np.int16)}
BAD_VALUES: list[tuple[Any, type[Exception]]] = [
    (-1, InvalidArgument), (0, InvalidArgument), (2.5, InvalidArgumentType), (2.0, InvalidArgumentType),
    ("2", InvalidArgumentType), (True, InvalidArgumentType), (False, InvalidArgumentType), ([2], InvalidArgumentType),
]
FRAMEWORKS = ["np", "pt", "flax", "tf", "paddle", "mlx"]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "m.safetensors"
    save_file(ARRAYS, p)
    return p


@pytest.mark.parametrize(("value", "error"), BAD_VALUES)
def test_check_threads_refuses(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="threads must be a positive integer or None") as e:
        check_threads(value)
    assert isinstance(e.value, SafetensorError) and isinstance(e.value, ValueError)
    assert isinstance(e.value, TypeError) == (error is InvalidArgumentType)
    assert repr(value) in str(e.value) or str(value) in str(e.value)


@pytest.mark.parametrize("value", [None, 1, 3, np.int64(2)])
def test_check_threads_accepts(value: Any) -> None:
    assert check_threads(value) == value


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize(("value", "error"), BAD_VALUES)
def test_get_tensors(path: Path, framework: str, backend: str, value: Any, error: type[Exception]) -> None:
    with safe_open(path, framework, backend=backend) as f:
        with pytest.raises(error):
            f.get_tensors(threads=value)
        assert set(f.get_tensors(threads=None)) == set(ARRAYS)  # the handle is still fine
        assert set(f.get_tensors(threads=2)) == set(ARRAYS)


@pytest.mark.parametrize("face", ["numpy", "torch"])
@pytest.mark.parametrize(("value", "error"), BAD_VALUES)
def test_face_load_file(path: Path, face: str, value: Any, error: type[Exception]) -> None:
    module = importlib.import_module(f"pysafetensors.{face}")
    for backend in ("mmap", "pread", None):
        with pytest.raises(error):
            module.load_file(path, backend=backend, threads=value)
    assert set(module.load_file(path, threads=None)) == set(ARRAYS)


@pytest.mark.parametrize(("value", "error"), BAD_VALUES)
def test_raw_all_of_single_and_sharded_files(path: Path, tmp_path: Path, value: Any, error: type[Exception]) -> None:
    index = save_sharded({f"t{i}": np.zeros(3000, np.float32) for i in range(3)}, tmp_path / "ckpt", max_shard_size="20KB")
    for file in (open_file(path, "pread"), open_file(index, "pread")):
        assert isinstance(file, TensorFile)
        with pytest.raises(error):
            list(file.raw_all(value))
        file.close()


@pytest.mark.parametrize(("value", "error"), BAD_VALUES)
def test_staging(path: Path, value: Any, error: type[Exception]) -> None:
    pytest.importorskip("torch")
    from pysafetensors.staging import load_to_device

    with pytest.raises(error):
        load_to_device(path, "cpu", threads=value)
