"""get_slice with the numpy framework: upstream's strict indexing rules, compared with numpy and upstream."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

import pysafetensors.numpy as pnp
from pysafetensors import errors, safe_open

st = pytest.importorskip("safetensors")

BACKENDS = ["mmap", "pread"]

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
