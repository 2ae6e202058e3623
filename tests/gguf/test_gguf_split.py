"""Split GGUF sets (``name-00001-of-00003.gguf``) read as one checkpoint by every command.

The sets are written by gguf-py's own ``GGUFWriter(split_max_tensors=...)``, the writer llama.cpp's
``convert_hf_to_gguf.py --split-max-tensors`` uses (``split.no``/``split.count``/``split.tensors.count``
in each file, the model's metadata in the first); the same tensors written as one file are the
reference each command's answer is checked against.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from gguf_helpers import V, cli_json, gguf, run_cli

from pysafetensors.gguf.identity import gguf_identity
from pysafetensors.gguf.split import part_names
from pysafetensors.numpy import load_file
from pysafetensors.tools.checkpoint import GGUFCheckpoint, open_checkpoint
from pysafetensors.tools.diff import diff_files

Q = gguf.GGMLQuantizationType


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {"token_embd.weight": rng.standard_normal((16, 64)).astype(np.float32)}
    for b in range(3):
        out[f"blk.{b}.attn_norm.weight"] = rng.standard_normal(64).astype(np.float32)
        out[f"blk.{b}.ffn_up.weight"] = rng.standard_normal((32, 64)).astype(np.float32)
    return out


def _write(path: Path, split_max_tensors: int, extra_kv: dict | None = None) -> list[Path]:
    w = gguf.GGUFWriter(os.fspath(path), "llama", split_max_tensors=split_max_tensors)
    w.add_block_count(3)
    w.add_head_count(4)
    w.add_name("split test")
    for key, (value, vtype) in (extra_kv or {}).items():
        w.add_key_value(key, value, vtype)
    for name, array in _tensors().items():
        if name.endswith("ffn_up.weight"):
            w.add_tensor(name, gguf.quants.quantize(array, Q.Q8_0), raw_dtype=Q.Q8_0)
        else:
            w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    files = sorted(path.parent.glob(path.stem + "-*-of-*.gguf"))
    return files or [path]


@pytest.fixture
def split_set(tmp_path: Path) -> list[Path]:
    (tmp_path / "set").mkdir()
    files = _write(tmp_path / "set" / "model.gguf", split_max_tensors=3)
    assert [f.name for f in files] == [f"model-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    return files


@pytest.fixture
def single(tmp_path: Path) -> Path:
    (tmp_path / "one").mkdir()
    return _write(tmp_path / "one" / "model.gguf", split_max_tensors=0)[0]


def test_part_names_follow_llama_cpp() -> None:
    assert part_names("/m/x-00002-of-00003.gguf", 3) == [f"x-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    with pytest.raises(Exception, match="split set of 3 files .* cannot be found"):
        part_names("/m/renamed.gguf", 3)


@pytest.mark.parametrize("given", [0, 2])
def test_any_file_of_a_set_opens_the_whole_set(split_set: list[Path], single: Path, given: int) -> None:
    with open_checkpoint(split_set[given], gguf=True) as ckpt, open_checkpoint(single, gguf=True) as one:
        assert isinstance(ckpt, GGUFCheckpoint) and isinstance(one, GGUFCheckpoint)
        assert [t.name for t in ckpt.tensors] == [t.name for t in one.tensors]
        assert ckpt.file_names == [f.name for f in split_set]
        assert ckpt.file_of("blk.2.ffn_up.weight") == split_set[2].name
        for t in one.tensors:
            a, b = ckpt.data(t.name), one.data(t.name)
            assert bytes(a[0 : len(a)]) == bytes(b[0 : len(b)]), t.name


def test_the_set_has_the_id_of_the_file_gguf_split_merge_writes(split_set: list[Path], tmp_path: Path) -> None:
    """gguf-split --merge keeps the first file's metadata with split.count set to 0; the tensors are
    the set's.  Written so with gguf-py, that file's ID is the set's."""
    (tmp_path / "merged").mkdir()
    merged = _write(tmp_path / "merged" / "model.gguf", 0, {"split.no": (0, V.UINT16), "split.count": (0, V.UINT16),
                                                           "split.tensors.count": (7, V.INT32)})[0]
    code, got = cli_json("id", split_set[0])
    assert code == 0
    with open_checkpoint(merged, gguf=True) as m:
        assert isinstance(m, GGUFCheckpoint)
        assert got["id"] == gguf_identity(m.header).short
    code, whole = cli_json("id", split_set[1], "--tensors")
    code2, one = cli_json("id", merged, "--tensors")
    assert code == code2 == 0 and whole["tensors"] == one["tensors"]


def test_inspect_stats_diff_and_convert_read_the_set(split_set: list[Path], single: Path, tmp_path: Path) -> None:
    code, summary = cli_json("inspect", split_set[0], "--tensors")
    assert code == 0 and summary["tensor_count"] == 7 and summary["files"] == [f.name for f in split_set]
    code, out, _ = run_cli("inspect", split_set[2])
    assert code == 0 and f"split set:   3 files ({', '.join(f.name for f in split_set)})" in out.splitlines()
    code, stats = cli_json("stats", split_set[0], "--filter", "blk.2.*")
    assert code == 0 and sorted(s["name"] for s in stats["tensors"]) == ["blk.2.attn_norm.weight", "blk.2.ffn_up.weight"]
    r = diff_files(str(split_set[0]), str(single), values=True)
    assert (r.tensors_added, r.tensors_removed, r.tensors_changed, r.tensors_same_structure) == ([], [], [], 7)
    assert set(r.tensor_verdicts.values()) == {"values equal"}
    assert all(v.compared and v.differing == 0 for v in r.values or [])
    assert sorted(r.metadata_removed) == ["split.count", "split.no", "split.tensors.count"]  # the set's own keys
    out_set, out_one = tmp_path / "set.safetensors", tmp_path / "one.safetensors"
    assert run_cli("convert", split_set[1], out_set)[0] == 0
    assert run_cli("convert", single, out_one)[0] == 0
    a, b = load_file(out_set), load_file(out_one)
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_validate_checks_every_file_and_the_set(split_set: list[Path]) -> None:
    code, r = cli_json("validate", split_set[0])
    assert code == 0 and r["valid"] and r["files"] == [f.name for f in split_set] and r["tensor_count"] == 7
    shutil.move(split_set[1], split_set[1].with_suffix(".bak"))
    code, r = cli_json("validate", split_set[0])
    assert code == 1 and not r["valid"]
    assert [(p["code"], p["file"]) for p in r["problems"]] == [("missing_split", split_set[1].name)]
    code, _, err = run_cli("inspect", split_set[0])
    assert code == 2 and split_set[1].name in err and "file 2 of 3" in err


def test_a_file_from_another_set_is_named(split_set: list[Path], tmp_path: Path) -> None:
    """Part 2 replaced by part 2 of another set that has one tensor less: the count is wrong."""
    (tmp_path / "other").mkdir()
    other = _write(tmp_path / "other" / "model.gguf", split_max_tensors=2)
    assert len(other) == 4
    shutil.copy(other[1], split_set[1])
    code, r = cli_json("validate", split_set[0])
    assert code == 1 and any(p["code"] == "split_mismatch" and p["file"] == split_set[1].name for p in r["problems"])
    code, _, err = run_cli("stats", split_set[0])
    assert code == 2 and "split.count" in err, err


def test_a_renamed_part_is_refused_with_the_naming_rule(split_set: list[Path], tmp_path: Path) -> None:
    renamed = tmp_path / "renamed.gguf"
    shutil.copy(split_set[0], renamed)
    code, _, err = run_cli("inspect", renamed)
    assert code == 2 and "<prefix>-NNNNN-of-00003.gguf" in err
    code, r = cli_json("validate", renamed)
    assert code == 1 and r["problems"][0]["code"] == "split_name"


def test_the_viewer_shows_the_set(split_set: list[Path]) -> None:
    from pysafetensors.view.data import input_document

    with open_checkpoint(split_set[0], gguf=True) as ckpt:
        doc = input_document(ckpt)
    assert doc["format"] == "gguf" and len(doc["tensors"]["name"]) == 7
    assert json.dumps(doc)  # the page's JSON


def test_view_exports_the_whole_set(split_set: list[Path], single: Path, tmp_path: Path) -> None:
    """`view --export` given any part reports the set's seven tensors, as it does for the merged file."""
    pages = {}
    for name, given in (("set", split_set[1]), ("one", single)):
        out = tmp_path / f"{name}.html"
        code, _, err = run_cli("view", given, "--export", out)
        assert code == 0, err
        pages[name] = out.read_text(encoding="utf-8")
    names = [name for name in _tensors()]
    assert len(names) == 7
    for page in pages.values():
        assert all(json.dumps(n)[1:-1] in page for n in names)
    assert all(f.name in pages["set"] for f in split_set)


def test_a_set_over_http_and_fsspec(split_set: list[Path], single: Path) -> None:
    """The other files are found beside the one given at the same URL (HTTP Range requests; fsspec),
    and a pipe, which has no files beside it, is refused with the reason."""
    from servers import RangeServer

    local = cli_json("stats", single)[1]["tensors"]
    with RangeServer({f.name: f.read_bytes() for f in split_set}) as server:
        url = server.url(split_set[1].name)
        assert cli_json("stats", url)[1]["tensors"] == local
        code, r = cli_json("validate", url)
        assert code == 0 and r["files"] == [f.name for f in split_set]
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for f in split_set:
        fs.pipe(f"/pst-split/{f.name}", f.read_bytes())
    try:
        assert cli_json("stats", f"memory://pst-split/{split_set[0].name}")[1]["tensors"] == local
    finally:
        fs.rm("/pst-split", recursive=True)


def test_a_file_of_a_set_read_from_a_stream_is_refused(split_set: list[Path]) -> None:
    from pysafetensors.errors import GGUFError
    from pysafetensors.gguf.split import open_gguf
    from pysafetensors.io.sources import MemorySource

    with pytest.raises(GGUFError, match="split set of 3 files; the others cannot be opened from this input"):
        open_gguf(MemorySource(split_set[0].read_bytes(), name="/dev/stdin"))
