"""format/index.py: size parsing, shard names, index JSON, shard planning (pure stdlib)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pysafetensors.errors import InvalidIndex
from pysafetensors.format.index import (
    ShardIndex,
    check_shard,
    encode_index,
    index_file_name,
    parse_index,
    parse_size,
    plan_shards,
    shard_names,
    validate_shard_name,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (123, 123),
        ("123", 123),
        ("5GB", 5 * 10**9),
        ("500MB", 500 * 10**6),
        ("100KB", 100_000),
        ("1.5GB", 1_500_000_000),
        (" 2 gb ", 2 * 10**9),
        ("1TB", 10**12),
        ("2GiB", 2 * 2**30),
        ("10B", 10),
    ],
)
def test_parse_size_decimal_units(text: int | str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "GB", "5XB", "-1GB", "0", 0, -5, "five", 1.5, True, None])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        parse_size(bad)  # type: ignore[arg-type]


def test_parse_size_agrees_with_huggingface_hub() -> None:
    hub = pytest.importorskip("huggingface_hub.serialization._base")
    for text in ["5GB", "500MB", "100KB", "1TB", "3.5MB"]:
        assert parse_size(text) == hub.parse_size_to_int(text)


@pytest.mark.parametrize(
    "name",
    ["/etc/passwd.safetensors", "\\x.safetensors", "C:x.safetensors", "c:\\w.safetensors", "../m.safetensors",
     "a/../m.safetensors", "sub/m.safetensors", "sub\\m.safetensors", "m.bin", ".safetensors", "", 3, None,
     "m.safetensors\x00.txt", ".."],
)
def test_unsafe_shard_names_are_rejected(name: object) -> None:
    with pytest.raises(InvalidIndex):
        validate_shard_name(name)


def test_safe_shard_names() -> None:
    for name in ["model-00001-of-00002.safetensors", "model.fp16-00001-of-00002.safetensors", "x..y.safetensors"]:
        assert validate_shard_name(name) == name


def test_index_round_trip_and_text_format() -> None:
    index = ShardIndex(weight_map={"b": "model-00002-of-00002.safetensors", "a": "model-00001-of-00002.safetensors"},
                       metadata={"total_size": 12, "format": "pt"})
    text = encode_index(index)
    assert text.endswith("}\n")
    assert text == json.dumps({"metadata": dict(index.metadata), "weight_map": dict(index.weight_map)},
                              indent=2, sort_keys=True) + "\n"
    assert text.index('"a"') < text.index('"b"')
    back = parse_index(text)
    assert back == index
    assert back.shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


@pytest.mark.parametrize(
    "data",
    [b"not json", b"[]", b'{"metadata": {}}', b'{"weight_map": []}', b'{"weight_map": {"a": 1}}',
     b'{"weight_map": {"a": "../x.safetensors"}}', b'{"weight_map": {}, "metadata": []}', b"\xff\xfe"],
)
def test_bad_index_is_invalid_index(data: bytes) -> None:
    with pytest.raises(InvalidIndex):
        parse_index(data, "m.safetensors.index.json")


def test_the_first_bad_shard_name_in_weight_map_order_is_reported() -> None:
    # Shard names are checked once each, not in order; the one reported is still the first.
    for order in (["a", "b", "c", "d"], ["d", "c", "b", "a"]):
        values = {"a": "ok.safetensors", "b": "../up.safetensors", "c": "ok.safetensors", "d": "/abs.safetensors"}
        weight_map = {k: values[k] for k in order}
        with pytest.raises(InvalidIndex) as e:
            parse_index(json.dumps({"weight_map": weight_map}), "i.json")
        first_bad = next(values[k] for k in order if values[k] != "ok.safetensors")
        assert repr(first_bad) in str(e.value)


DUP = "appears twice"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"weight_map": {"a": "s.safetensors", "a": "t.safetensors"}}', DUP),
        ('{"weight_map": {"aA": "s.safetensors", "a\\u0041": "t.safetensors"}}', DUP),  # the same key, escaped
        ('{"weight_map": {}, "weight_map": {"a": "s.safetensors"}}', DUP),
        ('{"metadata": {"k": "1", "k": "2"}, "weight_map": {"a": "s.safetensors"}}', {"k": "2"}),  # last wins
        ('{"metadata": {"k": [{"x": 1, "x": "2"}]}, "weight_map": {"a": "s.safetensors"}}', {"k": [{"x": "2"}]}),
        ('{"weight_map": {"a\\"b": "s.safetensors", "a": "s.safetensors"}}', {}),
        ('{"metadata": {"n": [1, "two", {"3": null}]}, "weight_map": {"a": "s.safetensors"}}',
         {"n": [1, "two", {"3": None}]}),
    ],
)
def test_a_key_given_twice_is_found_in_any_text(text: str, verdict: object) -> None:
    # str, UTF-8 and UTF-16 bytes (json reads all three): the same verdict.
    for data in (text, text.encode("utf-8"), text.encode("utf-16")):
        if verdict == DUP:
            with pytest.raises(InvalidIndex, match=DUP):
                parse_index(data, "i.json")
        else:
            assert parse_index(data, "i.json").metadata == verdict


def _check_by_definition(weight_map: dict[str, str], shard: str, present: list[str]) -> tuple[tuple[str, ...], ...]:
    """check_shard's three lists, spelled out one tensor at a time."""
    missing = tuple(sorted(n for n, s in weight_map.items() if s == shard and n not in present))
    unmapped = tuple(n for n in present if n not in weight_map)
    elsewhere = tuple(n for n in present if n in weight_map and weight_map[n] != shard)
    return missing, unmapped, elsewhere


def test_check_shard_agrees_with_its_definition() -> None:
    # Shapes that keep the counts equal while the names differ (a swap, an unmapped name in
    # place of a missing one) as well as the exact match checked in one pass.
    weight_map = {"a": "s1", "b": "s1", "c": "s2", "d": "s2", "e": "s3"}
    index = ShardIndex(weight_map)
    cases = [["a", "b"], ["b", "a"], ["a", "c"], ["a", "x"], ["a"], ["a", "b", "c"], [], ["x", "y"], ["c", "d"],
             ["e"], ["a", "b", "x"]]
    for shard in ("s1", "s2", "s3", "s4"):
        for present in cases:
            got = check_shard(index, shard, present, None)
            assert (got.missing, got.unmapped, got.elsewhere) == _check_by_definition(weight_map, shard, present)


def test_file_names_follow_transformers() -> None:
    assert shard_names(1) == ["model.safetensors"]
    assert shard_names(3) == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert shard_names(2, variant="fp16") == ["model.fp16-00001-of-00002.safetensors",
                                              "model.fp16-00002-of-00002.safetensors"]
    assert shard_names(1, variant="fp16") == ["model.fp16.safetensors"]
    assert index_file_name() == "model.safetensors.index.json"
    assert index_file_name(variant="fp16") == "model.safetensors.index.fp16.json"


def test_plan_greedy_in_key_order_oversized_alone() -> None:
    entries = [("a", 6, None), ("b", 6, None), ("c", 2, None), ("big", 25, None), ("d", 6, None), ("e", 2, None)]
    # As huggingface_hub: the oversized tensor's shard is emitted at once, the open shard keeps filling.
    assert plan_shards(entries, 10) == [["a"], ["big"], ["b", "c"], ["d", "e"]]
    assert plan_shards([], 10) == [[]]
    assert plan_shards([("x", 0, None)], 1) == [["x"]]


def test_plan_keeps_shared_storage_together() -> None:
    entries = [("w1", 6, "s"), ("x", 6, None), ("w2", 3, "s")]
    plan = plan_shards(entries, 10)
    assert next(s for s in plan if "w1" in s) == next(s for s in plan if "w2" in s)
    assert plan == [["w1", "w2"], ["x"]]


def test_plan_matches_huggingface_hub_factory() -> None:
    hub = pytest.importorskip("huggingface_hub.serialization._base")
    import random

    rng = random.Random(1)
    for trial in range(50):
        sizes = {f"t{i}": rng.choice([0, 1, 3, 7, 10, 15, 40]) for i in range(rng.randint(1, 30))}
        limit = rng.choice([8, 10, 16, 50, 1000])
        split = hub.split_state_dict_into_shards_factory(
            sizes, get_storage_size=lambda n: n, filename_pattern="model{suffix}.safetensors", max_shard_size=limit
        )
        plan = plan_shards([(k, v, None) for k, v in sizes.items()], limit)
        ours = dict(zip(shard_names(len(plan)), plan))
        assert ours == split.filename_to_tensors, (trial, sizes, limit)
        assert sum(sizes.values()) == split.metadata["total_size"]


def test_format_index_is_pure() -> None:
    code = ("import sys, pysafetensors.format.index; "
            "assert not {'numpy','torch','jax','fsspec'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
