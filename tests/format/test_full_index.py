"""``is_full_index``: exactly the indexes that select a whole tensor as it is, checked against
``plan_slice`` (the rule it shortcuts) and through ``get_slice`` against ``get_tensor``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pysafetensors.errors import SliceError
from pysafetensors.format.dtypes import BY_CODE
from pysafetensors.format.slicing import is_full_index, plan_slice
from pysafetensors.numpy import save_file

F32 = BY_CODE["F32"]
FULL = [..., slice(None), (), (slice(None),), (..., slice(None)), (slice(None), ...), (slice(None), slice(None))]
NOT_FULL = [0, -1, slice(0, None), slice(None, 2), slice(None, None, 1), (slice(None),) * 3, (..., ...),
            [0], np.int64(0), (0, ...), None]


@pytest.mark.parametrize("index", FULL)
def test_full_indexes_plan_the_whole_tensor(index: Any) -> None:
    assert is_full_index(index, 2)
    plan = plan_slice((3, 4), F32, index)
    assert plan.shape == (3, 4)
    assert list(plan.byte_ranges()) == [(0, 48)]


@pytest.mark.parametrize("index", NOT_FULL)
def test_other_indexes_are_not_full(index: Any) -> None:
    assert not is_full_index(index, 2)


def test_a_colon_on_a_scalar_is_not_full() -> None:
    # ``t[:]`` on a 0-d tensor is an error (more indexes than dims); ``t[...]`` is the tensor.
    assert not is_full_index(slice(None), 0)
    assert is_full_index(..., 0)
    with pytest.raises(SliceError):
        plan_slice((), F32, slice(None))


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_get_slice_full_is_get_tensor(tmp_path: Any, framework: str) -> None:
    if framework == "pt":
        pytest.importorskip("torch")
    from pysafetensors import safe_open

    path = str(tmp_path / "t.safetensors")
    save_file({"a": np.arange(12, dtype=np.float32).reshape(3, 4), "s": np.float32(5.0).reshape(())}, path)
    with safe_open(path, framework) as f:
        whole = np.asarray(f.get_tensor("a"))
        for index in FULL:
            np.testing.assert_array_equal(np.asarray(f.get_slice("a")[index]), whole)
        assert np.asarray(f.get_slice("s")[...]).shape == ()
        with pytest.raises((SliceError, IndexError)):
            f.get_slice("s")[:]
