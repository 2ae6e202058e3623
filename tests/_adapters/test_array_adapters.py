"""The adapters over numpy arrays (_adapters/jax.py, tensorflow.py, paddle.py, mlx.py) called
directly: a framework's tensor written gives the bytes numpy gives for the same values, and
``to_numpy`` reads them back.  Each framework's parameters skip when it is not installed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _helpers import paddle_before_tensorflow, require

paddle_before_tensorflow()


def _framework(name: str) -> tuple[Any, Callable[[np.ndarray], Any]]:
    """(the adapter module, numpy array -> the framework's tensor)."""
    if name == "jax":
        jnp = require("jax.numpy", "jax")
        return require("pysafetensors._adapters.jax", "jax"), jnp.asarray
    if name == "tensorflow":
        tf = require("tensorflow")
        return require("pysafetensors._adapters.tensorflow", "tensorflow"), tf.constant
    if name == "paddle":
        paddle = require("paddle")
        return require("pysafetensors._adapters.paddle", "paddle"), paddle.to_tensor
    mx = require("mlx.core", "mlx")
    return require("pysafetensors._adapters.mlx", "mlx"), mx.array


FRAMEWORKS = ["jax", "tensorflow", "paddle", "mlx"]
ARRAYS = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5,
    "i32": np.array([[1, -2], [3, 2**31 - 1]], np.int32),
    "u8": np.arange(7, dtype=np.uint8),
    "f16": np.array([0.5, -0.0, 65504.0], np.float16),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("key", list(ARRAYS))
def test_written_bytes_are_numpys_and_read_back(framework: str, key: str) -> None:
    adapter, make = _framework(framework)
    array = ARRAYS[key]
    item = adapter.to_write_item("t", make(array))
    assert (item.name, item.shape, item.dtype.code) == ("t", array.shape, key.upper())
    assert bytes(item.get_bytes()) == array.tobytes()
    np.testing.assert_array_equal(adapter.to_numpy(make(array), "t"), array)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_non_tensor_is_refused_naming_it(framework: str) -> None:
    adapter, _ = _framework(framework)
    with pytest.raises(Exception, match="'x'") as info:
        adapter.to_write_item("x", [1, 2, 3])
    from pysafetensors.errors import SafetensorError

    assert isinstance(info.value, (SafetensorError, TypeError, ValueError))
