"""The GGUF header parser, layout checks and reader against gguf-py, the reference implementation."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from gguf_helpers import EVERY_VALUE, V, gguf, gguf_v1, mixed_tensors, quants, write_gguf

from pysafetensors.errors import GGUFError, GGUFUnsupported, SafetensorError
from pysafetensors.gguf import GGUFArray, GGUFFile, check_layout, parse_gguf_bytes
from pysafetensors.gguf.types import GGML_TYPES, ValueType
from pysafetensors.io.sources import MmapSource

ARRAYS = {
    "test.arr.i32": ([1, -2, 3], V.INT32),
    "test.arr.f32": ([0.5, 1e-3], V.FLOAT32),
    "test.arr.str": (["a", "b\"c", ""], V.STRING),
    "test.arr.bool": ([True, False], V.BOOL),
    "test.arr.u64": ([2**64 - 1, 0], V.UINT64),
    "test.arr.nested": ([[1, 2], [3]], V.ARRAY),
}


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "m.gguf", mixed_tensors(), kv=EVERY_VALUE, arrays=ARRAYS)


def test_ggml_table_matches_gguf_py() -> None:
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        ours = GGML_TYPES[int(qtype)]
        assert (ours.name, ours.block_elements, ours.block_bytes) == (qtype.name, block, size)
    assert set(GGML_TYPES) == {int(q) for q in gguf.GGMLQuantizationType}
    assert {t.name: int(t) for t in ValueType} == {t.name: int(t) for t in gguf.GGUFValueType}


def test_header_matches_gguf_reader(mixed: Path) -> None:
    ref = gguf.GGUFReader(mixed)
    header = parse_gguf_bytes(mixed.read_bytes())
    assert header.version == 3
    assert header.data_offset == ref.data_offset
    assert header.alignment == ref.alignment
    ref_fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(header.fields) == list(ref_fields)
    for key, field in ref_fields.items():
        ours = header.fields[key]
        assert int(ours.type) == int(field.types[0]), key
        if ours.type is ValueType.ARRAY and ours.value.item_type is not ValueType.ARRAY:
            assert ours.value.items == pytest.approx(field.contents()), key
        elif ours.type is not ValueType.ARRAY:
            assert ours.value == pytest.approx(field.contents()), key
    nested = header.fields["test.arr.nested"].value
    assert isinstance(nested, GGUFArray) and [a.items for a in nested.items] == [[1, 2], [3]]
    assert [t.name for t in header.tensors] == [t.name for t in ref.tensors]
    for ours, theirs in zip(header.tensors, ref.tensors):
        assert list(ours.dims) == theirs.shape.tolist()
        assert ours.type_id == int(theirs.tensor_type)
        assert header.data_offset + ours.offset == theirs.data_offset
        assert ours.nbytes == theirs.n_bytes
        assert ours.n_elements == theirs.n_elements
    assert list(check_layout(header)) == []


def test_values_match_gguf_py_dequantization(mixed: Path) -> None:
    ref = {t.name: t for t in gguf.GGUFReader(mixed).tensors}
    with GGUFFile(MmapSource(mixed)) as f:
        for name in f.names():
            ours = f.array(name)
            t = ref[name]
            plain = t.tensor_type in (gguf.GGMLQuantizationType.I32, gguf.GGMLQuantizationType.F16)
            expected = t.data if plain else quants.dequantize(t.data, t.tensor_type)
            assert ours.shape == tuple(reversed(t.shape.tolist())), name
            np.testing.assert_array_equal(np.asarray(ours, dtype=np.float64),
                                          np.asarray(expected, dtype=np.float64).reshape(ours.shape), err_msg=name)
        assert f.array("ids").dtype == np.int32
        assert str(f.array("bf16").dtype) == "bfloat16"
        assert f.array("q4_k").dtype == np.float32


def test_version_1_is_read(tmp_path: Path) -> None:
    data = np.arange(8, dtype=np.float32).tobytes()
    path = gguf_v1(
        tmp_path / "v1.gguf",
        [("general.name", 8, struct.pack("<I", 3) + b"old"), ("n", 4, struct.pack("<I", 7))],
        [("t", [4, 2], 0, 0)],
        data,
    )
    with GGUFFile(MmapSource(path)) as f:
        assert f.version == 1
        assert f.header.value("general.name") == "old" and f.header.value("n") == 7
        np.testing.assert_array_equal(f.array("t"), np.arange(8, dtype=np.float32).reshape(2, 4))


def test_every_truncation_is_a_gguf_error(mixed: Path) -> None:
    data = mixed.read_bytes()
    header_end = parse_gguf_bytes(data).data_offset
    for cut in range(header_end):
        try:
            header = parse_gguf_bytes(data[:cut])
        except GGUFError:
            continue
        # only the padding before the data section is missing: the layout check says so
        assert any("past the end" in p.message for p in check_layout(header)), cut


def _prefix(version: int, n_tensors: int, n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def _s(text: str) -> bytes:
    return struct.pack("<Q", len(text.encode())) + text.encode()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"GGML" + bytes(20), "not a GGUF file"),
        (b"GGUF" + struct.pack("<I", 4) + bytes(16), "unsupported GGUF version 4"),
        (_prefix(3, 0, 2**62), "metadata count"),
        (_prefix(3, 2**63, 0), "tensor count"),
        (_prefix(3, 0, 1) + struct.pack("<Q", 2**63) + b"k" * 20, "string length"),
        (_prefix(3, 0, 1) + _s("k") + struct.pack("<I", 99) + bytes(8), "unknown GGUF value type 99"),
        (_prefix(3, 0, 1) + _s("tok") + struct.pack("<IIQ", 9, 8, 2**63), "declares 9223372036854775808 items"),
        (_prefix(3, 0, 1) + _s("k") + struct.pack("<I", 8) + struct.pack("<Q", 2) + b"\xff\xfe", "invalid UTF-8"),
        (_prefix(3, 1, 0) + _s("t") + struct.pack("<I", 5) + bytes(40 + 12), "has 5 dimensions"),
        (_prefix(3, 1, 0) + _s("t") + struct.pack("<IQIQ", 1, 2**63, 0, 0), "does not fit in int64"),
        (_prefix(3, 1, 0) + _s("t") + struct.pack("<IQQIQ", 2, 2**32, 2**32, 0, 0), "overflows int64"),
    ],
)
def test_malformed_headers(data: bytes, fragment: str) -> None:
    with pytest.raises(GGUFError) as info:
        parse_gguf_bytes(data)
    assert fragment in str(info.value)


def test_duplicate_metadata_keys_are_listed_not_fatal() -> None:
    """A repeated key stops nothing: the parse goes on (so validate lists every problem), the
    first value is kept, and the layout check (which opening a file runs) names the key."""
    data = _prefix(3, 0, 3) + (_s("k") + struct.pack("<IB", 0, 1)) + (_s("k") + struct.pack("<IB", 0, 2))
    data += _s("j") + struct.pack("<IB", 0, 3)
    header = parse_gguf_bytes(data)
    assert header.value("k") == 1 and header.value("j") == 3
    problems = list(check_layout(header))
    assert [(p.code, p.message) for p in problems] == [("duplicate_key", f"duplicate metadata key 'k' at offset {24 + 9 + 5}")]


def test_huge_array_is_refused_before_allocating() -> None:
    data = _prefix(3, 0, 1) + _s("tokenizer.ggml.tokens") + struct.pack("<IQ", 8, 2**63) + bytes(1000)
    tracemalloc.start()
    try:
        with pytest.raises(GGUFError, match="tokenizer.ggml.tokens"):
            parse_gguf_bytes(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def _tensor(name: str, dims: list[int], qtype: int, offset: int) -> bytes:
    return _s(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", qtype, offset)


def _file(tensors: list[bytes], data_len: int, kv: bytes = b"", n_kv: int = 0) -> bytes:
    out = _prefix(3, len(tensors), n_kv) + kv + b"".join(tensors)
    return out + bytes(-len(out) % 32) + bytes(data_len)


def test_layout_problems_are_all_listed() -> None:
    data = _file(
        [
            _tensor("a", [8], 0, 0),  # 32 bytes at 0
            _tensor("b", [8], 0, 16),  # misaligned and overlapping a
            _tensor("c", [30], 8, 64),  # Q8_0 row of 30 is not whole blocks
            _tensor("d", [4], 77, 96),  # unknown GGML type
            _tensor("e", [1000], 0, 128),  # past the end
            _tensor("a", [1], 0, 96),  # duplicate name
        ],
        128,
    )
    problems = [p.describe() for p in check_layout(parse_gguf_bytes(data))]
    assert any("'b'" in p and "not a multiple of the alignment 32" in p for p in problems)
    assert any("overlap" in p for p in problems)
    assert any("'c'" in p and "block size 32" in p for p in problems)
    assert any("unknown GGML type 77" in p for p in problems)
    assert any("'e'" in p and "past the end" in p for p in problems)
    assert "tensor 'a': the name is used by an earlier tensor too" in problems


def test_opening_refuses_a_bad_layout(tmp_path: Path) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(_file([_tensor("e", [1000], 0, 0)], 64))
    with pytest.raises(GGUFError, match="past the end"):
        GGUFFile(MmapSource(path))
    f = GGUFFile(MmapSource(path), validate=False)
    with pytest.raises(SafetensorError):
        f.array("e")
    f.close()


def test_bad_alignment_is_a_layout_problem() -> None:
    kv = _s("general.alignment") + struct.pack("<II", 4, 48)
    problems = [p.message for p in check_layout(parse_gguf_bytes(_file([], 0, kv, 1)))]
    assert problems == ["general.alignment 48 is not a power of two"]


def test_unknown_type_cannot_be_dequantized(tmp_path: Path) -> None:
    path = tmp_path / "u.gguf"
    path.write_bytes(_file([_tensor("x", [4], 77, 0)], 32))
    f = GGUFFile(MmapSource(path), validate=False)
    with pytest.raises(GGUFUnsupported, match="unknown"):
        f.array("x")
    f.close()
