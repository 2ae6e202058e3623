"""id: the weight-inspect canonical form, exactly; content and per-tensor hashes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from pysafetensors.tools.identity import canonical_form, structural_id
from pysafetensors.tools.identity import identify as compute_id

from .conftest import run_cli


def test_canonical_form_by_hand() -> None:
    text = canonical_form({"b": "2", "a": 'q"x\n\\'}, [("w", "F32", (2, 3), 24), ("b", "BF16", (), 2)])
    expected = (
        '{"format":"safetensors","metadata":{"a":"\\"q\\\\\\"x\\\\n\\\\\\\\\\"","b":"\\"2\\""},'
        '"tensors":{"b":{"name":"b","dtype":"bf16","shape":[],"byte_length":2},'
        '"w":{"name":"w","dtype":"f32","shape":[2,3],"byte_length":24}}}'
    )
    assert text == expected
    # The metadata value is the JSON text of the quoted value, stored as a string.
    assert json.loads(json.loads(text)["metadata"]["a"]) == 'q"x\n\\'


def test_non_ascii_raw_and_control_escaped() -> None:
    text = canonical_form({"k": "é\x01"}, [("ñ", "U8", [1], 1)])
    assert '"ñ":{"name":"ñ"' in text
    assert '\\\\u0001' in text and "é" in text


def test_empty_metadata_and_hash() -> None:
    text = canonical_form(None, [])
    assert text == '{"format":"safetensors","metadata":{},"tensors":{}}'
    assert structural_id(None, []) == hashlib.sha256(text.encode()).hexdigest()


def test_id_ignores_order_and_offsets_but_not_metadata(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    a, b, c = tmp_path / "a.safetensors", tmp_path / "b.safetensors", tmp_path / "c.safetensors"
    save_file({"x": np.zeros(3, np.float32), "y": np.ones(2, np.int8)}, str(a), metadata={"k": "v"})
    save_file({"y": np.full(2, 9, np.int8), "x": np.ones(3, np.float32)}, str(b), metadata={"k": "v"})
    save_file({"x": np.zeros(3, np.float32), "y": np.ones(2, np.int8)}, str(c), metadata={"k": "w"})
    ia, ib, ic = compute_id(str(a)), compute_id(str(b)), compute_id(str(c))
    assert ia.structure_sha256 == ib.structure_sha256  # structure only: values differ, ID equal
    assert ia.structure_sha256 != ic.structure_sha256  # metadata is part of the hash
    assert ia.id == "wi:safetensors:0:" + ia.structure_sha256[:8]


def test_content_hash_is_data_region(sample: Path) -> None:
    raw = sample.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    r = compute_id(str(sample), content=True, per_tensor=True)
    assert r.content_sha256 == "0x" + hashlib.sha256(raw[8 + n :]).hexdigest()
    assert r.tensors is not None and [t.name for t in r.tensors] == sorted(t.name for t in r.tensors)
    header = json.loads(raw[8 : 8 + n])
    lo, hi = header["scale"]["data_offsets"]
    scale = next(t for t in r.tensors if t.name == "scale")
    assert scale.content_sha256 == "0x" + hashlib.sha256(raw[8 + n + lo : 8 + n + hi]).hexdigest()


def test_real_model_golden(real_model: Path) -> None:
    r = run_cli("id", real_model, "--json", "--content")
    assert r.code == 0
    data = json.loads(r.out)
    assert data["id"] == "wi:safetensors:0:ac4c43fd"
    assert data["structure_sha256"] == "ac4c43fde26a465b1452d2a3531c430dd45045eca0ff6037b0b8a11156046e29"
    assert "sha256" not in data  # every hash is named for what it hashes
    assert data["content_sha256"] == "0xee2df496c128fb5d408b35ca552ab731635c4ef6fc3eafe079cf1e95121d537e"
    text = run_cli("id", real_model).out
    assert text.splitlines()[0] == "wi:safetensors:0:ac4c43fd"


def test_canonical_flag_prints_the_hashed_text(sample: Path) -> None:
    data = json.loads(run_cli("id", sample, "--canonical", "--json").out)
    assert hashlib.sha256(data["canonical"].encode()).hexdigest() == data["structure_sha256"]


def test_each_hash_is_named_for_what_it_hashes(real_model: Path, tmp_path: Path) -> None:
    """Negating one matrix keeps the structure hash and changes the content hash: the text says
    which is which, and says when the content was not hashed."""
    from pysafetensors.numpy import load_file, save_file

    tensors = {k: np.array(v) for k, v in load_file(str(real_model)).items()}
    tensors["encoder.layer.0.attention.self.query.weight"] *= -1
    negated = tmp_path / "negated.safetensors"
    save_file(tensors, str(negated), metadata={"format": "pt"})
    plain = run_cli("id", negated).out.splitlines()
    assert plain == ["wi:safetensors:0:ac4c43fd",
                     "structure sha256: ac4c43fde26a465b1452d2a3531c430dd45045eca0ff6037b0b8a11156046e29",
                     "content sha256:   not computed (--content hashes the tensor data)"]
    assert not any(line.startswith("sha256:") for line in plain)  # no unlabelled hash to mistake for the file's
    ours = run_cli("id", negated, "--content", "--tensors").out.splitlines()
    theirs = run_cli("id", real_model, "--content", "--tensors").out.splitlines()
    assert ours[1] == theirs[1]  # the same structure
    assert ours[2].startswith("content sha256:   0x") and ours[2] != theirs[2]  # different weights
    assert ours[3] == "tensor content sha256:"
    changed = [a for a, b in zip(ours[4:], theirs[4:]) if a != b]
    assert len(changed) == 1 and changed[0].split()[0] == "encoder.layer.0.attention.self.query.weight"
    data = json.loads(run_cli("id", negated, "--json", "--tensors").out)
    assert data["content_sha256"] is None and {"name", "content_sha256"} == set(data["tensors"][0])
