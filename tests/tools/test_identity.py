"""tools.identity called directly: the structural ID covers structure and metadata only, the
content hash every byte after the header, each tensor hash that tensor's bytes (checked against
hashlib over the file and against upstream safetensors' reading of the same bytes)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.numpy import save_file
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.identity import PREFIX, canonical_form, identify, structural_id

upstream = pytest.importorskip("safetensors.numpy")

ARRAYS = {
    "b.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
    "a.bias": np.array([1, -2, 3], np.int64),
    "c.mask": np.array([True, False]),
}


def _save(path: Path, arrays: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Path:
    save_file(arrays, str(path), metadata=metadata)
    return path


def test_canonical_form_is_the_documented_json() -> None:
    text = canonical_form({"k": 'a "q"\n'}, [("w", "F32", (2, 3), 24), ("a", "BF16", (), 2)])
    assert json.loads(text) == {
        "format": "safetensors",
        "metadata": {"k": '"a \\"q\\"\\n"'},  # each value JSON-quoted, then stored as text
        "tensors": {"a": {"name": "a", "dtype": "bf16", "shape": [], "byte_length": 2},
                    "w": {"name": "w", "dtype": "f32", "shape": [2, 3], "byte_length": 24}},
    }
    assert ", " not in text and ": " not in text  # compact separators
    assert list(json.loads(text)["tensors"]) == ["a", "w"]  # names sorted
    assert structural_id({"k": 'a "q"\n'}, [("a", "BF16", (), 2), ("w", "F32", (2, 3), 24)]) == hashlib.sha256(
        text.encode()).hexdigest()


def test_no_metadata_and_empty_metadata_hash_alike() -> None:
    specs = [("x", "I8", (4,), 4)]
    assert '"metadata":{}' in canonical_form(None, specs)
    assert structural_id(None, specs) == structural_id({}, specs)


def test_the_id_ignores_values_and_order_but_not_structure_or_metadata(tmp_path: Path) -> None:
    base = identify(str(_save(tmp_path / "a.safetensors", ARRAYS, {"format": "np"})))
    other_values = {k: (v * 2 if v.dtype != bool else ~v) for k, v in ARRAYS.items()}
    assert identify(str(_save(tmp_path / "b.safetensors", other_values, {"format": "np"}))).id == base.id
    reordered = dict(reversed(list(ARRAYS.items())))
    assert identify(str(_save(tmp_path / "c.safetensors", reordered, {"format": "np"}))).id == base.id
    assert identify(str(_save(tmp_path / "d.safetensors", ARRAYS, {"format": "pt"}))).id != base.id
    reshaped = {**ARRAYS, "b.weight": ARRAYS["b.weight"].reshape(4, 3)}
    assert identify(str(_save(tmp_path / "e.safetensors", reshaped, {"format": "np"}))).id != base.id
    assert base.id == PREFIX + base.structure_sha256[:8] and len(base.structure_sha256) == 64
    assert base.content_sha256 is None and base.tensors is None and base.canonical is None


def test_content_hash_is_sha256_of_every_byte_after_the_header(tmp_path: Path) -> None:
    path = _save(tmp_path / "m.safetensors", ARRAYS)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    result = identify(str(path), content=True)
    assert result.content_sha256 == "0x" + hashlib.sha256(raw[8 + n:]).hexdigest()
    assert result.tensors is None


def test_per_tensor_hashes_are_each_tensors_bytes_sorted_by_name(tmp_path: Path) -> None:
    path = _save(tmp_path / "m.safetensors", ARRAYS)
    oracle = upstream.load_file(str(path))
    result = identify(str(path), per_tensor=True)
    assert [t.name for t in result.tensors or []] == sorted(ARRAYS)
    for t in result.tensors or []:
        assert t.content_sha256 == "0x" + hashlib.sha256(oracle[t.name].tobytes()).hexdigest(), t.name


def test_canonical_is_returned_when_asked_and_hashes_to_the_id(tmp_path: Path) -> None:
    path = _save(tmp_path / "m.safetensors", ARRAYS, {"k": "v"})
    with open_checkpoint(path) as ckpt:
        result = identify(ckpt, canonical=True)
    assert result.canonical is not None
    assert hashlib.sha256(result.canonical.encode()).hexdigest() == result.structure_sha256
    assert json.loads(result.canonical)["tensors"]["b.weight"]["byte_length"] == 48


def test_a_sharded_checkpoint_hashes_its_shards_data_in_order(tmp_path: Path) -> None:
    from pysafetensors.tools.shard import shard_checkpoint

    single = _save(tmp_path / "one.safetensors", {f"t{i}": np.full(64, i, np.float32) for i in range(4)})
    shard_checkpoint(str(single), str(tmp_path / "out"), max_shard_size=600)
    index = tmp_path / "out" / "model.safetensors.index.json"
    shards = sorted(json.loads(index.read_text())["weight_map"].values())
    data = b""
    for name in dict.fromkeys(shards):
        raw = (tmp_path / "out" / name).read_bytes()
        data += raw[8 + struct.unpack("<Q", raw[:8])[0]:]
    result = identify(str(index), content=True, per_tensor=True)
    assert result.content_sha256 == "0x" + hashlib.sha256(data).hexdigest()
    assert {t.name: t.content_sha256 for t in result.tensors or []} == {
        t.name: t.content_sha256 for t in identify(str(single), per_tensor=True).tensors or []}
