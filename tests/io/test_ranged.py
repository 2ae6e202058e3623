"""io/_ranged.py: coalescing, prefix reuse and chunking never change the bytes a reader gets."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pysafetensors import safe_open
from pysafetensors.io._ranged import RangedSource, coalesce
from pysafetensors.numpy import save


class FakeRanged(RangedSource):
    """A RangedSource over bytes that records every fetch (offset, length)."""

    def __init__(self, data: bytes, prefix: int, gap: int, chunk: int, workers: int) -> None:
        self._data = data
        self.name = "<fake>"
        self.size = len(data)
        self.coalesce_gap = gap
        self.chunk_size = chunk
        self.max_workers = workers
        self._closed = False
        self._prefix = data[:prefix]
        self.fetches: list[tuple[int, int]] = []

    def _fetch(self, offset: int, view: memoryview) -> None:
        assert offset >= len(self._prefix) or offset + len(view) > len(self._prefix)
        self.fetches.append((offset, len(view)))
        view[:] = self._data[offset : offset + len(view)]


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=4000),
    ranges=st.lists(st.tuples(st.integers(0, 3999), st.integers(0, 300)), min_size=1, max_size=20),
    prefix=st.integers(0, 1000),
    gap=st.integers(0, 500),
    chunk=st.integers(1, 700),
    workers=st.integers(1, 4),
)
def test_read_ranges_returns_exact_bytes(
    data: bytes, ranges: list[tuple[int, int]], prefix: int, gap: int, chunk: int, workers: int
) -> None:
    src = FakeRanged(data, prefix, gap, chunk, workers)
    wanted = [(min(o, len(data) - 1), n) for o, n in ranges]
    wanted = [(o, min(n, len(data) - o)) for o, n in wanted]
    bufs = [bytearray(n) for _, n in wanted]
    src.read_ranges([(o, memoryview(b)) for (o, _), b in zip(wanted, bufs)])
    for (o, n), b in zip(wanted, bufs):
        assert bytes(b) == data[o : o + n]
    # Nothing inside the prefix is fetched again.
    assert all(o + n > len(src._prefix) for o, n in src.fetches)


def test_coalesce_groups_by_gap() -> None:
    bufs = [memoryview(bytearray(10)) for _ in range(4)]
    groups = coalesce([(100, bufs[0]), (0, bufs[1]), (15, bufs[2]), (31, bufs[3])], gap=5)
    assert [[o for o, _ in g] for g in groups] == [[0, 15], [31], [100]]


@settings(max_examples=60, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 12), st.integers(1, 12), st.integers(1, 6)),
    start=st.tuples(st.integers(0, 11), st.integers(0, 11)),
    step=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    gap=st.integers(0, 64),
)
def test_slices_through_a_ranged_source_match_numpy(
    shape: tuple[int, int, int], start: tuple[int, int], step: tuple[int, int], gap: int
) -> None:
    array = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    blob = save({"a": array})
    src = FakeRanged(blob, prefix=0, gap=gap, chunk=50, workers=2)
    idx = (slice(min(start[0], shape[0] - 1), None, step[0]), slice(min(start[1], shape[1] - 1), None, step[1]))
    with safe_open(src, "np") as f:
        np.testing.assert_array_equal(f.get_slice("a")[idx], array[idx])
