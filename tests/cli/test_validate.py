"""validate: reports every problem; agrees with the strict parser and upstream safetensors on a corpus."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from pysafetensors.cli.validate import compute_validate
from pysafetensors.errors import SafetensorError
from pysafetensors.format.header import parse_header

from .conftest import run_cli


def _file(path: Path, header: Any, data: bytes, raw_header: bytes | None = None, declared: int | None = None) -> Path:
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(h) if declared is None else declared) + h + data)
    return path


def _t(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


# name -> (header object or raw bytes, data, expected problem codes)
CORPUS: dict[str, tuple[Any, bytes, set[str]]] = {
    "ok": ({"a": _t("F32", [2], 0, 8), "b": _t("U8", [3], 8, 11)}, b"\0" * 11, set()),
    "ok_empty": ({}, b"", set()),
    "ok_scalar_meta": ({"__metadata__": {"k": "v"}, "s": _t("F64", [], 0, 8)}, b"\0" * 8, set()),
    "ok_null_meta": ({"__metadata__": None, "a": _t("F4", [4], 0, 2)}, b"\0" * 2, set()),
    "ok_padded": (b'{"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]}}   ', b"\0", set()),
    "hole": ({"a": _t("F32", [1], 0, 4), "b": _t("F32", [1], 8, 12)}, b"\0" * 12, {"hole"}),
    "overlap": ({"a": _t("F32", [2], 0, 8), "b": _t("F32", [1], 4, 8)}, b"\0" * 8, {"overlap"}),
    "size": ({"a": _t("F32", [3], 0, 8)}, b"\0" * 8, {"size_mismatch"}),
    "unknown_dtype": ({"a": _t("f32", [1], 0, 4)}, b"\0" * 4, {"unknown_dtype"}),
    "bad_shape": ({"a": _t("F32", [-1], 0, 4)}, b"\0" * 4, {"invalid_shape"}),
    "bad_offsets": ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}, b"\0" * 4,
                    {"invalid_offsets", "size_mismatch_file"}),
    "missing_field": ({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, b"\0" * 4, {"missing_field"}),
    "meta_not_str": ({"__metadata__": {"k": 1}}, b"", {"invalid_metadata"}),
    "trailing": ({"a": _t("U8", [1], 0, 1)}, b"\0" * 3, {"size_mismatch_file"}),
    "short": ({"a": _t("U8", [4], 0, 4)}, b"\0" * 2, {"size_mismatch_file"}),
    "subbyte": ({"a": _t("F4", [3], 0, 2)}, b"\0" * 2, {"misaligned_subbyte"}),
    "reversed": ({"a": _t("U8", [0], 4, 0)}, b"", {"invalid_offset"}),
    "reversed_then_ok": ({"a": _t("U8", [0], 4, 0), "b": _t("U8", [2], 0, 2)}, b"\0\0", {"invalid_offset"}),
    "overflow": ({"a": _t("F64", [2**40, 2**40], 0, 8)}, b"\0" * 8, {"overflow"}),
    "not_object": (b"[1, 2]", b"", {"invalid_json"}),
    "bad_json": (b"{nope", b"", {"invalid_json"}),
    "bad_utf8": (b'{"\xff":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0", {"invalid_utf8"}),
    "dup_meta": (b'{"__metadata__":{},"__metadata__":{}}', b"", {"duplicate_metadata"}),
    "many": ({"__metadata__": {"k": 2}, "a": _t("X", [1], 0, 4), "b": _t("F32", [2], 8, 12), "c": _t("F16", [3], 12, 16)},
             b"\0" * 20, {"invalid_metadata", "unknown_dtype", "hole", "size_mismatch", "size_mismatch_file"}),
    # The dtype as a one-key map {"CODE": null}: serde's unit-variant form, accepted by the reader and upstream.
    "ok_dtype_map": ({"a": {"dtype": {"F32": None}, "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, set()),
    "ok_dtype_map_list_form": ({"a": [{"I8": None}, [3], [0, 3]]}, b"\0" * 3, set()),
    "dtype_map_not_unit": ({"a": {"dtype": {"F32": 1}, "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8,
                           {"unknown_dtype"}),
    "dtype_map_two_keys": ({"a": {"dtype": {"F32": None, "F16": None}, "shape": [2], "data_offsets": [0, 8]}},
                           b"\0" * 8, {"unknown_dtype"}),
    "dtype_map_unknown": ({"a": {"dtype": {"f32": None}, "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8,
                          {"unknown_dtype"}),
    # A dimension past u64 in a zero-element tensor (the hardening issue's example).
    "dim_past_u64": ({"t": _t("I16", [4, 0, 2**64], 0, 0)}, b"", {"invalid_shape"}),
}


def _make(tmp_path: Path, name: str) -> Path:
    header, data, _ = CORPUS[name]
    raw = header if isinstance(header, bytes) else None
    return _file(tmp_path / f"{name}.safetensors", header, data, raw_header=raw)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_problems_and_agreement(tmp_path: Path, name: str) -> None:
    path = _make(tmp_path, name)
    expected = CORPUS[name][2]
    r = compute_validate(str(path))
    assert {p.code for p in r.problems} == expected
    assert r.valid == (not expected)
    # Same verdict as the strict parser the reader uses.
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    try:
        parse_header(raw[8 : 8 + n], len(raw))
        strict_ok = True
    except SafetensorError:
        strict_ok = False
    assert strict_ok == r.valid
    code = run_cli("validate", path).code
    assert code == (0 if r.valid else 1)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_agrees_with_upstream(tmp_path: Path, name: str) -> None:
    safetensors = pytest.importorskip("safetensors")
    path = _make(tmp_path, name)
    try:
        with safetensors.safe_open(str(path), framework="numpy") as f:
            f.keys()
        upstream_ok = True
    except Exception:  # noqa: BLE001 - any rejection counts
        upstream_ok = False
    assert compute_validate(str(path)).valid == upstream_ok


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_first_problem_is_the_readers_error(tmp_path: Path, name: str) -> None:
    """One rule set: validate lists, in order, what parse_header raises first."""
    path = _make(tmp_path, name)
    r = compute_validate(str(path))
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    try:
        parse_header(raw[8 : 8 + n], len(raw))
    except SafetensorError as e:
        assert str(e).endswith(r.problems[0].message) and r.problems[0].code == e.code  # type: ignore[attr-defined]
    else:
        assert not r.problems


def test_reports_every_problem_with_context(tmp_path: Path) -> None:
    r = run_cli("validate", _make(tmp_path, "many"), "--json")
    assert r.code == 1
    data = json.loads(r.out)
    assert data["valid"] is False and len(data["problems"]) == 6  # size_mismatch twice: b and c
    hole = next(p for p in data["problems"] if p["code"] == "hole")
    assert hole["tensor"] == "b" and hole["data_offsets"] == [8, 12]
    unknown = next(p for p in data["problems"] if p["code"] == "unknown_dtype")
    assert unknown["tensor"] == "a" and unknown["data_offsets"] == [0, 4]
    text = run_cli("validate", _make(tmp_path, "many")).out
    assert text.count("problem [") == 6 and "INVALID (6 problems)" in text


def test_header_length_problems(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny.safetensors"
    tiny.write_bytes(b"\1\2")
    assert {p.code for p in compute_validate(str(tiny)).problems} == {"header_too_small"}
    long = _file(tmp_path / "long.safetensors", {}, b"", raw_header=b"{}", declared=1000)
    assert {p.code for p in compute_validate(str(long)).problems} == {"invalid_header_length"}
    huge = _file(tmp_path / "huge.safetensors", {}, b"", raw_header=b"{}", declared=200_000_000)
    assert {p.code for p in compute_validate(str(huge)).problems} == {"header_too_large"}
    assert run_cli("validate", huge).code == 1


def test_duplicate_tensor_name_is_a_warning_when_otherwise_valid(tmp_path: Path) -> None:
    raw = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    path = _file(tmp_path / "dup.safetensors", None, b"\0", raw_header=raw)
    r = compute_validate(str(path))
    assert r.valid and [w.code for w in r.warnings] == ["duplicate_tensor"]


def test_unreadable_exit_2(tmp_path: Path) -> None:
    r = run_cli("validate", tmp_path / "missing.safetensors")
    assert r.code == 2 and r.out == "" and len(r.err.strip().splitlines()) == 1


def test_a_pipe_is_validated_like_the_file(sample: Path, tmp_path: Path) -> None:
    """validate reads /dev/stdin (a pipe) as every other command does: the same verdict as the file."""
    import os
    import subprocess
    import sys

    data = sample.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}

    def piped(stdin: bytes) -> tuple[int, dict[str, Any]]:
        p = subprocess.run([sys.executable, "-m", "pysafetensors", "validate", "/dev/stdin", "--json"], input=stdin,
                           capture_output=True, env=env, timeout=120, check=False)
        assert p.returncode in (0, 1), p.stderr
        return p.returncode, json.loads(p.stdout)

    code, result = piped(data)
    local = json.loads(run_cli("validate", sample, "--json").out)
    assert code == 0 and {**result, "path": None} == {**local, "path": None} and result["file_size"] == len(data)
    for stdin, problem in ((data + b"xyz", "size_mismatch_file"), (data[:-3], "size_mismatch_file"),
                           (data[:5], "header_too_small")):
        code, result = piped(stdin)
        file = tmp_path / f"{len(stdin)}.safetensors"
        file.write_bytes(stdin)
        assert code == 1 and [p["code"] for p in result["problems"]] == [problem], result
        assert [p.code for p in compute_validate(str(file)).problems] == [problem]  # as the file says


def test_real_model_valid(real_model: Path) -> None:
    r = run_cli("validate", real_model)
    assert r.code == 0 and "valid (104 tensors" in r.out


def test_sharded(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    assert run_cli("shard", sample, out, "--max-shard-size", "64B").code == 0
    assert run_cli("validate", out).code == 0
    index = json.loads((out / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    values = list(index["weight_map"].values())
    crowded = next(s for s in shards if values.count(s) > 1)  # stays listed after one tensor moves away
    name = next(n for n, s in index["weight_map"].items() if s == crowded)
    good = dict(index["weight_map"])
    index["weight_map"][name] = next(s for s in shards if s != crowded)  # claims the tensor lives in another (existing) shard
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    r = compute_validate(str(out))
    assert not r.valid
    assert {(p.code, p.tensor) for p in r.problems} == {("unmapped_tensor", name), ("missing_tensor", name)}
    index["weight_map"] = {**good, "extra": "model-99999-of-99999.safetensors"}
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    assert {p.code for p in compute_validate(str(out)).problems} == {"missing_shard"}
    index["weight_map"][name] = "../escape.safetensors"
    (out / "model.safetensors.index.json").write_text(json.dumps(index))
    assert run_cli("validate", out).code == 2  # an unsafe index cannot be checked


def test_random_mutations_agree_with_strict_parser(tmp_path: Path) -> None:
    """Flip header bytes at random: validate's verdict must match parse_header's every time."""
    import random

    rng = random.Random(6)
    base = json.dumps({"__metadata__": {"k": "v"}, "a": _t("F32", [2, 1], 0, 8), "b": _t("BF16", [3], 8, 14),
                       "c": _t("F4", [2], 14, 15)}).encode()
    alphabet = b'0123456789[]{}",:-. aFUIBx_'
    disagreements = []
    for i in range(300):
        h = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            h[rng.randrange(len(h))] = rng.choice(alphabet)
        data = b"\0" * rng.choice([14, 15, 16])
        path = _file(tmp_path / f"m{i}.safetensors", None, data, raw_header=bytes(h))
        try:
            parse_header(bytes(h), 8 + len(h) + len(data))
            strict_ok = True
        except SafetensorError:
            strict_ok = False
        r = compute_validate(str(path))
        if r.valid != strict_ok or any(p.code == "rejected" for p in r.problems):  # lenient pass found it itself
            disagreements.append((bytes(h), len(data), [p.code for p in r.problems]))
        path.unlink()
    assert disagreements == []
