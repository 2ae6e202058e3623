"""tools.summary's ``summarize`` called directly: every count and row against the header as
json reads it and the tensors as upstream safetensors reads them; ModelSpec entries; shortening."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from pysafetensors.numpy import save_file
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.summary import modelspec, shorten, summarize, tensor_rows

upstream = pytest.importorskip("safetensors.numpy")

ARRAYS = {
    "model.embed.weight": np.zeros((10, 4), np.float32),
    "model.layers.0.w": np.zeros((4, 4), ml_dtypes.bfloat16),
    "model.layers.1.w": np.zeros((4, 4), ml_dtypes.bfloat16),
    "model.norm": np.zeros((4,), np.float16),
    "step": np.zeros((), np.int64),
}
META = {"format": "pt", "modelspec.title": "tiny", "modelspec.architecture": "x"}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "m.safetensors"
    save_file(ARRAYS, str(p), metadata=META)
    return p


def _header(path: Path) -> tuple[int, dict]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return n, json.loads(raw[8:8 + n])


def test_counts_match_the_header_and_the_oracle(path: Path) -> None:
    n, header = _header(path)
    oracle = upstream.load_file(str(path))
    s = summarize(str(path))
    assert (s.file_size, s.header_size, s.tensor_count) == (path.stat().st_size, n, 5)
    assert s.parameter_count == sum(a.size for a in oracle.values()) == 40 + 16 + 16 + 4 + 1
    assert s.parameters_by_dtype == {"F32": 40, "BF16": 32, "F16": 4, "I64": 1}
    assert s.bytes_by_dtype == {"F32": 160, "BF16": 64, "F16": 8, "I64": 8}
    assert s.metadata == META == header["__metadata__"]
    assert s.files is None and s.filter is None and s.total_tensor_count == 5


def test_rows_are_the_header_entries_in_file_order(path: Path) -> None:
    _, header = _header(path)
    entries = sorted(((k, v) for k, v in header.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"])
    with open_checkpoint(path) as ckpt:
        rows = tensor_rows(ckpt)
    assert [r.name for r in rows] == [k for k, _ in entries]
    for row, (_, entry) in zip(rows, entries):
        assert (row.dtype, row.shape, row.data_offsets) == (entry["dtype"], entry["shape"], entry["data_offsets"])
        assert row.nbytes == entry["data_offsets"][1] - entry["data_offsets"][0]
        assert row.parameters == int(np.prod(entry["shape"])) and row.file is None


def test_patterns_select_what_is_counted(path: Path) -> None:
    s = summarize(str(path), ["model.layers.*"])
    assert [r.name for r in s.tensors] == ["model.layers.0.w", "model.layers.1.w"]
    assert (s.tensor_count, s.parameter_count, s.total_tensor_count) == (2, 32, 5)
    assert s.parameters_by_dtype == {"BF16": 32} and s.filter == ["model.layers.*"]


def test_the_tree_holds_every_tensor_once_with_its_totals(path: Path) -> None:
    s = summarize(str(path), tree=True)
    assert s.tree is not None
    root = s.tree.to_dict()

    def leaves(d: dict) -> list[dict]:
        return [d] if not d["children"] else [x for k in d["children"] for x in leaves(k)]

    found = {leaf["name"]: (leaf["dtype"], leaf["shape"], leaf["parameters"]) for leaf in leaves(root)}
    assert found == {k: (r.dtype, r.shape, r.parameters) for k, r in ((r.name, r) for r in s.tensors)}
    assert (root["tensors"], root["parameters"], root["nbytes"]) == (5, 77, 240)
    model = next(c for c in root["children"] if c["name"] == "model")
    assert (model["tensors"], model["parameters"]) == (4, 76)


def test_modelspec_and_shorten() -> None:
    assert modelspec(META) == {"modelspec.title": "tiny", "modelspec.architecture": "x"}
    assert modelspec(None) == {} and modelspec({"format": "pt"}) == {}
    assert shorten("abc", 5) == "abc"
    assert shorten("x" * 12, 5) == "xxxxx... (12 chars)"
