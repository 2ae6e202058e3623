"""weight-inspect's GGUF ID against an implementation written here from its description, and
GGUF -> safetensors conversion against gguf-py's dequantization and the source checkpoint."""

from __future__ import annotations

import hashlib
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy as upstream_numpy  # the oracle reads what we wrote
from gguf_helpers import EVERY_VALUE, Q, V, gguf, llama_gguf, llama_source, mixed_tensors, quants, write_gguf

from pysafetensors.errors import GGUFUnsupported
from pysafetensors.gguf import GGUFFile
from pysafetensors.gguf.convert import convert_gguf
from pysafetensors.gguf.identity import gguf_identity
from pysafetensors.gguf.names import hf_names
from pysafetensors.io.sources import MmapSource

ARRAYS = {
    "test.arr.f32": ([0.1, -2.0], V.FLOAT32),
    "test.arr.str": (["x\u0007", "é"], V.STRING),
    "test.arr.nested": ([[1, 2], [3]], V.ARRAY),
}


# --- an independent reading of the ID's description -------------------------------------------
def _wi_string(s: str) -> str:
    out = '"'
    for ch in s:
        code = ord(ch)
        if ch == '"':
            out += '\\"'
        elif ch == "\\":
            out += "\\\\"
        elif ch == "\n":
            out += "\\n"
        elif ch == "\r":
            out += "\\r"
        elif ch == "\t":
            out += "\\t"
        elif code < 32 or code == 127:
            out += f"\\u{code:04x}"
        else:
            out += ch
    return out + '"'


def _wi_value(field: object, types: list, data_index: int | None = None) -> str:  # type: ignore[type-arg]
    raise NotImplementedError


def _wi_canon(vtype: int, value: object, sub: list[int]) -> str:
    if vtype == 9:  # array: sub = [item type, (nested item type...)]
        return "[" + ",".join(_wi_canon(sub[0], v, sub[1:]) for v in value) + "]"  # type: ignore[attr-defined]
    if vtype == 8:
        return _wi_string(value)  # type: ignore[arg-type]
    if vtype == 7:
        return "true" if value else "false"
    if vtype == 12:
        return str(struct.unpack("<Q", struct.pack("<d", value))[0])
    if vtype == 6:
        return "f32:" + str(struct.unpack("<Q", struct.pack("<d", float(np.float32(value))))[0])
    return str(int(value))  # type: ignore[call-overload]


def _reference_id(path: Path) -> str:
    reader = gguf.GGUFReader(path)
    metadata = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        vtype = int(field.types[0])
        if vtype == 9 and int(field.types[1]) == 9:
            # gguf-py flattens nested arrays: re-read them from the writer's known values
            value = [[1, 2], [3]]
        elif vtype == 9:
            value = field.contents()
        else:
            value = field.contents()
        metadata[key] = _wi_canon(vtype, value, [int(t) for t in field.types[1:]])
    sizes = {"f32": 4, "i32": 4, "f16": 2, "i16": 2, "bf16": 2, "i8": 1, "i64": 8, "f64": 8}
    tensors = {}
    for t in reader.tensors:
        dtype = t.tensor_type.name.lower()
        tensors[t.name] = {"name": t.name, "dtype": dtype, "shape": [int(d) for d in t.shape],
                           "byte_length": int(t.n_elements) * sizes.get(dtype, 0)}
    doc = {"format": "gguf", "gguf_version": 3, "metadata": dict(sorted(metadata.items())),
           "tensors": dict(sorted(tensors.items()))}
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return "wi:gguf:3:" + hashlib.sha256(text.encode()).hexdigest()[:8]


def test_identity_matches_independent_implementation(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "id.gguf", mixed_tensors(), kv=EVERY_VALUE, arrays=ARRAYS)
    with GGUFFile(MmapSource(path)) as f:
        ours = gguf_identity(f.header)
    assert ours.short == _reference_id(path)
    assert len(ours.sha256) == 64


def test_identity_changes_with_metadata_and_types(tmp_path: Path) -> None:
    base = {"t": (np.zeros((2, 32), np.float32), None)}
    a = write_gguf(tmp_path / "a.gguf", base, kv={"k": (1, V.UINT32)})
    b = write_gguf(tmp_path / "b.gguf", base, kv={"k": (1, V.INT32)})  # same number, other type: same text
    c = write_gguf(tmp_path / "c.gguf", base, kv={"k": (2, V.UINT32)})
    ids = []
    for p in (a, b, c):
        with GGUFFile(MmapSource(p)) as f:
            ids.append(gguf_identity(f.header).short)
    assert ids[0] == ids[1] != ids[2]


# --- conversion --------------------------------------------------------------------------------
def test_convert_matches_gguf_py_dequantization(tmp_path: Path) -> None:
    src = write_gguf(tmp_path / "m.gguf", mixed_tensors(), kv=EVERY_VALUE)
    out = tmp_path / "m.safetensors"
    with GGUFFile(MmapSource(src)) as f:
        report = convert_gguf(f, out, dtype="f32")
    assert report.tensors == 8
    loaded = upstream_numpy.load_file(out)
    ref = {t.name: t for t in gguf.GGUFReader(src).tensors}
    for name, t in ref.items():
        if t.tensor_type in (Q.I32,):
            np.testing.assert_array_equal(loaded[name], np.asarray(t.data))
            assert loaded[name].dtype == np.int32
            continue
        expected = t.data.astype(np.float32) if t.tensor_type == Q.F16 else quants.dequantize(t.data, t.tensor_type)
        assert loaded[name].dtype == np.float32
        np.testing.assert_array_equal(loaded[name], np.asarray(expected).reshape(loaded[name].shape))
    from safetensors import safe_open

    with safe_open(out, "np") as st:
        meta = st.metadata()
    assert meta["gguf.general.architecture"] == "llama"
    assert meta["gguf.test.u64"] == str(2**64 - 1)
    assert meta["gguf.test.bool"] == "true"
    assert meta["gguf.test.string"] == EVERY_VALUE["test.string"][0]
    assert math.isclose(float(meta["gguf.test.f32"]), 0.1, rel_tol=1e-6)
    assert meta["gguf.version"] == "3"


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_convert_casts_floats_not_integers(tmp_path: Path, dtype: str) -> None:
    src = write_gguf(tmp_path / "m.gguf", mixed_tensors())
    out = tmp_path / "m.safetensors"
    with GGUFFile(MmapSource(src)) as f:
        convert_gguf(f, out, dtype=dtype)
    from safetensors import safe_open

    with safe_open(out, "np") as st:
        dtypes = {k: st.get_slice(k).get_dtype() for k in st.keys()}  # noqa: SIM118 - safe_open is not a mapping
    assert dtypes["ids"] == "I32"
    assert {v for k, v in dtypes.items() if k != "ids"} == {dtype.upper()}


def test_convert_keep(tmp_path: Path) -> None:
    plain = {k: v for k, v in mixed_tensors().items() if k in ("f32", "f16", "ids")}
    src = write_gguf(tmp_path / "p.gguf", plain)
    out = tmp_path / "p.safetensors"
    with GGUFFile(MmapSource(src)) as f:
        convert_gguf(f, out, dtype="keep")
    loaded = upstream_numpy.load_file(out)
    for name, (array, _) in plain.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)
    quantized = write_gguf(tmp_path / "q.gguf", mixed_tensors())
    with GGUFFile(MmapSource(quantized)) as f, pytest.raises(GGUFUnsupported, match="q8_0"):
        convert_gguf(f, tmp_path / "q.safetensors", dtype="keep")
    assert not (tmp_path / "q.safetensors").exists()


def test_hf_names_undo_llama_permutation(tmp_path: Path) -> None:
    source = llama_source()
    src = llama_gguf(tmp_path / "llama.gguf", source)
    with GGUFFile(MmapSource(src)) as f:
        mapping = hf_names(f.header)
        assert mapping.unmapped == []
        assert sorted(mapping.hf.values()) == sorted(source)
        report = convert_gguf(f, tmp_path / "back.safetensors", hf=True)
    assert sorted(report.unpermuted) == ["model.layers.0.self_attn.k_proj.weight",
                                         "model.layers.0.self_attn.q_proj.weight"]
    back = upstream_numpy.load_file(tmp_path / "back.safetensors")
    assert sorted(back) == sorted(source)
    for name, array in source.items():
        np.testing.assert_array_equal(back[name], array, err_msg=name)


def test_hf_names_report_what_cannot_be_mapped(tmp_path: Path) -> None:
    src = write_gguf(tmp_path / "x.gguf", {"blk.0.attn_q.weight": (np.zeros((4, 32), np.float32), None),
                                           "mystery.weight": (np.zeros(32, np.float32), None)})
    with GGUFFile(MmapSource(src)) as f:
        mapping = hf_names(f.header)
    assert mapping.unmapped == ["mystery.weight"]
    assert mapping.hf == {"blk.0.attn_q.weight": "model.layers.0.self_attn.q_proj.weight"}
