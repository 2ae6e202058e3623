"""Numeric metadata arrays stay compact (their own bytes, not a Python object per item), and
every consumer (inspect, --json, the ID, convert's gguf.* metadata, the viewer's text) reads
them exactly as it read the lists they replace."""

from __future__ import annotations

import json
import math
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from gguf_helpers import V, cli_json, gguf, mixed_tensors, write_gguf

from pysafetensors.gguf import GGUFArray, parse_gguf_bytes
from pysafetensors.gguf import convert as gguf_convert
from pysafetensors.gguf import identity as gguf_identity_module
from pysafetensors.gguf.convert import gguf_metadata
from pysafetensors.gguf.header import GGUFNumbers
from pysafetensors.gguf.identity import canonical_value, gguf_identity
from pysafetensors.gguf.types import ValueType
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.summary import GGUFMetadataEntry, GGUFSummary, gguf_value_text, summarize

NUMBERS = {
    "arr.u8": ([0, 7, 255], V.UINT8),
    "arr.i8": ([-128, 0, 127], V.INT8),
    "arr.u16": ([0, 65535], V.UINT16),
    "arr.i16": ([-32768, 5], V.INT16),
    "arr.u32": ([4_000_000_000, 1, 2, 3, 4, 5, 6], V.UINT32),
    "arr.i32": ([-2_000_000_000, 9], V.INT32),
    "arr.f32": ([0.1, -0.0, float("inf"), float("nan"), -1e30, 3.5, 7.25], V.FLOAT32),
    "arr.bool": ([True, False, True, True], V.BOOL),
    "arr.u64": ([2**64 - 1, 0], V.UINT64),
    "arr.i64": ([-(2**63), 2**63 - 1], V.INT64),
    "arr.f64": ([-1.5e300, float("-inf"), 1e-310, 0.1], V.FLOAT64),
}


def header_with_array(item_format: str, item_type: int, count: int) -> bytes:
    """A GGUF (version 3, no tensors) whose one metadata value is an array of ``count`` items."""
    key = b"big.array"
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key
    out += struct.pack("<IIQ", int(ValueType.ARRAY), item_type, count)
    size = struct.calcsize("<" + item_format)
    return out + bytes(range(251)) * (count * size // 251) + b"\1" * (count * size % 251)


@pytest.mark.parametrize(("fmt", "item_type"), [("B", int(ValueType.UINT8)), ("f", int(ValueType.FLOAT32))])
def test_a_large_numeric_array_costs_its_own_bytes(fmt: str, item_type: int) -> None:
    """10 MB of array items: parsing may copy them a couple of times, but never holds a Python
    object per item (a list of 10M ints took some 18 times the file's bytes)."""
    nbytes = 10_000_000
    count = nbytes // struct.calcsize(fmt)
    data = header_with_array(fmt, item_type, count)
    tracemalloc.start()
    try:
        header = parse_gguf_bytes(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * nbytes + (1 << 20), f"peak {peak:,} bytes for {nbytes:,} bytes of array items"
    value = header.value("big.array")
    assert isinstance(value, GGUFArray) and isinstance(value.items, GGUFNumbers)
    assert len(value) == count and value.items.nbytes == nbytes
    tail = data[-8 * struct.calcsize(fmt):]
    assert value.items[-8:] == list(struct.unpack(f"<8{fmt}", tail))


def test_numbers_read_like_a_list() -> None:
    items = GGUFNumbers(struct.pack("<4i", 5, -6, 7, 8), "i")
    assert len(items) == 4 and items[0] == 5 and items[-1] == 8 and items[1:3] == [-6, 7]
    assert list(items) == [5, -6, 7, 8] == items.tolist() and items == (5, -6, 7, 8) and items != [5, -6, 7]
    assert items == GGUFNumbers(struct.pack("<4q", 5, -6, 7, 8), "q") and items != "5678"
    with pytest.raises(IndexError):
        items[4]
    assert "len=4" in repr(items)
    flags = GGUFNumbers(bytes([0, 1, 2]), "?")
    assert flags.tolist() == [False, True, True] and flags[2] is True
    empty = parse_gguf_bytes(header_with_array("i", int(ValueType.INT32), 0)).fields["big.array"]
    assert empty.value.items == [] and gguf_metadata_of(empty) == "[]" == canonical_value(empty.type, empty.value)


def gguf_metadata_of(field: Any) -> str:
    return gguf_convert.metadata_string(field.type, field.value)


def _reference(path: Path) -> dict[str, list[Any]]:
    reader = gguf.GGUFReader(path)
    return {k: [float(x) if isinstance(x, float) else x for x in reader.fields[k].contents()] for k in NUMBERS}


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
                                    for x, y in zip(a, b))


@pytest.fixture
def numbers(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "n.gguf", mixed_tensors(), arrays=NUMBERS)


@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_convert_metadata_and_id_read_every_item(numbers: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written a chunk of items at a time (3: every array spans chunks), the JSON of convert's
    gguf.* metadata and the ID's canonical strings are those of the whole list."""
    monkeypatch.setattr(gguf_convert, "_CHUNK", chunk)
    monkeypatch.setattr(gguf_identity_module, "_CHUNK", chunk)
    header = parse_gguf_bytes(numbers.read_bytes())
    meta = gguf_metadata(header)
    for key, expected in _reference(numbers).items():
        assert meta[f"gguf.{key}"] == json.dumps(expected, separators=(",", ":")), key
        field = header.fields[key]
        item_type = field.value.item_type
        one_by_one = "[" + ",".join(canonical_value(item_type, v) for v in expected) + "]"
        assert canonical_value(field.type, field.value) == one_by_one, key
    monkeypatch.setattr(gguf_identity_module, "_CHUNK", 1 << 16)
    whole = gguf_identity(header)
    monkeypatch.setattr(gguf_identity_module, "_CHUNK", 2)
    assert gguf_identity(header) == whole


def test_inspect_and_the_viewer_text_read_every_item(numbers: Path) -> None:
    expected = _reference(numbers)
    with open_checkpoint(str(numbers), gguf=True) as ckpt:
        summary = summarize(ckpt)
    assert isinstance(summary, GGUFSummary)
    as_dict = summary.to_dict()["gguf_metadata"]
    for key, values in expected.items():
        entry = summary.gguf_metadata[key]
        assert entry.count == len(values) and _same(list(entry.value), values), key
        listed = [("nan" if math.isnan(v) else "inf" if v > 0 else "-inf") if isinstance(v, float)
                  and not math.isfinite(v) else v for v in values]
        assert as_dict[key]["value"] == listed, key
        # the one-line text inspect and the viewer show: as it was for the plain list
        assert gguf_value_text(entry) == gguf_value_text(GGUFMetadataEntry(entry.type, values, len(values))), key
    code, d = cli_json("inspect", numbers)
    assert code == 0
    assert {k: d["gguf_metadata"][k]["value"] for k in expected} == {k: as_dict[k]["value"] for k in expected}
