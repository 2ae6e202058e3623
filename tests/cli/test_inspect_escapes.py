"""``inspect`` escapes every name it prints, where only the printed parts are escaped: the
tensor table a column at a time, the tree a line at a time (drawn from the unescaped groups,
so a block whose names hold control characters is still found and folded)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from pysafetensors.cli._common import escape_text, escape_texts
from pysafetensors.numpy import save_file

from .conftest import run_cli

UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
EVIL = "w\x1b]0;pwned\x07\u202e\n"


def test_escape_texts_is_escape_text_of_each() -> None:
    texts = ["plain", "", EVIL, "a b", "\x85", "é"]
    assert escape_texts(texts) == [escape_text(t) for t in texts]
    assert escape_texts(["x", "y"]) == ["x", "y"]
    assert escape_texts(iter(["a\tb"])) == ["a\\tb"]


def test_tree_and_table_escape_names_and_keep_blocks(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    tensors = {f"layers.{i}.{EVIL}": np.zeros(2, np.float32) for i in range(3)}
    tensors[f"head{EVIL}.x"] = np.zeros(3, np.float32)
    save_file(tensors, str(path))
    tree = run_cli("inspect", path, "--tree")
    table = run_cli("inspect", path, "--tensors")
    for r in (tree, table):
        assert r.code == 0 and not UNSAFE.search(r.out), r.out
    assert "layers.[0–2] × 3/" in tree.out  # folded although the member names hold controls
    assert f"\n    {escape_text(EVIL)}  F32 [2]  2 params\n" in tree.out
    assert f"  {escape_text('head' + EVIL)}/" in tree.out
    assert escape_text(f"layers.1.{EVIL}") in table.out
    # --json is exact: the names as written
    names = {t["name"] for t in json.loads(run_cli("inspect", path, "--json").out)["tensors"]}
    assert names == set(tensors)
