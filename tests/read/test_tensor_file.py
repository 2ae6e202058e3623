"""The typed interfaces of the read path: SafeFile and ShardedFile are both TensorFiles and answer
alike; every framework adapter module has Adapter's signatures."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors import safe_open
from pysafetensors._adapters import FRAMEWORKS, Adapter, load_adapter
from pysafetensors.errors import FileClosed, TensorNotFound
from pysafetensors.format.slicing import plan_slice
from pysafetensors.handle import open_file
from pysafetensors.numpy import save_file, save_sharded
from pysafetensors.reader import SafeFile, TensorFile
from pysafetensors.sharded import ShardedFile

if "tensorflow" not in sys.modules and importlib.util.find_spec("paddle") and importlib.util.find_spec("tensorflow"):
    with warnings.catch_warnings():  # paddle before tensorflow: see tests/frameworks/_fw_cases.py
        warnings.simplefilter("ignore")
        import paddle  # noqa: F401

ARRAYS = {f"layer.{i}.w": np.full((32, 40 + i), i, np.float32) for i in range(5)} | {"z.bias": np.arange(7, dtype=np.int64)}


@pytest.fixture(params=["single", "sharded"])
def file(request: Any, tmp_path: Path) -> Any:
    if request.param == "single":
        path = tmp_path / "m.safetensors"
        save_file(ARRAYS, path, metadata={"k": "v"})
    else:
        path = Path(save_sharded(ARRAYS, tmp_path / "ckpt", max_shard_size="12KB", metadata={"k": "v"}))
    f = open_file(path)
    assert isinstance(f, SafeFile if request.param == "single" else ShardedFile)
    yield f
    f.close()


def test_both_are_tensor_files(file: Any) -> None:
    assert isinstance(file, TensorFile)
    assert isinstance(file.name, str) and file.name


def test_they_answer_alike(file: Any) -> None:
    assert file.sorted_names() == sorted(ARRAYS)
    assert sorted(file.names()) == sorted(ARRAYS)
    assert "z.bias" in file and "nope" not in file and 3 not in file
    assert file.metadata is not None and file.metadata["k"] == "v"
    info = file.info("layer.2.w")
    assert info.shape == (32, 42) and info.dtype.code == "F32"
    raw = file.raw("layer.2.w")
    np.testing.assert_array_equal(np.frombuffer(raw.data, np.float32).reshape(raw.shape), ARRAYS["layer.2.w"])
    part = file.raw_slice("layer.2.w", plan_slice(info.shape, info.dtype, (slice(3, 5),)))
    np.testing.assert_array_equal(np.frombuffer(part.data, np.float32).reshape(part.shape), ARRAYS["layer.2.w"][3:5])
    np_types = {"F32": np.float32, "I64": np.int64}
    everything = {r.name: np.frombuffer(r.data, np_types[r.dtype.code]).reshape(r.shape) for r in file.raw_all(2)}
    assert everything.keys() == ARRAYS.keys()
    for k, v in ARRAYS.items():
        np.testing.assert_array_equal(everything[k], v)
    with pytest.raises(TensorNotFound):
        file.info("nope")
    file.check_open()
    file.close()
    with pytest.raises(FileClosed):
        file.check_open()
    with pytest.raises(FileClosed):
        file.raw("z.bias")


def test_safe_open_keys_come_from_the_tensor_file(file: Any) -> None:
    path = file.name
    with safe_open(path, "np") as f:
        assert isinstance(f._file, TensorFile)
        assert f.keys() == sorted(ARRAYS)


def _positional(fn: Any) -> list[str]:
    params = list(inspect.signature(fn).parameters.values())
    return [p.kind.name for p in params if p.default is inspect.Parameter.empty]


@pytest.mark.parametrize("module", sorted(set(FRAMEWORKS.values())))
def test_every_adapter_is_an_adapter(module: str) -> None:
    adapter = importlib.import_module(f"pysafetensors._adapters.{module}")
    assert isinstance(adapter, Adapter)
    assert isinstance(adapter.NAME, str) and adapter.NAME
    for method in ("check_device", "from_raw", "get_slice", "to_write_item"):
        expected = _positional(getattr(Adapter, method))[1:]  # without self
        got = _positional(getattr(adapter, method))
        assert len(got) == len(expected), (module, method, got)  # same arity: one signature per method
        assert all(k in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD") for k in got)


def test_load_adapter_returns_an_adapter() -> None:
    assert isinstance(load_adapter("np"), Adapter)
