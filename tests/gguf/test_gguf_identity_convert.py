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
from pysafetensors.gguf import GGUFFile, parse_gguf_bytes
from pysafetensors.gguf.convert import convert_gguf
from pysafetensors.gguf.identity import gguf_identity, identity_document
from pysafetensors.gguf.names import hf_names
from pysafetensors.io.sources import MmapSource

ARRAYS = {
    "test.arr.f32": ([0.1, -2.0, float("nan"), -0.0], V.FLOAT32),
    "test.arr.str": (["x\u0007", "é", "cr\r del\x7f"], V.STRING),
    "test.arr.nested": ([[1, 2], [3]], V.ARRAY),
    "test.arr.u8": ([0, 255], V.UINT8),
    "test.arr.i8": ([-128, 127], V.INT8),
    "test.arr.u16": ([65535], V.UINT16),
    "test.arr.i16": ([-32768], V.INT16),
    "test.arr.u32": ([4_000_000_000], V.UINT32),
    "test.arr.i32": ([-7, 7], V.INT32),
    "test.arr.u64": ([2**64 - 1], V.UINT64),
    "test.arr.i64": ([-(2**63)], V.INT64),
    "test.arr.f64": ([float("-inf"), 1e-310], V.FLOAT64),
    "test.arr.bool": ([True, False], V.BOOL),
}
#: every ASCII control the canonical form escapes (CR, DEL, NUL...), and non-ASCII ones it keeps raw
CONTROLS_TEXT = "cr\r lf\n tab\t del\x7f nul\x00 bs\x08 vt\x0b ff\x0c esc\x1b us\x1f c1\x85 ls\u2028 \"q\" b\\s"
CONTROLS = {"test.controls": (CONTROLS_TEXT, V.STRING)}


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
    path = write_gguf(tmp_path / "id.gguf", mixed_tensors(), kv=EVERY_VALUE | CONTROLS, arrays=ARRAYS)
    with GGUFFile(MmapSource(path)) as f:
        ours = gguf_identity(f.header)
    assert ours.short == _reference_id(path)
    assert len(ours.sha256) == 64


def test_controls_are_escaped_in_the_canonical_text(tmp_path: Path) -> None:
    """The canonical string of the controls' value, spelled out (so the reference cannot share a
    mistake with the code): CR, DEL and the other ASCII controls escaped, non-ASCII kept raw."""
    path = write_gguf(tmp_path / "c.gguf", {}, kv=CONTROLS)
    with GGUFFile(MmapSource(path)) as f:
        doc = json.loads(identity_document(f.header))
    assert doc["metadata"]["test.controls"] == (
        '"cr\\r lf\\n tab\\t del\\u007f nul\\u0000 bs\\u0008 vt\\u000b ff\\u000c esc\\u001b us\\u001f '
        'c1\x85 ls\u2028 \\"q\\" b\\\\s"')


def tiny_gguf_header() -> bytes:
    """weight-inspect's tests/fixtures/tiny.gguf (las7/weight-inspect, scripts/create_test_fixtures.py):
    a header only, version 3, general.architecture = "llama" and one F32 tensor of GGUF dims
    [64, 128] at offset 0, with no data section."""
    def text(b: bytes) -> bytes:
        return struct.pack("<Q", len(b)) + b

    kv = text(b"general.architecture") + struct.pack("<I", 8) + text(b"llama")
    info = text(b"test.weight.0") + struct.pack("<IQQIQ", 2, 64, 128, 0, 0)
    return b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + info


def test_identity_of_a_header_alone_is_weight_inspects_golden() -> None:
    """The ID needs only the header: parsed on its own (no layout check, no data), weight-inspect's
    own fixture gives its golden ID (tests/golden/id_tiny_gguf.txt)."""
    ident = gguf_identity(parse_gguf_bytes(tiny_gguf_header()))
    assert ident.sha256 == "d775e08a3e69f1edce0f3230ecc28841dd1c871f467529a0a8e7aa361b671202"
    assert ident.short == "wi:gguf:3:d775e08a"


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


def test_nvfp4_is_named_as_weight_inspect_names_it(tmp_path: Path) -> None:
    """weight-inspect's type table has no NVFP4 (GGML type 40): it names such a tensor's dtype
    ``unknown_40``, and so does the canonical form, so the file gets weight-inspect's ID;
    ``inspect`` and the rest still call the type nvfp4."""
    raw = np.zeros((2, 36), dtype=np.uint8)  # two rows of one NVFP4 block (64 values) each
    path = write_gguf(tmp_path / "n.gguf", {"w": (raw, gguf.GGMLQuantizationType(40))})
    with GGUFFile(MmapSource(path)) as f:
        doc = json.loads(identity_document(f.header))
        assert f.info("w").type_name == "nvfp4"
    assert doc["tensors"]["w"] == {"name": "w", "dtype": "unknown_40", "shape": [64, 2], "byte_length": 0}


def test_bf16_conversion_keeps_nan_payloads(tmp_path: Path) -> None:
    """--dtype bf16: numbers round to nearest even (torch's rounding, the oracle); a NaN keeps its
    sign and the top of its payload, quieted (bits >> 16 | 0x0040), where ml_dtypes makes every
    NaN 0x7FC0/0xFFC0 (and torch 2.13 on CPU every NaN 0xFFFF)."""
    torch = pytest.importorskip("torch")
    nan_bits = np.array([0x7FC00001, 0x7FA12345, 0xFF812345, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32)
    numbers = np.random.default_rng(5).standard_normal(27).astype(np.float32)
    x = np.concatenate([nan_bits.view(np.float32), numbers]).reshape(1, 32)
    path = write_gguf(tmp_path / "nan.gguf", {"x": (x, None)})
    with GGUFFile(MmapSource(path)) as f:
        convert_gguf(f, tmp_path / "nan.safetensors", dtype="bf16")
    got = upstream_numpy.load_file(tmp_path / "nan.safetensors")["x"].view(np.uint16).reshape(-1)
    assert [hex(b) for b in got[:5]] == ["0x7fc0", "0x7fe1", "0xffc1", "0x7fc0", "0xffff"]
    want = torch.from_numpy(numbers).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got[5:], want)
