"""Every read command and ``convert`` on GGUF files made with gguf-py: local, over loopback HTTP
(only the header read for inspect/id), over fsspec and through a pipe (broken files: test_gguf_cli_broken.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy as upstream_numpy  # the oracle reads what we wrote
from gguf_helpers import (
    EVERY_VALUE,
    Q,
    V,
    cli_json,
    llama_gguf,
    llama_source,
    mixed_tensors,
    quants,
    reference_dequantized,
    run_cli,
    write_gguf,
)
from servers import RangeServer
from test_gguf_identity_convert import _reference_id

TOKENS = [f"tok{i}" for i in range(40)]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gguf_cli")
    arrays = {"tokenizer.ggml.tokens": (TOKENS, V.STRING), "test.arr.nested": ([[1, 2], [3]], V.ARRAY)}
    mixed = write_gguf(root / "m.gguf", mixed_tensors(), kv=EVERY_VALUE, arrays=arrays)
    source = llama_source()
    from pysafetensors.numpy import save_file

    save_file(source, root / "llama.safetensors")
    return {
        "mixed": mixed,
        "llama_q8": llama_gguf(root / "llama-q8.gguf", source, quantize=Q.Q8_0),
        "llama_f32": llama_gguf(root / "llama-f32.gguf", source),
        "source": root / "llama.safetensors",
    }


# --- inspect ---------------------------------------------------------------------------------


def test_inspect_text(files: dict[str, Path]) -> None:
    code, out, err = run_cli("inspect", files["mixed"], "--tensors")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert "format:      GGUF version 3, alignment 32" in lines
    assert "tensors:     8" in lines
    header_size = int(next(ln for ln in lines if ln.startswith("header size:")).split()[2].replace(",", ""))
    assert header_size == __import__("gguf").GGUFReader(files["mixed"]).data_offset
    assert "metadata:    15 keys" in lines
    rows = {ln.split()[0]: ln.split(None, 2)[1:] for ln in lines if ln.startswith(("  test.", "  tok"))}
    assert rows["test.u64"] == ["uint64", "18446744073709551615"]
    assert rows["test.f32"] == ["float32", "0.1"]
    assert rows["test.bool"] == ["bool", "true"]
    assert rows["test.arr.nested"] == ["array[array[int32]]", "[[1, 2], [3]]"]
    assert rows["test.string"][1] == json.dumps(EVERY_VALUE["test.string"][0], ensure_ascii=False)
    assert rows["tokenizer.ggml.tokens"] == ["array[string]", '40 items: ["tok0", "tok1", "tok2", "tok3", "tok4", ...]']
    table = {ln.split()[0]: ln for ln in lines[lines.index("") + 1 :]}
    assert table["q4_k"].split()[1:4] == ["Q4_K", "[8,", "256]"]
    assert "[256, 8]" in table["q4_k"] and table["ids"].split()[-1] == "48"


def test_inspect_json_has_everything(files: dict[str, Path]) -> None:
    code, data = cli_json("inspect", files["mixed"])
    assert code == 0
    assert (data["format"], data["gguf_version"], data["alignment"]) == ("gguf", 3, 32)
    meta = data["gguf_metadata"]
    assert meta["tokenizer.ggml.tokens"] == {"type": "array[string]", "value": TOKENS, "count": 40}
    assert meta["test.i64"] == {"type": "int64", "value": -(2**63), "count": None}
    assert meta["test.arr.nested"]["value"] == [[1, 2], [3]]
    row = next(r for r in data["tensors"] if r["name"] == "q8_0")
    assert row == {"name": "q8_0", "dtype": "Q8_0", "shape": [8, 256], "data_offsets": row["data_offsets"],
                   "nbytes": 8 * 272, "parameters": 2048, "file": None, "gguf_dims": [256, 8]}
    assert data["bytes_by_dtype"]["Q8_0"] == 8 * 272


def test_inspect_tree_and_filter(files: dict[str, Path]) -> None:
    code, out, _ = run_cli("inspect", files["llama_q8"], "--tree", "--filter", "blk.0.attn_*")
    assert code == 0
    assert "tensors:     5 of 12 (filter: blk.0.attn_*)" in out
    assert "  blk/  " in out and "      attn_q/  1,024 params, 1 tensor" in out
    assert "        weight  Q8_0 [32, 32]  1,024 params" in out


def test_inspect_escapes_what_a_hostile_file_holds(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "h.gguf", {"x\u202egpj.exe": (np.zeros(32, np.float32), None)},
                      kv={"evil\x1b]0;title\x07": ("\x1b[31mred\u202e\x85", V.STRING)})
    code, out, _ = run_cli("inspect", path, "--tensors")
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out and "\x85" not in out
    assert "evil\\x1b]0;title\\x07" in out and '"\\u001b[31mred\\u202e\\x85"' in out
    assert "x\\u202egpj.exe" in out


# --- id, stats, validate ---------------------------------------------------------------------


def test_id_is_weight_inspects(files: dict[str, Path]) -> None:
    for name in ("mixed", "llama_q8"):
        code, out, _ = run_cli("id", files[name])
        assert code == 0 and out.splitlines()[0] == _reference_id(files[name])
    code, data = cli_json("id", files["mixed"], "--content")
    raw = files["mixed"].read_bytes()
    offset = __import__("gguf").GGUFReader(files["mixed"]).data_offset
    assert data["content_sha256"] == "0x" + hashlib.sha256(raw[offset:]).hexdigest()


def test_stats(files: dict[str, Path]) -> None:
    code, data = cli_json("stats", files["mixed"], "--filter", "q*")
    assert code == 0
    ref = reference_dequantized(files["mixed"])
    assert [s["name"] for s in data["tensors"]] == ["q8_0", "q4_0", "q4_k"]
    for s in data["tensors"]:
        x = ref[s["name"]].astype(np.float64)
        assert (s["dtype"], s["min"], s["max"]) == (s["name"].upper(), x.min(), x.max())
        assert s["mean"] == pytest.approx(x.mean(), abs=1e-12)
    code, out, _ = run_cli("stats", files["mixed"])
    assert code == 0 and out.splitlines()[2].split()[:2] == ["f32", "F32"]


def test_validate(files: dict[str, Path], tmp_path: Path) -> None:
    code, out, _ = run_cli("validate", files["mixed"])
    offset = __import__("gguf").GGUFReader(files["mixed"]).data_offset
    size = files["mixed"].stat().st_size
    assert (code, out) == (0, f"{files['mixed']}: valid (8 tensors, header {offset:,} bytes, {size:,} bytes)\n")
    broken = tmp_path / "cut.gguf"
    data = files["mixed"].read_bytes()
    broken.write_bytes(data[: len(data) - 3000])
    code, result = cli_json("validate", broken)
    assert code == 1 and result["valid"] is False
    assert [(p["code"], p["tensor"]) for p in result["problems"]] == [
        ("out_of_bounds", "q8_0"), ("out_of_bounds", "q4_0"), ("out_of_bounds", "q4_k"), ("out_of_bounds", "ids"),
        ("out_of_bounds", "scalar1d")]


# --- diff ------------------------------------------------------------------------------------


def test_diff_gguf_and_source(files: dict[str, Path]) -> None:
    code, out, _ = run_cli("diff", files["llama_f32"], files["source"], "--values")
    assert code == 0, out
    assert "formats: gguf vs safetensors" in out
    assert ("names: 12 GGUF names shown as Hugging Face names (gguf-py's map for llama); q/k rows put back in "
            "Hugging Face order in 2 tensors") in out
    # Dequantized values compared and equal: not the stored bytes, nor the metadata.
    assert "metadata: not compared" in out and out.endswith("result: values equal\n")
    code, out, _ = run_cli("diff", files["source"], files["llama_q8"], "--values")
    assert code == 1
    assert "~ model.layers.0.self_attn.q_proj.weight  F32 [32, 32] -> Q8_0 [32, 32]" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("~ model.layers.0.self_attn.q_proj.weight  differing"))
    cosine = float(line.split("cosine ")[1])
    assert 0.9999 < cosine <= 1.0
    code, data = cli_json("diff", files["llama_q8"], files["source"], "--values")
    assert code == 1 and data["formats"] == ["gguf", "safetensors"] and data["unmapped"] == []


def test_diff_two_ggufs_shortens_long_values(files: dict[str, Path], tmp_path: Path) -> None:
    other = write_gguf(tmp_path / "o.gguf", mixed_tensors(), kv=EVERY_VALUE,
                       arrays={"tokenizer.ggml.tokens": ([f"word{i}" for i in range(400)], V.STRING)})
    code, out, _ = run_cli("diff", files["mixed"], other)
    assert code == 1
    line = next(ln for ln in out.splitlines() if ln.startswith("~ tokenizer.ggml.tokens"))
    assert "... (" in line and len(line) < 500
    code, data = cli_json("diff", files["mixed"], other)
    assert json.loads(data["metadata_changed"]["tokenizer.ggml.tokens"]["b"]) == [f"word{i}" for i in range(400)]


# --- convert ---------------------------------------------------------------------------------


def test_convert_round_trip_against_gguf_py(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "m.safetensors"
    code, text, err = run_cli("convert", files["mixed"], out, "--metadata", "note=hi")
    assert code == 0, err
    assert text.startswith(f"{files['mixed']} (GGUF v3, llama) -> {out}: 8 tensors, ")
    loaded = upstream_numpy.load_file(out)
    for name, want in reference_dequantized(files["mixed"]).items():
        assert loaded[name].dtype == (np.int32 if name == "ids" else np.float32)
        np.testing.assert_array_equal(loaded[name], want.astype(loaded[name].dtype), err_msg=name)
    from safetensors import safe_open

    with safe_open(out, "np") as f:
        meta = f.metadata()
    assert meta["note"] == "hi" and meta["gguf.general.architecture"] == "llama"
    assert json.loads(meta["gguf.tokenizer.ggml.tokens"]) == TOKENS


def test_convert_dtypes_and_refusals(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "b.safetensors"
    assert run_cli("convert", files["mixed"], out, "--dtype", "bf16")[0] == 0
    ref = reference_dequantized(files["mixed"])
    import ml_dtypes

    loaded = upstream_numpy.load_file(out)
    np.testing.assert_array_equal(loaded["q4_k"], ref["q4_k"].astype(ml_dtypes.bfloat16))
    refused = tmp_path / "k.safetensors"
    code, _, err = run_cli("convert", files["mixed"], refused, "--dtype", "keep")
    assert code == 2 and "tensor 'q8_0' is quantized (q8_0); --dtype keep" in err and str(files["mixed"]) in err
    assert not refused.exists() and os.listdir(tmp_path) == ["b.safetensors"]  # no temp file left either
    code, _, err = run_cli("convert", files["mixed"], refused, "--key", "model")
    assert code == 2 and "--key selects a subtree of a pickle checkpoint" in err
    code, _, err = run_cli("convert", files["source"], refused, "--dtype", "f16")
    assert code == 2 and "--dtype and --hf-names apply to GGUF inputs" in err


def test_convert_hf_names(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "hf.safetensors"
    code, text, _ = run_cli("convert", files["llama_f32"], out, "--hf-names")
    assert code == 0
    assert "names: 12 renamed to Hugging Face names; q/k rows put back in Hugging Face order in 2 tensors" in text
    back, source = upstream_numpy.load_file(out), upstream_numpy.load_file(files["source"])
    assert sorted(back) == sorted(source)
    for name in source:
        np.testing.assert_array_equal(back[name], source[name], err_msg=name)
    odd = write_gguf(tmp_path / "odd.gguf", {"blk.0.attn_q.weight": (np.ones((4, 32), np.float32), None),
                                             "mystery.weight": (np.ones(32, np.float32), None)})
    code, text, _ = run_cli("convert", odd, tmp_path / "odd.safetensors", "--hf-names")
    assert code == 0 and "could not map 1 name(s), kept as they are: mystery.weight" in text
    code, data = cli_json("convert", odd, tmp_path / "odd2.safetensors", "--hf-names")
    assert data["unmapped"] == ["mystery.weight"] and data["renamed"] == 1


def test_convert_holds_a_chunk_not_a_tensor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1024 x 1024 Q8_0 tensor is 4 MiB once dequantized: converted 16 Ki elements at a
    time, the conversion's own allocations stay far below it."""
    from pysafetensors.gguf import GGUFFile
    from pysafetensors.gguf import convert as gguf_convert
    from pysafetensors.io.sources import MmapSource

    x = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    path = write_gguf(tmp_path / "big.gguf", {"w": (quants.quantize(x, Q.Q8_0), Q.Q8_0)})
    monkeypatch.setattr(gguf_convert, "CHUNK_ELEMENTS", 1 << 14)
    steps: list[int] = []
    with GGUFFile(MmapSource(path)) as f:
        tracemalloc.start()
        try:
            report = gguf_convert.convert_gguf(f, tmp_path / "big.safetensors", progress=steps.append)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < x.nbytes // 8, peak
    assert steps == [(1 << 14) * 4] * 64 and report.bytes_written == x.nbytes  # the bar's steps: every chunk
    np.testing.assert_array_equal(upstream_numpy.load_file(tmp_path / "big.safetensors")["w"],
                                  quants.dequantize(quants.quantize(x, Q.Q8_0), Q.Q8_0))


# --- remote and streamed inputs --------------------------------------------------------------


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GGUF with a 20,000-word vocabulary (a header of several requests) and 4 MB of tensor data."""
    rng = np.random.default_rng(3)
    tensors = {f"blk.{i}.w": (quants.quantize(rng.standard_normal((256, 2048)).astype(np.float32), Q.Q8_0), Q.Q8_0)
               for i in range(8)}
    tensors["norm"] = (rng.standard_normal(64).astype(np.float32), None)
    words = [f"word{i}" for i in range(20000)]
    return write_gguf(tmp_path_factory.mktemp("gguf_remote") / "big.gguf", tensors,
                      arrays={"tokenizer.ggml.tokens": (words, V.STRING)})


@pytest.fixture(scope="module")
def server(big: Path, files: dict[str, Path]) -> Iterator[RangeServer]:
    with RangeServer({"big.gguf": big.read_bytes(), "src.safetensors": files["source"].read_bytes(),
                      "q8.gguf": files["llama_q8"].read_bytes()}) as s:
        yield s


def _same(a: Any, b: Any) -> bool:
    drop = ("path", "a", "b")
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


@pytest.mark.parametrize("command", [("inspect",), ("inspect", "--tree"), ("id",), ("validate",)])
def test_remote_inspect_and_id_read_only_the_header(command: tuple[str, ...], big: Path, server: RangeServer) -> None:
    local = cli_json(*command, big)
    server.reset_log()
    remote = cli_json(*command, server.url("big.gguf"))
    assert remote[0] == 0 and _same(remote[1], local[1])
    offset = __import__("gguf").GGUFReader(big).data_offset
    size = big.stat().st_size
    # The header is read in doubling windows from the 100,001 bytes the first request brings:
    # at most one window (<= the header read so far) past its end, never the tensor data.
    assert offset > 200_000 and size > 5 * (2 * offset + 100_001)
    assert server.log.bytes_sent <= 2 * offset + 100_001, (server.log.bytes_sent, offset)
    assert server.log.requests <= 5


def test_remote_stats_and_diff(big: Path, server: RangeServer, files: dict[str, Path]) -> None:
    assert cli_json("stats", server.url("big.gguf")) [1]["tensors"] == cli_json("stats", big)[1]["tensors"]
    code, remote = cli_json("diff", server.url("q8.gguf"), server.url("src.safetensors"), "--values")
    code_local, local = cli_json("diff", files["llama_q8"], files["source"], "--values")
    assert code == code_local == 1 and _same(remote, local)


def test_fsspec_and_pipe(files: dict[str, Path]) -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-gguf/m.gguf", files["mixed"].read_bytes())
    try:
        local = cli_json("inspect", files["mixed"])[1]
        assert _same(cli_json("inspect", "memory://pst-gguf/m.gguf")[1], local)
        assert cli_json("id", "memory://pst-gguf/m.gguf")[1]["id"] == _reference_id(files["mixed"])
    finally:
        fs.rm("/pst-gguf", recursive=True)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    with open(files["mixed"], "rb") as stdin:
        proc = subprocess.run([sys.executable, "-m", "pysafetensors", "id", "/dev/stdin"], stdin=stdin,
                              capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == _reference_id(files["mixed"]), proc.stderr


def test_convert_from_a_url(server: RangeServer, big: Path, tmp_path: Path) -> None:
    code, _, err = run_cli("convert", server.url("big.gguf"), tmp_path / "big.safetensors", "--dtype", "f16")
    assert code == 0, err
    loaded = upstream_numpy.load_file(tmp_path / "big.safetensors")
    for name, want in reference_dequantized(big).items():
        np.testing.assert_array_equal(loaded[name], want.astype(np.float16), err_msg=name)


def test_commands_that_write_safetensors_refuse_gguf(files: dict[str, Path], tmp_path: Path) -> None:
    for args in (("shard", files["mixed"], tmp_path / "s"), ("merge", files["mixed"], tmp_path / "m.safetensors"),
                 ("metadata", files["mixed"], "get"), ("metadata", files["mixed"], "set", "a=b")):
        code, _, err = run_cli(*args)
        assert code == 2 and "is a GGUF file; this command works on safetensors checkpoints" in err, args
    assert os.listdir(tmp_path) == []
