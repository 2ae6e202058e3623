"""Two checkpoints read side by side: the reading under :mod:`~pysafetensors.tools.diff`.

:func:`stream_pair` streams both once, each in its own file order (a value diff, and the viewer's
report: stats of both inputs and their diff from one pass each); :func:`differing_spans` and
:func:`equal_bytes` compare tensor bytes in chunks, stopping at a tensor's first differing chunk.

A tensor read over the network (no memory map) is fetched once and held in memory while
several computations use it (:func:`hold`, up to :data:`HOLD_CAP` bytes), so the stats,
histogram and comparison of a remote tensor cost one read of its bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from .checkpoint import ReadOnSlice, TensorBytes, ValueTensor

# A tensor without a memory map (HTTP, fsspec) up to this size is read once and held while its
# numbers are computed; a larger one is streamed by each computation in turn.  Read at call
# time, so tests can shrink it.
HOLD_CAP = 256 << 20

#: (key, tensor, bytes): a tensor as a side streams it, ``key`` being the name it is paired by
Item = tuple[str, ValueTensor, TensorBytes]


def hold(data: TensorBytes) -> TensorBytes:
    """``data``, read into memory once when it comes over the network (no memory map) and is at
    most HOLD_CAP bytes, so several computations share one read; a view is returned as it is.
    A GGUF tensor keeps its stored (quantized) bytes and decodes them as each computation asks."""
    return data.held(HOLD_CAP) if isinstance(data, ReadOnSlice) else data


def resident(data: TensorBytes, mapped: bool) -> int:
    """Bytes of memory ``data`` keeps while it waits: none for bytes read only when sliced
    (ranged reads, GGUF values not yet fetched) or for views of a ``mapped`` local file."""
    if isinstance(data, ReadOnSlice):
        return data.resident()
    if mapped and isinstance(data, memoryview):
        return 0
    return len(data)


def stream_pair(
    from_a: Iterable[Item],
    from_b: Iterable[Item],
    in_a: set[str],
    in_b: set[str],
    reread_b: Callable[[str], TensorBytes],
    on_pair: Callable[[str, ValueTensor, TensorBytes, ValueTensor, TensorBytes], None],
    visit_a: Callable[[ValueTensor, TensorBytes], None] | None = None,
    visit_b: Callable[[ValueTensor, TensorBytes], None] | None = None,
    keep: Callable[[TensorBytes], TensorBytes] = hold,
    b_mapped: bool = False,
) -> None:
    """Walk both sides once, each in the order its iterator gives (its file order), calling
    ``visit_a``/``visit_b`` on every tensor as it comes and ``on_pair`` on each key both sides
    hold, in ``from_a``'s order; every tensor's bytes go through ``keep`` first (:func:`hold`
    when several computations use them; the identity when one comparison reads them).

    ``in_a``/``in_b`` are the keys each side gives.  ``from_b`` is taken as far as the partner of ``a``'s current tensor.  A tensor of ``b``
    that comes before its partner in ``a`` waits, held,
    until ``a`` reaches it: nothing waits when both files keep their shared tensors in the same
    order (the writer's order).  Held bytes beyond HOLD_CAP in all are let go and read again
    with ``reread_b(key)`` for the pairing (the one case where b's bytes are read twice).
    ``b_mapped``: b's memoryviews are views of a mapped local file, holding no memory.
    """
    # b's tensors read before their partner in a: key -> (tensor, bytes or None when let go, bytes held)
    waiting: dict[str, tuple[ValueTensor, TensorBytes | None, int]] = {}
    waiting_bytes = 0
    b_iter: Iterator[Item] = iter(from_b)

    def seen_b(item: Item) -> tuple[str, ValueTensor, TensorBytes, int]:
        key, tb, raw = item
        db = keep(raw)
        if visit_b is not None:
            visit_b(tb, db)
        return key, tb, db, resident(db, b_mapped)

    for key, ta, raw_a in from_a:
        da = keep(raw_a)
        if visit_a is not None:
            visit_a(ta, da)
        if key not in in_b:
            continue
        if key in waiting:
            tb, db_waiting, cost = waiting.pop(key)
            waiting_bytes -= cost
            db = db_waiting if db_waiting is not None else keep(reread_b(key))
            on_pair(key, ta, da, tb, db)
            continue
        for item in b_iter:
            kb, tb, db, cost = seen_b(item)
            if kb == key:
                on_pair(key, ta, da, tb, db)
                break
            if kb in in_a:  # its partner in a is still to come
                room = waiting_bytes + cost <= HOLD_CAP
                waiting[kb] = (tb, db, cost) if room else (tb, None, 0)
                waiting_bytes += cost if room else 0
    for item in b_iter:  # b's own tensors after the last shared one
        seen_b(item)


def equal_bytes(da: TensorBytes, db: TensorBytes, chunk: int, bar: Any = None) -> bool:
    """Whether two byte sequences are equal, compared ``chunk`` bytes at a time and stopping at
    the first chunk that differs (``bar`` advances by the bytes of ``da`` compared)."""
    n = len(da)
    if n != len(db):
        return False
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        same = _same(da[lo:hi], db[lo:hi])
        if bar is not None:
            bar.update(hi - lo if same else n - lo)  # a tensor that differs is done
        if not same:
            return False
    return True


class Span(NamedTuple):
    """A tensor both sides hold, as stored: its file and offset in each side's data regions."""

    key: str
    a_file: int
    a_begin: int
    b_file: int
    b_begin: int
    length: int


#: ``view(file, offset, length)``: bytes of one side's data region ``file`` (a mapped view, its
#: bounds checked on each call)
RegionView = Callable[[int, int, int], Any]


def _same(xa: Any, xb: Any) -> bool:
    import numpy as np

    if len(xa) <= 4096:  # small: a plain bytes comparison costs less than building arrays
        return bytes(xa) == bytes(xb)
    return bool(np.array_equal(np.frombuffer(xa, np.uint8), np.frombuffer(xb, np.uint8)))


def differing_spans(spans: list[Span], view_a: RegionView, view_b: RegionView, chunk: int, bar: Any) -> set[str]:
    """The keys of ``spans`` (in a's file order) whose bytes differ between the two sides.

    Tensors that lie back to back in both files form runs, compared ``chunk`` bytes at a time
    whatever the tensors' sizes (a file of many small tensors is compared at the rate of large
    reads); only a chunk that differs is looked at tensor by tensor, and the rest of a tensor
    known to differ is skipped (the first differing chunk settles it).
    """
    differ: set[str] = set()
    i = 0
    while i < len(spans):
        j = i + 1
        while j < len(spans):
            p, q = spans[j - 1], spans[j]
            if (q.a_file, q.a_begin, q.b_file, q.b_begin) != (p.a_file, p.a_begin + p.length, p.b_file,
                                                              p.b_begin + p.length):
                break
            j += 1
        _compare_run(spans[i:j], view_a, view_b, chunk, bar, differ)
        i = j
    return differ


def _compare_run(run: list[Span], view_a: RegionView, view_b: RegionView, chunk: int, bar: Any,
                 differ: set[str]) -> None:
    first = run[0]
    ends = list(itertools.accumulate(s.length for s in run))  # run-relative
    hi, pos, k = ends[-1], 0, 0
    while pos < hi:
        while ends[k] <= pos:  # the first tensor still ahead (empty ones are equal by nature)
            k += 1
        if run[k].key in differ:  # settled: skip the rest of it
            bar.update(ends[k] - pos)
            pos = ends[k]
            continue
        stop = min(hi, pos + chunk)
        xa = view_a(first.a_file, first.a_begin + pos, stop - pos)
        xb = view_b(first.b_file, first.b_begin + pos, stop - pos)
        if not _same(xa, xb):
            m = k
            while m < len(run) and ends[m] - run[m].length < stop:
                lo, e = max(pos, ends[m] - run[m].length), min(stop, ends[m])
                if lo < e and run[m].key not in differ and not _same(xa[lo - pos : e - pos], xb[lo - pos : e - pos]):
                    differ.add(run[m].key)
                m += 1
        del xa, xb  # views of a mapped file: let go before the next chunk
        bar.update(stop - pos)
        pos = stop
