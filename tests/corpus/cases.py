"""The broken-file corpus: tiny files built in code, each with the error class it must raise.

Imported by tests/format/test_corpus.py; ``python tests/corpus/cases.py OUTDIR`` writes
the files out for other tools (fuzzers, the CLI) to use.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any


def build(header: Any, data: bytes = b"") -> bytes:
    """A file with ``header`` (a JSON-able object or raw bytes) and ``data``; length as given."""
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(body)) + body + data


def _t(dtype: str, shape: list[Any], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _deep(levels: int) -> bytes:
    """A valid tensor with an ignored extra field nesting ``levels`` arrays (2 levels above it)."""
    return (b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + b"[" * levels + b"]" * levels
            + b"}}")


# name -> (file bytes, error class name in pysafetensors.errors)
BROKEN: dict[str, tuple[bytes, str]] = {
    "empty_file": (b"", "HeaderTooSmall"),
    "seven_bytes": (b"\x00" * 7, "HeaderTooSmall"),
    "header_over_cap": (struct.pack("<Q", 100_000_001) + b"{}", "HeaderTooLarge"),
    "header_max_u64": (b"\xff" * 8 + b"{}", "HeaderTooLarge"),
    "header_past_eof": (struct.pack("<Q", 50) + b"{}", "InvalidHeaderLength"),
    "header_not_utf8": (build(b'{"\xff":1}'), "InvalidHeaderUtf8"),
    "header_truncated_utf8": (build(b'{"\xe2\x82":1}'), "InvalidHeaderUtf8"),
    "json_truncated": (build(b'{"a":'), "InvalidHeaderJson"),
    "json_empty_header": (struct.pack("<Q", 0), "InvalidHeaderJson"),
    "json_trailing_garbage": (build(b"{} x"), "InvalidHeaderJson"),
    "json_nan": (build(b'{"a":NaN}'), "InvalidHeaderJson"),
    "json_bom": (build(b"\xef\xbb\xbf{}"), "InvalidHeaderJson"),
    "json_array_top": (build(b"[]"), "InvalidHeaderJson"),
    "json_string_top": (build(b'"x"'), "InvalidHeaderJson"),
    "json_lone_surrogate_name": (build(b'{"\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
                                 "InvalidHeaderJson"),
    "json_lone_surrogate_meta": (build(b'{"__metadata__":{"a":"\\udc00"}}'), "InvalidHeaderJson"),
    "dup_metadata": (build(b'{"__metadata__":{},"__metadata__":{}}'), "InvalidHeaderJson"),
    "dup_field_dtype": (build(b'{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
                        "InvalidHeaderJson"),
    "dup_field_shape": (build(b'{"a":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}', b"x"),
                        "InvalidHeaderJson"),
    "metadata_list": (build({"__metadata__": []}), "InvalidHeaderJson"),
    "metadata_string": (build({"__metadata__": "x"}), "InvalidHeaderJson"),
    "metadata_int_value": (build({"__metadata__": {"a": 1}}), "InvalidHeaderJson"),
    "metadata_null_value": (build({"__metadata__": {"a": None}}), "InvalidHeaderJson"),
    "metadata_map_value": (build({"__metadata__": {"a": {}}}), "InvalidHeaderJson"),
    "tensor_null": (build({"a": None}), "InvalidHeaderJson"),
    "tensor_string": (build({"a": "x"}), "InvalidHeaderJson"),
    "tensor_int": (build({"a": 1}), "InvalidHeaderJson"),
    "tensor_list_of_2": (build({"a": ["U8", [1]]}, b"x"), "InvalidHeaderJson"),
    "tensor_list_of_4": (build({"a": ["U8", [1], [0, 1], 1]}, b"x"), "InvalidHeaderJson"),
    "missing_dtype": (build({"a": {"shape": [1], "data_offsets": [0, 1]}}, b"x"), "InvalidHeaderJson"),
    "missing_shape": (build({"a": {"dtype": "U8", "data_offsets": [0, 1]}}, b"x"), "InvalidHeaderJson"),
    "missing_offsets": (build({"a": {"dtype": "U8", "shape": [1]}}, b"x"), "InvalidHeaderJson"),
    "dtype_lowercase": (build({"a": _t("f32", [1], 0, 4)}, b"xxxx"), "InvalidHeaderJson"),
    "dtype_unknown": (build({"a": _t("F128", [1], 0, 16)}, b"x" * 16), "InvalidHeaderJson"),
    "dtype_int": (build({"a": _t(1, [1], 0, 1)}, b"x"), "InvalidHeaderJson"),  # type: ignore[arg-type]
    "dtype_null": (build({"a": _t(None, [1], 0, 1)}, b"x"), "InvalidHeaderJson"),  # type: ignore[arg-type]
    "shape_string": (build({"a": {"dtype": "U8", "shape": "1", "data_offsets": [0, 1]}}, b"x"), "InvalidHeaderJson"),
    "shape_null": (build({"a": {"dtype": "U8", "shape": None, "data_offsets": [0, 1]}}, b"x"), "InvalidHeaderJson"),
    "shape_negative": (build({"a": _t("U8", [-1], 0, 1)}, b"x"), "InvalidHeaderJson"),
    "shape_minus_zero": (build(b'{"a":{"dtype":"U8","shape":[-0],"data_offsets":[0,0]}}'), "InvalidHeaderJson"),
    "shape_float": (build({"a": _t("U8", [1.0], 0, 1)}, b"x"), "InvalidHeaderJson"),
    "shape_exponent": (build(b'{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}', b"x"), "InvalidHeaderJson"),
    "shape_bool": (build({"a": _t("U8", [True], 0, 1)}, b"x"), "InvalidHeaderJson"),
    "shape_string_dim": (build({"a": _t("U8", ["1"], 0, 1)}, b"x"), "InvalidHeaderJson"),
    "shape_past_u64": (build({"a": _t("U8", [2**64], 0, 1)}, b"x"), "InvalidHeaderJson"),
    "offsets_three": (build({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}}, b"x"),
                      "InvalidHeaderJson"),
    "offsets_one": (build({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1]}}, b"x"), "InvalidHeaderJson"),
    "offsets_negative": (build({"a": _t("U8", [1], -1, 0)}, b"x"), "InvalidHeaderJson"),
    "offsets_float": (build({"a": _t("U8", [1], 0.0, 1)}, b"x"), "InvalidHeaderJson"),  # type: ignore[arg-type]
    "offsets_string": (build({"a": {"dtype": "U8", "shape": [1], "data_offsets": "0,1"}}, b"x"),
                       "InvalidHeaderJson"),
    "offset_hole_at_start": (build({"a": _t("U8", [1], 1, 2)}, b"xx"), "InvalidOffset"),
    "offset_hole_between": (build({"a": _t("U8", [1], 0, 1), "b": _t("U8", [1], 2, 3)}, b"xyz"), "InvalidOffset"),
    "offset_overlap": (build({"a": _t("U8", [2], 0, 2), "b": _t("U8", [2], 1, 3)}, b"xyz"), "InvalidOffset"),
    "offset_end_before_begin": (build({"a": _t("U8", [0], 0, 0), "c": _t("U8", [1], 1, 0)}), "InvalidOffset"),
    "size_too_small": (build({"a": _t("F32", [2], 0, 4)}, b"xxxx"), "TensorSizeMismatch"),
    "size_too_big": (build({"a": _t("F32", [1], 0, 8)}, b"x" * 8), "TensorSizeMismatch"),
    "size_empty_tensor_with_bytes": (build({"a": _t("F32", [0], 0, 4)}, b"xxxx"), "TensorSizeMismatch"),
    "size_huge_end": (build({"a": _t("U8", [1], 0, 2**64 - 1)}, b"x"), "TensorSizeMismatch"),
    "overflow_shape_product": (build({"a": _t("F32", [2**62, 4], 0, 4)}, b"xxxx"), "ValidationOverflow"),
    "overflow_bits": (build({"a": _t("F64", [2**61], 0, 4)}, b"xxxx"), "ValidationOverflow"),
    "subbyte_f4_odd": (build({"a": _t("F4", [3], 0, 2)}, b"xx"), "MisalignedSubByte"),
    "subbyte_f6_three": (build({"a": _t("F6_E2M3", [3], 0, 3)}, b"xxx"), "MisalignedSubByte"),
    "dup_tensor_first_invalid": (build(b'{"a":"junk","a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
                                 "InvalidHeaderJson"),
    "dup_tensor_first_bad_dtype": (
        build(b'{"a":{"dtype":"XX","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
              b"x"),
        "InvalidHeaderJson",
    ),
    "dup_metadata_key_first_invalid": (build(b'{"__metadata__":{"a":1,"a":"2"}}'), "InvalidHeaderJson"),
    "nesting_past_serde_limit": (build(_deep(126), b"x"), "InvalidHeaderJson"),
    "nesting_far_past_limit": (build(_deep(5000), b"x"), "InvalidHeaderJson"),
    "control_char_in_name": (build(b'{"a\x01":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"), "InvalidHeaderJson"),
    "number_out_of_range": (build(b'{"a":{"dtype":"U8","shape":[1e400],"data_offsets":[0,1]}}', b"x"), "InvalidHeaderJson"),
    "leading_zero": (build(b'{"a":{"dtype":"U8","shape":[01],"data_offsets":[0,1]}}', b"x"), "InvalidHeaderJson"),
    "trailing_comma": (build(b'{"__metadata__":{},}'), "InvalidHeaderJson"),
    "trailing_nul": (build(b"{}\x00"), "InvalidHeaderJson"),
    "data_longer_than_tensors": (build({"a": _t("U8", [1], 0, 1)}, b"xx"), "IncompleteBuffer"),
    "data_shorter_than_tensors": (build({"a": _t("U8", [2], 0, 2)}, b"x"), "IncompleteBuffer"),
    "no_tensors_but_data": (build({}, b"x"), "IncompleteBuffer"),
}

# Edge cases upstream ACCEPTS; we must accept them too and read the same tensors/metadata.
ACCEPTED: dict[str, bytes] = {
    "empty_object": build(b"{}"),
    "whitespace_around": build(b" \t\n{}\r "),
    "metadata_null": build({"__metadata__": None}),
    "metadata_dup_key_last_wins": build(b'{"__metadata__":{"a":"1","a":"2"}}'),
    "dup_tensor_last_wins": build(
        b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
        b"xy",
    ),
    "tensor_as_3_list": build({"a": ["U8", [1], [0, 1]]}, b"x"),
    "dtype_as_unit_map": build(b'{"a":{"dtype":{"U8":null},"shape":[1],"data_offsets":[0,1]}}', b"x"),
    "extra_field_ignored": build({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": [1]}}, b"x"),
    "empty_name": build({"": _t("U8", [1], 0, 1)}, b"x"),
    "surrogate_pair_name": build(b'{"\\ud83d\\ude00":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
    "scalar": build({"a": _t("I16", [], 0, 2)}, b"\x01\x02"),
    # (upstream orders tensors with equal offsets randomly, so no two share both offsets here)
    "zero_sized_tensors": build({"b": _t("F32", [0, 3], 1, 1), "c": _t("U8", [1], 0, 1), "a": _t("U8", [0], 0, 0)},
                                b"x"),
    "file_order_differs_from_name_order": build({"z": _t("U8", [1], 0, 1), "a": _t("U8", [2], 1, 3)}, b"xyz"),
    "metadata_after_tensors": build(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{"k":"v"}}',
                                    b"x"),
    "nesting_at_serde_limit": build(_deep(125), b"x"),
    "dup_extra_field": build(b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1,"x":[2]}}', b"x"),
    # header length 69 (not padded to 8): tensors sit at unaligned addresses
    "unaligned_data": build(b'{"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},'
                            b'"b":{"dtype":"I32","shape":[1],"data_offsets":[16,20]}}',
                            struct.pack("<2di", 1.5, -2.25, 7)),
    "f4_even": build({"a": _t("F4", [4], 0, 2)}, b"\x12\x34"),
    "f6_four": build({"a": _t("F6_E3M2", [4], 0, 3)}, b"\x12\x34\x56"),
}


def main(out: str) -> None:
    root = Path(out)
    for kind, table in (("broken", {k: v[0] for k, v in BROKEN.items()}), ("valid", ACCEPTED)):
        (root / kind).mkdir(parents=True, exist_ok=True)
        for name, data in table.items():
            (root / kind / f"{name}.safetensors").write_bytes(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "corpus-out")
