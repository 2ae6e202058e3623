"""tools.metadata called directly: parsing KEY=VALUE and JSON, reading, and editing (in place or
by rewrite), each result read back by upstream safetensors with the tensors unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.errors import InvalidMetadata, MetadataKeyNotFound, ProtectedTarget
from pysafetensors.numpy import save_file
from pysafetensors.tools.metadata import edit_metadata, load_json_metadata, parse_assignments, read_metadata

st = pytest.importorskip("safetensors")
upstream = pytest.importorskip("safetensors.numpy")

ARRAYS = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([7], np.int16)}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / "m.safetensors"
    save_file(ARRAYS, str(p), metadata={"format": "np", "author": "a"})
    return p


def _meta(path: Path | str) -> dict[str, str] | None:
    with st.safe_open(str(path), "np") as f:
        return f.metadata()


def _tensors_unchanged(path: Path | str) -> None:
    got = upstream.load_file(str(path))
    assert sorted(got) == sorted(ARRAYS)
    for name, value in ARRAYS.items():
        np.testing.assert_array_equal(got[name], value)


def test_parse_assignments() -> None:
    assert parse_assignments(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(InvalidMetadata, match="expected KEY=VALUE, got 'novalue'"):
        parse_assignments(["novalue"])
    with pytest.raises(InvalidMetadata, match="--set expected KEY=VALUE"):
        parse_assignments(["=v"], "--set")
    with pytest.raises(InvalidMetadata, match="key 'a' is given twice"):
        parse_assignments(["a=1", "a=2"])


def test_load_json_metadata(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"a": "1", "é": "ü"}', encoding="utf-8")
    assert load_json_metadata(str(good)) == {"a": "1", "é": "ü"}
    for text, words in [('{"a": "1", "a": "2"}', "appears twice"), ("[1]", "expected a JSON object"),
                        ('{"n": 3}', "values must be strings"), ("{", "not valid JSON")]:
        bad = tmp_path / "bad.json"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InvalidMetadata, match=words):
            load_json_metadata(str(bad))


def test_read_metadata_and_one_key(path: Path) -> None:
    result = read_metadata(str(path))
    assert result.metadata == {"format": "np", "author": "a"} and result.action == "get"
    assert read_metadata(str(path), "author").value == "a"
    with pytest.raises(MetadataKeyNotFound, match="no metadata key 'missing'"):
        read_metadata(str(path), "missing")


def test_set_in_place_keeps_the_file_size_and_the_tensors(path: Path) -> None:
    size = path.stat().st_size
    result = edit_metadata(str(path), "set", {"author": "b"})
    assert result.changed and result.mode == "in-place"
    assert result.before == {"format": "np", "author": "a"} and result.metadata == {"format": "np", "author": "b"}
    assert _meta(path) == {"format": "np", "author": "b"} and path.stat().st_size == size
    _tensors_unchanged(path)


def test_a_header_that_grows_is_rewritten(path: Path) -> None:
    mode = os.stat(path).st_mode
    result = edit_metadata(str(path), "set", {"long": "x" * 500})
    assert result.mode == "rewrite"
    assert _meta(path) == {"format": "np", "author": "a", "long": "x" * 500}
    assert os.stat(path).st_mode == mode
    _tensors_unchanged(path)


def test_unset_and_strip(path: Path) -> None:
    with pytest.raises(MetadataKeyNotFound, match="no metadata key 'nope' to unset"):
        edit_metadata(str(path), "unset", keys=["nope"])
    assert _meta(path) == {"format": "np", "author": "a"}  # nothing written
    edit_metadata(str(path), "unset", keys=["author"])
    assert _meta(path) == {"format": "np"}
    result = edit_metadata(str(path), "strip")
    assert result.metadata is None and _meta(path) is None
    _tensors_unchanged(path)


def test_dry_run_and_no_change_write_nothing(path: Path) -> None:
    before = path.read_bytes()
    dry = edit_metadata(str(path), "set", {"author": "z"}, dry_run=True)
    assert dry.dry_run and dry.changed and dry.mode == "in-place"
    same = edit_metadata(str(path), "set", {"author": "a"})
    assert not same.changed and same.mode is None
    assert path.read_bytes() == before


def test_output_leaves_the_input_alone(path: Path, tmp_path: Path) -> None:
    before = path.read_bytes()
    out = tmp_path / "out.safetensors"
    result = edit_metadata(str(path), "set", {"k": "v"}, output=str(out))
    assert result.output == str(out) and result.mode == "rewrite"
    assert path.read_bytes() == before
    assert _meta(out) == {"format": "np", "author": "a", "k": "v"}
    _tensors_unchanged(out)


def test_a_link_is_refused_unless_told_how(path: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.safetensors"
    link.symlink_to(path)
    with pytest.raises(ProtectedTarget, match="symbolic link"):
        edit_metadata(str(link), "set", {"k": "v"})
    edit_metadata(str(link), "set", {"k": "v"}, links="replace")
    assert not link.is_symlink() and _meta(link) == {"format": "np", "author": "a", "k": "v"}
    assert _meta(path) == {"format": "np", "author": "a"}  # the linked file is untouched
