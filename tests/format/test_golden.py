"""Golden bytes: exact files for small inputs, equal to what upstream safetensors writes."""

from __future__ import annotations

import itertools
import json
import struct
from typing import Any

import numpy as np
import pytest

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors.format import all_dtypes, by_code, encode_header, parse_header, plan_layout

GOLDEN: list[tuple[str, dict[str, Any], dict[str, str] | None, bytes]] = [
    ("empty", {}, None, b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "),
    (
        "one_f32",
        {"a": np.array([1.0, 2.0], dtype=np.float32)},
        None,
        (
            b'8\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  '
            b"\x00\x00\x80?\x00\x00\x00@"
        ),
    ),
    (
        "dtype_order_and_metadata",
        {"b": np.array([1, 2], dtype=np.int8), "a": np.array([1], dtype=np.uint64), "c": np.array(True)},
        {"format": "np"},
        (
            b'\xc8\x00\x00\x00\x00\x00\x00\x00{"__metadata__":{"format":"np"},'
            b'"a":{"dtype":"U64","shape":[1],"data_offsets":[0,8]},'
            b'"b":{"dtype":"I8","shape":[2],"data_offsets":[8,10]},'
            b'"c":{"dtype":"BOOL","shape":[],"data_offsets":[10,11]}}       '
            b"\x01\x00\x00\x00\x00\x00\x00\x00\x01\x02\x01"
        ),
    ),
    (
        "non_ascii_name_empty_tensor",
        {"\u00e9": np.zeros((0, 3), dtype=np.float16)},
        None,
        b'@\x00\x00\x00\x00\x00\x00\x00{"\xc3\xa9":{"dtype":"F16","shape":[0,3],"data_offsets":[0,0]}}       ',
    ),
    (
        "metadata_only",
        {},
        {"k": "v"},
        b' \x00\x00\x00\x00\x00\x00\x00{"__metadata__":{"k":"v"}}      ',
    ),
]


@pytest.mark.parametrize("case", GOLDEN, ids=[c[0] for c in GOLDEN])
def test_golden_bytes(case: tuple[str, dict[str, Any], dict[str, str] | None, bytes]) -> None:
    _, tensors, metadata, expected = case
    assert pnp.save(tensors, metadata=metadata) == expected
    snp = pytest.importorskip("safetensors.numpy")
    assert snp.save(tensors, metadata=metadata) == expected


def test_golden_file_matches_save(tmp_path: Any) -> None:
    _, tensors, metadata, expected = GOLDEN[2]
    path = tmp_path / "g.safetensors"
    pnp.save_file(tensors, path, metadata=metadata)
    assert path.read_bytes() == expected


def test_bf16_torch_golden() -> None:
    torch = pytest.importorskip("torch")
    import pysafetensors.torch as ptt

    expected = b'8\x00\x00\x00\x00\x00\x00\x00{"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}} \xc0?'
    assert ptt.save({"w": torch.tensor([1.5], dtype=torch.bfloat16)}) == expected


def test_header_is_padded_to_eight_and_compact() -> None:
    for n in range(1, 20):
        data = pnp.save({"x" * n: np.zeros(n, dtype=np.uint8)})
        size = struct.unpack("<Q", data[:8])[0]
        assert (8 + size) % 8 == 0
        text = data[8 : 8 + size].decode()
        assert text == text.rstrip() + " " * (len(text) - len(text.rstrip()))
        assert ", " not in text and ": " not in text


def test_metadata_order_is_kept_as_given() -> None:
    meta = {"z": "1", "a": "2", "m": "3", "\u00fc": "\u2603"}
    data = pnp.save({}, metadata=meta)
    size = struct.unpack("<Q", data[:8])[0]
    raw = data[8 : 8 + size].decode()
    assert raw.rstrip() == '{"__metadata__":{"z":"1","a":"2","m":"3","\u00fc":"\u2603"}}'
    assert list(json.loads(raw)["__metadata__"]) == list(meta)
    # upstream orders metadata randomly; the parsed header must still agree
    st = pytest.importorskip("safetensors")
    up = st.serialize({}, metadata=meta)
    upsize = struct.unpack("<Q", up[:8])[0]
    assert json.loads(up[8 : 8 + upsize]) == json.loads(raw)
    assert len(up) == len(data)


def test_write_order_is_dtype_rank_then_name() -> None:
    codes = [d.code for d in all_dtypes()]
    specs = [(f"t{i}", by_code(c), [8]) for i, c in enumerate(codes)]
    layout = plan_layout(specs)
    assert [e.dtype.code for e in layout.entries] == list(reversed(codes))
    same = plan_layout([("b", by_code("F32"), [1]), ("a", by_code("F32"), [1]), ("B", by_code("F32"), [1])])
    assert [e.name for e in same.entries] == ["B", "a", "b"]
    offsets = [(e.begin, e.end) for e in layout.entries]
    assert offsets[0][0] == 0 and all(a[1] == b[0] for a, b in itertools.pairwise(offsets))


def test_encode_then_parse_round_trip() -> None:
    entries = [("a", "F32", [2, 2], 0, 16), ("b", "F4", [4], 16, 18)]
    header = encode_header(entries, {"k": "v"})
    parsed = parse_header(header, 8 + len(header) + 18)
    assert [(t.name, t.dtype.code, list(t.shape), t.begin, t.end) for t in parsed.tensors] == entries
    assert parsed.metadata == {"k": "v"}
    assert parsed.data_start == 8 + len(header)


def test_dtype_table_bits() -> None:
    expected = {
        "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
        "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
        "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
    }
    assert {d.code: d.bits for d in all_dtypes()} == expected
    assert [d.code for d in all_dtypes()] == list(expected)  # enum order = write rank


def test_serialize_spec_equals_numpy_save() -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    spec = pysafetensors.TensorSpec(dtype="int32", shape=[2, 3], data_ptr=a.ctypes.data, data_len=a.nbytes)
    assert pysafetensors.serialize({"a": spec}) == pnp.save({"a": a})


@pytest.mark.parametrize("name", ['a"b', "back\\slash", "nl\n\t\r\b\f", "ctl\x01\x1f\x7f", "\u2028\u2029", "\U0001f600",
                                  "", " ", "__metadata__x", "é" * 40])
def test_json_escaping_matches_upstream(name: str) -> None:
    snp = pytest.importorskip("safetensors.numpy")
    tensors = {name: np.arange(3, dtype=np.int16)}
    meta = {name: name}
    ours = pnp.save(tensors, metadata=meta)
    assert ours == snp.save(tensors, metadata=meta)
    assert pnp.load(ours)[name].tolist() == [0, 1, 2]
