"""Every ``--json`` output escapes DEL and the C1 controls (U+007F-U+009F) as it escapes C0 ones:
U+009B is CSI to some terminals, so ``inspect --json`` of a hostile file must not write it raw.
The JSON stays valid and reads back exactly (security round 3, item 5)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.cli._common import escape_json_controls, render_json
from pysafetensors.numpy import save_file

from .conftest import run_cli

C1_NAME = "w\x9b31m\x85\x7f"
C1_KEY = "k\x9b2J"
C1_VALUE = "v\x9b2J\x80\x9f\x7f \x1b[0m é"
RAW_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # never raw in JSON text (newlines between values aside)


def _no_raw_controls(text: str) -> bool:
    return not RAW_CONTROL.search(text.replace("\n", ""))


def test_escape_json_controls_round_trips() -> None:
    text = json.dumps({C1_KEY: C1_VALUE}, ensure_ascii=False)
    escaped = escape_json_controls(text)
    assert "\\u009b" in escaped and "\\u007f" in escaped and "\\u0080" in escaped and "é" in escaped
    assert _no_raw_controls(escaped) and json.loads(escaped) == {C1_KEY: C1_VALUE}
    assert render_json({"a": C1_VALUE}) == '{\n  "a": "v\\u009b2J\\u0080\\u009f\\u007f \\u001b[0m é"\n}\n'


@pytest.fixture
def c1_files(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "d\x9b"  # in every path the outputs show
    folder.mkdir()
    a, b = folder / "a.safetensors", folder / "b.safetensors"
    save_file({C1_NAME: np.arange(4, dtype=np.float32)}, str(a), metadata={C1_KEY: C1_VALUE})
    save_file({C1_NAME: np.arange(4, dtype=np.float32) + 1}, str(b), metadata={C1_KEY: C1_VALUE + "\x9c"})
    return a, b


def test_every_json_output_escapes_c1_controls(c1_files: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = c1_files
    runs = {
        "inspect": ["inspect", a, "--tensors"], "stats": ["stats", a], "id": ["id", a, "--tensors"],
        "diff": ["diff", a, b, "--values"], "metadata": ["metadata", a, "get"], "validate": ["validate", a],
        "shard": ["shard", a, tmp_path / "sh\x9bd", "--dry-run"], "merge": ["merge", a, tmp_path / "m\x9b.safetensors"],
    }
    for name, args in runs.items():
        r = run_cli(*args, "--json")
        assert r.code in (0, 1), (name, r.err)
        assert "\\u009b" in r.out and _no_raw_controls(r.out), (name, r.out)
        json.loads(r.out)  # still valid JSON
    doc = json.loads(run_cli("inspect", a, "--json", "--tensors").out)
    assert doc["metadata"] == {C1_KEY: C1_VALUE} and [t["name"] for t in doc["tensors"]] == [C1_NAME]
    diff = json.loads(run_cli("diff", a, b, "--json").out)
    assert diff["metadata_changed"][C1_KEY] == {"a": C1_VALUE, "b": C1_VALUE + "\x9c"}


def test_gguf_and_convert_json_escape_c1_controls(tmp_path: Path) -> None:
    """A GGUF key and string value holding C1 controls: ``inspect --json`` and ``convert --json``."""
    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 2) + s(C1_KEY) + struct.pack("<I", 8) + s(C1_VALUE)
    head += s("x.list") + struct.pack("<IIQ", 9, 8, 2) + s("\x9b") + s("ok")
    head += s(C1_NAME) + struct.pack("<IQIQ", 1, 4, 0, 0)
    path = tmp_path / "c1.gguf"
    path.write_bytes(head + bytes(-len(head) % 32) + struct.pack("<4f", 1, 2, 3, 4))
    r = run_cli("inspect", path, "--json", "--tensors")
    assert r.code == 0, r.err
    assert _no_raw_controls(r.out) and "\\u009b" in r.out
    doc = json.loads(r.out)
    assert doc["gguf_metadata"][C1_KEY]["value"] == C1_VALUE and doc["gguf_metadata"]["x.list"]["value"] == ["\x9b", "ok"]
    out = tmp_path / "o\x9b.safetensors"
    r = run_cli("convert", path, out, "--json")
    assert r.code == 0, r.err
    assert _no_raw_controls(r.out) and "\\u009b" in r.out and json.loads(r.out)["destination"] == str(out)
