"""What "compared" means with a GGUF side, said honestly: two GGUF files compare their stored
(quantized) blocks, so "identical" means the same bytes; with --values their dequantized values,
whose equality is "values equal" (different blocks can decode to the same numbers); a GGUF against
its safetensors source compares values (the two formats' bytes cannot match), never "identical"."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from gguf_helpers import cli_json, llama_gguf, llama_source, mixed_tensors, run_cli, write_gguf

from pysafetensors.tools.checkpoint import open_checkpoint


def _flip_a_stored_byte(src: Path, dst: Path, name: str) -> Path:
    shutil.copyfile(src, dst)
    with open_checkpoint(str(dst), gguf=True) as g:
        t = g.info(name)
        where = g.header.data_offset + t.begin + 7  # inside the first block's quants (past its scale)
    data = bytearray(dst.read_bytes())
    data[where] ^= 0x01
    dst.write_bytes(bytes(data))
    return dst


def test_two_gguf_files_compare_their_stored_blocks(tmp_path: Path) -> None:
    a = write_gguf(tmp_path / "a.gguf", mixed_tensors())
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(a, copy)
    code, d = cli_json("diff", a, copy)
    assert code == 0 and (d["compared"], d["verdict"]) == ("bytes", "identical")
    assert set(d["tensor_verdicts"].values()) == {"identical"}

    b = _flip_a_stored_byte(a, tmp_path / "b.gguf", "q8_0")
    code, d = cli_json("diff", a, b)
    assert code == 1 and (d["compared"], d["verdict"]) == ("bytes", "different")
    assert d["tensor_verdicts"]["q8_0"] == "values differ"
    assert {v for k, v in d["tensor_verdicts"].items() if k != "q8_0"} == {"identical"}
    code, out, _ = run_cli("diff", a, b)
    assert "! q8_0  values differ" in out and out.endswith("result: different\n")


def test_dequantized_values_that_match_are_values_equal_not_identical(tmp_path: Path) -> None:
    a = write_gguf(tmp_path / "a.gguf", mixed_tensors())
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(a, copy)
    code, d = cli_json("diff", a, copy, "--values")
    assert code == 0 and (d["compared"], d["verdict"]) == ("values", "values equal")
    assert set(d["tensor_verdicts"].values()) == {"values equal"}
    code, out, _ = run_cli("diff", a, copy, "--values")
    assert out.endswith("result: values equal\n") and "result: identical" not in out


def test_a_gguf_against_its_source_compares_values(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    source = llama_source()
    st = tmp_path / "src.safetensors"
    save_file(source, str(st))
    g = llama_gguf(tmp_path / "f32.gguf", source)
    code, d = cli_json("diff", g, st)  # no --values: local files, values compared exactly
    assert code == 0 and (d["compared"], d["verdict"]) == ("values", "values equal"), d
    assert d["values"] is None and set(d["tensor_verdicts"].values()) == {"values equal"}
    code, out, _ = run_cli("diff", g, st)
    assert "compared: tensor values, exactly (a GGUF's as read: dequantized, q/k rows in Hugging Face order)" in out
    assert out.endswith("result: values equal\n")

    nudged = dict(source)
    q = "model.layers.0.self_attn.q_proj.weight"
    nudged[q] = source[q].copy()
    nudged[q][3, 3] = np.nextafter(nudged[q][3, 3], np.float32(np.inf))
    other = tmp_path / "nudged.safetensors"
    save_file(nudged, str(other))
    code, d = cli_json("diff", g, other)
    assert code == 1 and d["tensor_verdicts"][q] == "values differ" and d["verdict"] == "different"
