"""diff never calls different weights identical: every output (text, --json, --format md) prints the
one verdict tools.diff computes, and says what was compared (structure, bytes, values).

The pairs: MiniLM with one matrix negated and saved with the same metadata, MiniLM with one value
nudged to the next float, a NaN whose payload changed, and -0.0 against 0.0 (equal as numbers,
different in bytes).  The structure-only and URL cases are checked against a loopback Range server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _helpers import NEGATED as QUERY
from _helpers import verdict_pairs
from servers import RangeServer

from pysafetensors.tools import diff as diff_module
from pysafetensors.tools import pairing
from pysafetensors.tools.diff import diff_files

from .conftest import real_model_path, run_cli


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path, str]]:
    """name -> (a, b, the one tensor whose bytes differ)."""
    return verdict_pairs(tmp_path_factory.mktemp("pairs"), real_model_path())


CASES = ["negated", "nudged", "nan_payload", "signed_zero"]


@pytest.mark.parametrize("case", CASES)
def test_text_says_which_tensor_differs(pairs: dict[str, tuple[Path, Path, str]], case: str) -> None:
    a, b, name = pairs[case]
    r = run_cli("diff", a, b)
    assert r.code == 1, r.out
    lines = r.out.splitlines()
    assert "compared: tensor bytes" in lines
    assert f"! {name}  values differ" in lines
    assert lines[-1] == "result: different"
    assert "metadata: 0 added, 0 removed, 0 changed" in lines  # the same metadata: only the bytes tell
    assert any(line.startswith("tensors: 0 added, 0 removed, 0 changed, 1 values differ") for line in lines)


@pytest.mark.parametrize("case", CASES)
def test_json_and_markdown_carry_the_same_verdict(pairs: dict[str, tuple[Path, Path, str]], case: str) -> None:
    a, b, name = pairs[case]
    r = run_cli("diff", a, b, "--json")
    d = json.loads(r.out)
    assert r.code == 1
    assert (d["compared"], d["verdict"], d["same"]) == ("bytes", "different", False)
    assert d["tensor_verdicts"][name] == "values differ"
    assert {v for k, v in d["tensor_verdicts"].items() if k != name} == {"identical"}
    assert d["verdict_counts"] == {"values differ": 1, "identical": d["tensors_same_structure"] - 1}
    md = run_cli("diff", a, b, "--format", "md")
    assert md.code == 1 and f"| ! | `{name}` | values differ |" in md.out
    assert md.out.rstrip().endswith("result: different") and "result: identical" not in md.out


@pytest.mark.parametrize("case", CASES)
def test_values_mode_counts_the_differences(pairs: dict[str, tuple[Path, Path, str]], case: str) -> None:
    a, b, name = pairs[case]
    r = run_cli("diff", a, b, "--values", "--json")
    d = json.loads(r.out)
    assert r.code == 1 and d["compared"] == "values" and d["verdict"] == "different"
    v = next(v for v in d["values"] if v["name"] == name)
    assert v["verdict"] == "values differ" and v["differing"] >= 1
    expected = {"negated": 147_456, "nudged": 1, "nan_payload": 1, "signed_zero": 1}[case]
    assert v["differing"] == expected


@pytest.mark.parametrize("case", ["nan_payload", "signed_zero"])
def test_a_tolerance_says_equal_within_it_never_identical(pairs: dict[str, tuple[Path, Path, str]], case: str) -> None:
    # As numbers (NaN equal to NaN, -0.0 == 0.0) the values are equal; their bytes are not.
    a, b, name = pairs[case]
    r = run_cli("diff", a, b, "--atol", "0")
    assert r.code == 0, r.out
    assert r.out.splitlines()[-1] == "result: equal within tolerance"
    line = next(ln for ln in r.out.splitlines() if ln.startswith(f"~ {name}  "))
    assert line.startswith(f"~ {name}  differing 0/2  max_abs_diff 0  cosine ") and line.endswith("(within tolerance)")
    d = json.loads(run_cli("diff", a, b, "--atol", "0", "--json").out)
    assert d["verdict"] == "equal within tolerance" and d["tensor_verdicts"] == {"bias": "identical", name: "within tolerance"}


def test_identical_only_when_the_bytes_are(tmp_path: Path) -> None:
    a = real_model_path()
    copy = tmp_path / "copy.safetensors"
    copy.write_bytes(a.read_bytes())
    for args in ([], ["--values"]):
        r = run_cli("diff", a, copy, *args)
        assert r.code == 0 and r.out.splitlines()[-1] == "result: identical", args
    d = json.loads(run_cli("diff", a, copy, "--json").out)
    assert d["same"] is True and d["verdict_counts"] == {"identical": 104}


def test_structure_only_says_values_were_not_compared(pairs: dict[str, tuple[Path, Path, str]]) -> None:
    a, b, _ = pairs["negated"]
    r = run_cli("diff", a, b, "--structure-only")
    assert r.code == 3
    assert r.out.splitlines()[-1] == "result: same structure, values not compared"
    assert "tensors: 0 added, 0 removed, 0 changed, 104 values not compared" in r.out
    assert "identical" not in r.out and "unchanged" not in r.out
    d = json.loads(run_cli("diff", a, b, "--structure-only", "--json").out)
    assert (d["compared"], d["verdict"], d["same"]) == ("structure", "same structure, values not compared", None)
    assert set(d["tensor_verdicts"].values()) == {"values not compared"}
    md = run_cli("diff", a, b, "--structure-only", "--format", "md")
    assert md.code == 3 and "identical" not in md.out
    # A structural difference is still a difference, compared or not.
    assert run_cli("diff", a, pairs["nan_payload"][0], "--structure-only").code == 1
    bad = run_cli("diff", a, b, "--structure-only", "--values")
    assert bad.code == 2 and "--structure-only" in bad.err


@pytest.fixture(scope="module")
def origin(pairs: dict[str, tuple[Path, Path, str]]) -> Iterator[RangeServer]:
    a, b, _ = pairs["negated"]
    with RangeServer({"a.safetensors": a.read_bytes(), "b.safetensors": b.read_bytes()}) as server:
        yield server


def test_a_url_compares_structure_unless_values_are_asked_for(origin: RangeServer,
                                                              pairs: dict[str, tuple[Path, Path, str]]) -> None:
    a, b = origin.url("a.safetensors"), origin.url("b.safetensors")
    origin.reset_log()
    r = run_cli("diff", a, b)
    assert r.code == 3 and r.out.splitlines()[-1] == "result: same structure, values not compared"
    assert "values not compared (--values reads and compares them)" in r.out
    assert origin.log.ranges == ["bytes=0-100000"] * 2  # the headers only
    local = pairs["negated"][0]
    assert run_cli("diff", local, b).code == 3  # one URL side is enough: no byte read over the network
    r = run_cli("diff", a, b, "--values", "--json")
    d = json.loads(r.out)
    assert r.code == 1 and d["tensor_verdicts"][QUERY] == "values differ" and d["verdict"] == "different"


def test_bytes_stop_at_the_first_differing_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pysafetensors.numpy import save_file

    big = np.zeros(1 << 18, np.float32)  # 1 MiB
    other = big.copy()
    other[0] = 1.0
    save_file({"big": big, "tail": np.ones(4, np.float32)}, str(tmp_path / "a.safetensors"))
    save_file({"big": other, "tail": np.ones(4, np.float32)}, str(tmp_path / "b.safetensors"))
    compared: list[int] = []
    same = pairing._same

    def counting(xa: Any, xb: Any) -> bool:
        compared.append(len(xa))
        return same(xa, xb)

    monkeypatch.setattr(pairing, "_same", counting)
    monkeypatch.setattr(diff_module, "BYTE_CHUNK", 4096)
    r = diff_files(str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"))
    assert r.tensor_verdicts == {"big": "values differ", "tail": "identical"}
    assert sum(compared) <= 3 * 4096 + 16, compared  # the first chunk (and its tensor-by-tensor look), then the tail


@pytest.mark.parametrize("chunk", [3, 64, 4096])
def test_runs_of_small_tensors_give_each_tensor_its_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           chunk: int) -> None:
    from pysafetensors.numpy import save_file

    rng = np.random.default_rng(3)
    a = {f"t{i:03d}": rng.integers(0, 255, rng.integers(0, 40), dtype=np.uint8) for i in range(300)}
    b = {k: v.copy() for k, v in a.items()}
    touched = set()
    for k in list(b)[::17]:
        if b[k].size:
            b[k][-1] ^= 1
            touched.add(k)
    save_file(a, str(tmp_path / "a.safetensors"))
    save_file(b, str(tmp_path / "b.safetensors"))
    monkeypatch.setattr(diff_module, "BYTE_CHUNK", chunk)
    r = diff_files(str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors"))
    assert {k for k, v in r.tensor_verdicts.items() if v == "values differ"} == touched
    assert {v for k, v in r.tensor_verdicts.items() if k not in touched} == {"identical"}
