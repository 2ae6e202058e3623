"""The small rules that live once in format/: dtype facts, shapes, duplicate names, the shard/index
rule, index parsing limits, and the layout's bounds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _helpers import count_name_checks

from pysafetensors.errors import InvalidIndex, InvalidMetadata, InvalidShape, MisalignedSubByte, SerializeError
from pysafetensors.format.dtypes import BY_CODE, all_dtypes, by_buffer_format, by_name, reverse_table
from pysafetensors.format.header import HEADER_CAP
from pysafetensors.format.index import (
    CHECKPOINT_ID_KEY,
    ShardIndex,
    check_shard,
    parse_index,
    plan_shards,
    shard_position,
)
from pysafetensors.format.layout import MAX_FILE_SIZE, as_shape, plan_layout, unique_by_name

F32, F64, F4 = BY_CODE["F32"], BY_CODE["F64"], BY_CODE["F4"]

# --- dtype facts ---------------------------------------------------------------------------------


def test_paired_shape_rule() -> None:
    assert F4.paired and not F32.paired
    assert F4.file_shape((3, 4)) == (3, 8) and F4.paired_shape((3, 8)) == (3, 4)
    assert F4.file_shape(()) == ()  # a 0-d pair: one F4 value, half a byte, which the layout refuses
    with pytest.raises(MisalignedSubByte, match="byte boundary"):
        plan_layout([("s", F4, F4.file_shape(()))], None)
    assert F4.paired_shape((3, 7)) is None and F4.paired_shape(()) is None
    assert F32.file_shape((3, 4)) == F32.paired_shape((3, 4)) == (3, 4)


def test_dlpack_native_is_the_numpy_native_set() -> None:
    np = pytest.importorskip("numpy")
    native = {d.code for d in all_dtypes() if d.dlpack_native}
    assert native == {"BOOL", "U8", "I8", "I16", "U16", "F16", "I32", "U32", "F32", "C64", "F64", "I64", "U64"}
    for d in all_dtypes():  # exactly the ones numpy can export through DLPack
        arr = np.zeros(2, dtype=d.numpy.partition(":")[2].rstrip("_")) if d.dlpack_native else None
        if arr is not None:
            assert np.from_dlpack(arr).dtype == arr.dtype


def test_reverse_lookups() -> None:
    assert by_name("F32") is F32 and by_name("float32") is F32 and by_name("bool") is BY_CODE["BOOL"]
    assert by_name("float4_e2m1fn_x2") is F4 and by_name("float4_e2m1fn") is F4 and by_name("bool_") is BY_CODE["BOOL"]
    with pytest.raises(ValueError, match='Unknown dtype "float128"'):
        by_name("float128")
    table = reverse_table(lambda d: d.code.lower() if d.bits >= 8 else None)
    assert table["f32"] is F32 and "f4" not in table
    assert reverse_table(lambda d: "same")["same"] is BY_CODE["BOOL"]  # first in table order wins
    assert by_buffer_format("<f", 4) is F32 and by_buffer_format("d", 8) is F64 and by_buffer_format("B", 1).code == "U8"
    assert by_buffer_format("Zf", 8).code == "C64" and by_buffer_format("q", 8).code == "I64"
    assert by_buffer_format(">f", 4) is None and by_buffer_format("T{i:x:}", 4) is None


# --- shapes and names ---------------------------------------------------------------------------


def test_as_shape_takes_integer_sequences_only() -> None:
    assert as_shape((2, 3)) == (2, 3) and as_shape([]) == () and as_shape(iter([4])) == (4,)
    np = pytest.importorskip("numpy")
    assert as_shape([np.int64(2), np.uint8(3)]) == (2, 3)
    for bad, word in [("12", "str"), ([1.5], "float"), (["2"], "str"), ([True, 2], "bool"), (3, "int"),
                      ({"a": 1}, "dict"), ([2.0], "float")]:
        with pytest.raises(InvalidShape, match=word) as e:
            as_shape(bad, "t")
        assert "tensor 't'" in str(e.value) and isinstance(e.value, TypeError) and isinstance(e.value, SerializeError)
    with pytest.raises(InvalidShape, match="negative"):
        as_shape([2, -1])


def test_one_duplicate_name_rule() -> None:
    assert list(unique_by_name(["a", "b"], str)) == ["a", "b"]
    with pytest.raises(SerializeError, match="'a' appears twice"):
        unique_by_name(["a", "b", "a"], str)
    with pytest.raises(SerializeError, match="'x' appears twice"):
        plan_shards([("x", 1, None), ("x", 2, None)], 10)
    with pytest.raises(SerializeError, match="'x' appears twice"):
        plan_layout([("x", F32, (1,)), ("x", F32, (2,))])


def test_a_plain_save_checks_names_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from pysafetensors.format import layout
    from pysafetensors.writer import WriteItem, write_bytes

    calls = []

    def counted(items: Any, name_of: Any) -> Any:
        calls.append(1)
        return unique_by_name(items, name_of)

    monkeypatch.setattr(layout, "unique_by_name", counted)
    write_bytes([WriteItem("a", F32, (1,), lambda: b"\0" * 4), WriteItem("b", F32, (0,), lambda: b"")])
    assert len(calls) == 1
    with pytest.raises(SerializeError, match="'a' appears twice"):
        write_bytes([WriteItem("a", F32, (0,), lambda: b"")] * 2)


@pytest.mark.parametrize("shards", [1, 2])
def test_a_sharded_save_checks_names_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, shards: int) -> None:
    from pysafetensors import sharded
    from pysafetensors.writer import WriteItem

    calls = count_name_checks(monkeypatch)
    items = [WriteItem(n, F32, (2,), lambda: b"\0" * 8) for n in ("a", "b")]
    out = sharded.write_sharded(items, tmp_path / "ckpt", max_shard_size=8 if shards == 2 else 100)
    assert out.endswith(".index.json" if shards == 2 else "model.safetensors")
    assert len(calls) == 1
    with pytest.raises(SerializeError, match="'a' appears twice"):
        sharded.write_sharded([*items, items[0]], tmp_path / "dup", max_shard_size=8 if shards == 2 else 100)
    with pytest.raises(InvalidMetadata, match="reserved"):
        sharded.write_sharded([*items, WriteItem("__metadata__", F32, (0,), lambda: b"")], tmp_path / "meta",
                              max_shard_size=8 if shards == 2 else 100)
    assert not (tmp_path / "dup").exists() or not any((tmp_path / "dup").iterdir())
    assert not (tmp_path / "meta").exists() or not any((tmp_path / "meta").iterdir())


# --- layout bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2**61,), (2**62,), (2**63,), (2**64,), (2**40, 2**40)])
def test_sizes_past_a_file_offset_are_refused_with_the_values(shape: tuple[int, ...]) -> None:
    with pytest.raises(SerializeError, match="largest file offset") as e:
        plan_layout([("big", F64, shape)])
    assert "'big'" in str(e.value) and f"{list(shape)}" in str(e.value)
    plan_layout([("ok", BY_CODE["U8"], (MAX_FILE_SIZE - 1000,))])  # just under: planned


@pytest.mark.parametrize("alignment", [2**40, HEADER_CAP + 8, 12, 0, -8, True, 8.0, "8"])
def test_bad_alignment_is_a_clear_error(alignment: object) -> None:
    with pytest.raises(SerializeError, match="alignment") as e:
        plan_layout([("a", F32, (1,))], alignment=alignment)  # type: ignore[arg-type]
    assert repr(alignment) in str(e.value) or str(alignment) in str(e.value)


def test_large_alignment_within_the_cap_works() -> None:
    layout = plan_layout([("a", F32, (1,))], alignment=1 << 20)
    assert layout.data_start == 1 << 20


def test_header_over_the_readers_cap_is_refused() -> None:
    with pytest.raises(SerializeError, match="header would be"):
        plan_layout([("a", F32, (1,))], {"k": "v" * (HEADER_CAP + 1)})


# --- the index ----------------------------------------------------------------------------------


def test_duplicate_weight_map_keys_are_refused() -> None:
    text = ('{"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", '
            '"a": "model-00002-of-00002.safetensors"}}')
    assert json.loads(text)["weight_map"] == {"a": "model-00002-of-00002.safetensors"}  # json keeps the last
    with pytest.raises(InvalidIndex, match="tensor 'a' appears twice in the weight map") as e:
        parse_index(text, "idx.json")
    assert "model-00001-of-00002.safetensors" in str(e.value) and "idx.json" in str(e.value)
    with pytest.raises(InvalidIndex, match="'weight_map' appears twice"):
        parse_index('{"weight_map": {}, "weight_map": {"a": "x.safetensors"}}')


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deeply_nested_index_is_invalid_index(depth: int) -> None:
    for text in ("[" * depth + "]" * depth, '{"metadata": ' + '{"a": ' * depth + "1" + "}" * depth + "}"):
        with pytest.raises(InvalidIndex) as e:
            parse_index(text, "deep.json")
        assert "deep.json" in str(e.value)


def test_check_shard_is_the_one_rule() -> None:
    index = ShardIndex({"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"},
                       {"total_size": 1, CHECKPOINT_ID_KEY: "X"})
    ok = check_shard(index, "s1.safetensors", ["a", "b"], {CHECKPOINT_ID_KEY: "X", "format": "pt"})
    assert not ok.mixed and not ok.missing and not ok.ignored
    bad = check_shard(index, "s1.safetensors", ["a", "c", "zz"], {CHECKPOINT_ID_KEY: "Y"})
    assert bad.mixed and bad.missing == ("b",) and bad.unmapped == ("zz",) and bad.elsewhere == ("c",)
    assert "'Y' in the shard, 'X' in the index" in bad.describe_mixed("idx")
    assert "'zz'" in bad.describe_ignored("idx") and "'c'" in bad.describe_ignored("idx")
    assert check_shard(index, "s1.safetensors", ["a", "b"], None).mixed  # index has an id, shard none
    no_ids = ShardIndex({"a": "s1.safetensors"})
    assert not check_shard(no_ids, "s1.safetensors", ["a"], {"format": "pt"}).mixed
    assert check_shard(no_ids, "s1.safetensors", ["a"], {CHECKPOINT_ID_KEY: "Y"}).mixed
    assert index.user_metadata == {"total_size": 1} and index.checkpoint_id == "X"


def test_shard_position() -> None:
    assert shard_position("model-00002-of-00003.safetensors") == (2, 3)
    assert shard_position("model.fp16-00001-of-00001.safetensors") == (1, 1)
    assert shard_position("model.safetensors") is None
