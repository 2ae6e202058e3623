"""Slicing with the torch framework: torch's own indexing rules (None, several "...", clamped
bounds), compared with torch and upstream; sub-byte and bf16 slices."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
st = pytest.importorskip("safetensors")

from test_torch import _make, _same

import pysafetensors.torch as ptt
from pysafetensors import safe_open

TORCH_INDEXES: list[Any] = [
    0, -1, 1, slice(None), slice(1, None), slice(None, None, 2), slice(5, 10), slice(-10, None), slice(None, 7),
    slice(2, 1), (..., 1), (0, ..., 1), (..., ...), (0, 1, 2), (), ..., (1, slice(0, 3, 2)), (slice(1, 2), -1),
    (None,), (0, None), (None, ..., None), True, (slice(1, None), slice(None, None, 5)), (slice(-2, -1), 1),
    (0, slice(-100, 100), slice(1, 3)),
]
TORCH_BAD: list[Any] = [2, -3, (0, 0, 0, 0), slice(None, None, 0), slice(None, None, -1), (0, 3), 1.0]


@pytest.mark.parametrize("backend", ["mmap", "pread"])
@pytest.mark.parametrize("index", TORCH_INDEXES, ids=repr)
def test_torch_slicing_follows_torch_and_upstream(index: Any, backend: str, tmp_path: Path) -> None:
    full = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    path = tmp_path / "s.safetensors"
    ptt.save_file({"b": full}, path)
    with safe_open(path, "pt", backend=backend) as f, st.safe_open(str(path), "pt") as g:
        ours = f.get_slice("b")[index]
        assert torch.equal(ours, full[index])
        assert torch.equal(ours, g.get_slice("b")[index])


@pytest.mark.parametrize("index", TORCH_BAD, ids=repr)
def test_torch_slicing_errors_match_upstream(index: Any, tmp_path: Path) -> None:
    path = tmp_path / "s.safetensors"
    ptt.save_file({"b": torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)}, path)
    with safe_open(path, "pt") as f, st.safe_open(str(path), "pt") as g:
        with pytest.raises(Exception) as ours:
            f.get_slice("b")[index]
        with pytest.raises(Exception) as up:
            g.get_slice("b")[index]
        assert type(ours.value) is type(up.value) and str(ours.value) == str(up.value)


def test_torch_slicing_f4_and_bf16(tmp_path: Path) -> None:
    f4 = _make(torch.float4_e2m1fn_x2, (4, 3))
    bf = torch.arange(20, dtype=torch.bfloat16).reshape(4, 5)
    path = tmp_path / "q.safetensors"
    ptt.save_file({"f4": f4, "bf": bf}, path)
    with safe_open(path, "pt") as f:
        assert _same(f.get_slice("f4")[1:3], f4[1:3])
        assert _same(f.get_slice("f4")[:, 1], f4[:, 1])
        assert torch.equal(f.get_slice("bf")[::2, 1:4], bf[::2, 1:4])
        assert f.get_slice("f4").get_shape() == [4, 6] and f.get_slice("f4").get_dtype() == "F4"


def _size_torch_reads(t: Any, dim: int) -> int | None:
    """What torch reads as the size of dim ``dim`` >= t.ndim without checking it: its sizes and
    strides share one array (10 slots inside the tensor up to 5 dims, unused ones 0; 2 x ndim on
    the heap beyond).  None past that array, where torch would read other memory."""
    sizes, strides, n = list(t.shape), list(t.stride()), t.ndim
    slots = sizes + [0] * (5 - n) + strides + [0] * (5 - n) if n <= 5 else sizes + strides
    return slots[dim] if dim < len(slots) else None


def _stepwise(t: Any, index: tuple[Any, ...]) -> Any:
    """torch's basic indexing (ints, slices, None, "...") as its C++ loop does it, one item
    at a time, but checking each position before using it: a slice from 0 with step 1 past the
    last dim is torch's fast path, a no-op when its stop is not below the size torch reads
    there (:func:`_size_torch_reads`); any other item there is its "Dimension out of range"
    IndexError."""
    specified = sum(1 for i in index if i is not None and i is not Ellipsis)
    if specified > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    ndim, dim = t.ndim, 0
    for item in index:
        if item is Ellipsis:
            dim += ndim - specified
        elif item is None:
            t, dim = t.unsqueeze(dim), dim + 1
        elif dim >= t.ndim:
            read = _size_torch_reads(t, dim)
            if (isinstance(item, slice) and item.start in (None, 0) and item.step in (None, 1) and read is not None
                    and (item.stop is None or read <= item.stop)):
                dim += 1
                continue
            raise IndexError(f"Dimension out of range (got {dim})")
        elif isinstance(item, int):
            t = t.select(dim, item)
        else:
            t, dim = t[(slice(None),) * dim + (item,)], dim + 1
    return t


def test_stepwise_reference_agrees_with_torch_where_torch_stays_in_range() -> None:
    full = torch.arange(2 * 3 * 5 * 4, dtype=torch.int16).reshape(2, 3, 5, 4)
    for index in [(..., 0, ...), (..., ...), (None, ..., 1, ...), (0, ..., slice(1, 3), ...),
                  (..., slice(None, None, 2), None, ...), (1, ..., -1, ...), (..., 2)]:
        assert torch.equal(_stepwise(full, index), full[index]), index


def test_torch_slicing_hypothesis(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as hs

    path = tmp_path / "h.safetensors"
    full = torch.arange(2 * 3 * 5 * 4, dtype=torch.int16).reshape(2, 3, 5, 4)
    ptt.save_file({"x": full}, path)
    bound = hs.one_of(hs.none(), hs.integers(-7, 7))
    item = hs.one_of(
        hs.integers(-5, 4),
        hs.builds(slice, bound, bound, hs.one_of(hs.none(), hs.integers(1, 3))),
        hs.just(None),
        hs.just(...),
    )

    @settings(max_examples=100, deadline=None)
    @given(index=hs.lists(item, max_size=5).map(tuple))
    def check(index: tuple[Any, ...]) -> None:
        try:
            # With several "...", torch may read past the last dim (undefined behaviour), so
            # the oracle is torch's loop replayed one item at a time with bounds checked.
            expected = _stepwise(full, index) if index.count(...) >= 2 else full[index]
        except Exception as e:  # noqa: BLE001 - then ours must fail the same way
            with safe_open(path, "pt") as f, pytest.raises(type(e)):
                f.get_slice("x")[index]
            return
        for backend in ("mmap", "pread"):
            with safe_open(path, "pt", backend=backend) as f:
                got = f.get_slice("x")[index]
                assert got.shape == expected.shape and torch.equal(got, expected), index

    check()


@pytest.mark.parametrize("seed", range(4))
def test_double_ellipsis_slices_past_the_end_agree_with_upstream(seed: int, tmp_path: Path) -> None:
    """Two "..." and slices only (upstream hands them to torch, whose slice fast path reads the
    size of a dim past the end: safe here, every read stays in the tensor's size and stride
    array): ours gives upstream's tensor or an IndexError where upstream does.  Among them the
    differential fuzz's finding, an empty ``[2, 0, 3, 1]`` tensor indexed ``[..., ..., :5]``,
    which upstream returns whole and which raised IndexError here."""
    import random

    rng = random.Random(seed)
    path = tmp_path / "e.safetensors"
    cases = [((2, 0, 3, 1), (..., ..., slice(None, 5))), ((2, 3, 4, 0), (..., ..., slice(None, 5))),
             ((0, 3, 2, 4), (..., ..., slice(None, 5)))]
    for _ in range(60):
        shape = tuple(rng.choice([0, 1, 2, 3, 5]) for _ in range(rng.randint(1, 4)))
        items: list[Any] = [rng.choice([slice(None, rng.choice([0, 1, 3, 5, 8, 20])), slice(None), slice(1, 3),
                                        slice(0, 4, 1), slice(None, 2, 2)]) for _ in range(rng.randint(1, 3))]
        for _ in range(2):
            items.insert(rng.randint(0, len(items)), ...)
        cases.append((shape, tuple(items)))
    for shape, index in cases:
        full = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
        ptt.save_file({"t": full}, path)
        with st.safe_open(str(path), "pt") as g:
            try:
                expected = g.get_slice("t")[index]
            except IndexError:
                expected = None
        for backend in ("mmap", "pread"):
            with safe_open(path, "pt", backend=backend) as f:
                if expected is None:
                    with pytest.raises(IndexError):
                        f.get_slice("t")[index]
                else:
                    got = f.get_slice("t")[index]
                    assert got.shape == expected.shape and torch.equal(got, expected), (shape, index)
