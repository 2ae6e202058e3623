"""tools.pairing called directly: ``equal_bytes`` stops at the first differing chunk, and
``stream_pair`` pairs every shared key once, in a's order, reading each side once."""

from __future__ import annotations

from typing import Any

import pytest

from pysafetensors.tools.pairing import equal_bytes, stream_pair


class Bar:
    def __init__(self) -> None:
        self.done = 0

    def update(self, n: int) -> None:
        self.done += n


@pytest.mark.parametrize("chunk", [1, 3, 4, 100])
def test_equal_bytes(chunk: int) -> None:
    a = memoryview(bytes(range(10)))
    assert equal_bytes(a, memoryview(bytes(range(10))), chunk)
    assert not equal_bytes(a, memoryview(bytes(range(9))), chunk)  # lengths differ
    changed = bytearray(range(10))
    changed[7] ^= 1
    bar = Bar()
    assert not equal_bytes(a, memoryview(bytes(changed)), chunk, bar)
    assert bar.done == 10  # the chunks before, then the rest counted as done at the first difference


def test_equal_bytes_counts_every_byte_when_equal() -> None:
    bar = Bar()
    assert equal_bytes(memoryview(b"abcdefg"), memoryview(b"abcdefg"), 3, bar)
    assert bar.done == 7


def _items(keys: list[str]) -> list[tuple[str, str, bytes]]:
    return [(k, f"info-{k}", k.encode()) for k in keys]


def _run(a: list[str], b: list[str]) -> tuple[list[tuple[str, Any, Any]], list[str], list[str], list[str]]:
    pairs: list[tuple[str, Any, Any]] = []
    seen_a: list[str] = []
    seen_b: list[str] = []
    reread: list[str] = []

    def reread_b(key: str) -> bytes:
        reread.append(key)
        return key.encode()

    stream_pair(_items(a), _items(b), set(a), set(b), reread_b,
                lambda k, ta, da, tb, db: pairs.append((k, (ta, da), (tb, db))),
                visit_a=lambda t, d: seen_a.append(t), visit_b=lambda t, d: seen_b.append(t),
                keep=lambda d: d)
    return pairs, seen_a, seen_b, reread


def test_same_order_pairs_in_step() -> None:
    pairs, seen_a, seen_b, reread = _run(["x", "y", "z"], ["x", "y", "z"])
    assert [p[0] for p in pairs] == ["x", "y", "z"]
    assert all(p[1] == (f"info-{p[0]}", p[0].encode()) == p[2] for p in pairs)
    assert seen_a == seen_b == ["info-x", "info-y", "info-z"] and reread == []


def test_any_order_pairs_every_shared_key_once_in_as_order() -> None:
    pairs, seen_a, seen_b, reread = _run(["p", "q", "only_a", "r"], ["r", "only_b", "q", "p"])
    assert [p[0] for p in pairs] == ["p", "q", "r"]
    assert sorted(seen_b) == ["info-only_b", "info-p", "info-q", "info-r"]  # every b tensor visited once
    assert seen_a == ["info-p", "info-q", "info-only_a", "info-r"]
    assert reread == []  # small tensors wait held, never read twice


def test_no_shared_keys_visits_both_sides() -> None:
    pairs, seen_a, seen_b, _ = _run(["a1", "a2"], ["b1"])
    assert pairs == [] and seen_a == ["info-a1", "info-a2"] and seen_b == ["info-b1"]
