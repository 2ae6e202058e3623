"""Hypothesis-generated headers: arbitrary JSON in every slot, same verdict as upstream."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pysafetensors import SafetensorError, deserialize
from pysafetensors.format import parse_header, parse_header_length

safetensors = pytest.importorskip("safetensors")

DTYPES = ["F32", "F16", "U8", "BOOL", "F4", "F6_E2M3", "I64", "f32", "X"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
dims = st.integers(min_value=0, max_value=9) | st.sampled_from([2**32, 2**63, 2**64 - 1, 2**64]) | json_values
entries = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(DTYPES) | json_values,
        "shape": st.lists(dims, max_size=3) | json_values,
        "data_offsets": st.lists(st.integers(min_value=0, max_value=40), min_size=2, max_size=2) | json_values,
    },
    optional={"extra": json_values},
)
headers = st.dictionaries(
    st.text(max_size=4) | st.just("__metadata__"),
    entries | json_values | st.dictionaries(st.text(max_size=3), st.text(max_size=3)),
    max_size=4,
)


def verdicts(data: bytes) -> tuple[bool, bool]:
    try:
        safetensors.deserialize(data)
        up = True
    except safetensors.SafetensorError:
        up = False
    try:
        deserialize(data)
        ours = True
    except SafetensorError:
        ours = False
    return up, ours


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=headers, data_len=st.integers(min_value=0, max_value=40), pad=st.sampled_from(["", " ", "\n", "\t  "]))
@pytest.mark.slow
def test_generated_headers_match_upstream(header: dict, data_len: int, pad: str) -> None:
    text = json.dumps(header, ensure_ascii=False) + pad
    h = text.encode("utf-8", "surrogatepass")
    data = struct.pack("<Q", len(h)) + h + bytes(data_len)
    up, ours = verdicts(data)
    assert up == ours, f"upstream {'accepts' if up else 'rejects'}: {data!r}"


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=64), declared=st.integers(min_value=0, max_value=2**64 - 1) | st.integers(0, 80))
def test_raw_bytes_never_escape_as_other_errors(blob: bytes, declared: int) -> None:
    data = struct.pack("<Q", declared) + blob
    try:
        n = parse_header_length(data[:8], len(data))
        parse_header(data[8 : 8 + n], len(data))
    except SafetensorError:
        pass
    up, ours = verdicts(data)
    assert up == ours, data
