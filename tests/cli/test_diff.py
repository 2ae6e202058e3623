"""diff: structure, metadata, streamed values (exact and with tolerances), formats, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.cli.diff import render_diff
from pysafetensors.numpy import save_file
from pysafetensors.tools import _chunks
from pysafetensors.tools.diff import diff_files as compute_diff

from .conftest import run_cli


def _save(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> Path:
    save_file(tensors, str(path), metadata=metadata)
    return path


def test_identical_exit_0(sample: Path, tmp_path: Path) -> None:
    other = tmp_path / "copy.safetensors"
    other.write_bytes(sample.read_bytes())
    r = run_cli("diff", sample, other, "--values")
    assert r.code == 0 and "result: identical" in r.out


def test_structure_and_metadata(tmp_path: Path) -> None:
    a = _save(tmp_path / "a.safetensors", {"same": np.zeros(2, np.float32), "gone": np.zeros(1, np.int8),
                                           "dt": np.zeros(2, np.float32), "sh": np.zeros((2, 2), np.float32)},
              {"k": "1", "drop": "x"})
    b = _save(tmp_path / "b.safetensors", {"same": np.zeros(2, np.float32), "new": np.zeros(1, np.int8),
                                           "dt": np.zeros(2, np.float16), "sh": np.zeros(4, np.float32)},
              {"k": "2", "add": "y"})
    r = run_cli("diff", a, b, "--json")
    assert r.code == 1
    d = json.loads(r.out)
    assert [t["name"] for t in d["tensors_added"]] == ["new"]
    assert [t["name"] for t in d["tensors_removed"]] == ["gone"]
    changed = {c["name"]: c["changes"] for c in d["tensors_changed"]}
    assert changed == {"dt": ["dtype", "nbytes"], "sh": ["shape"]}
    assert d["metadata_added"] == {"add": "y"} and d["metadata_removed"] == {"drop": "x"}
    assert d["metadata_changed"] == {"k": {"a": "1", "b": "2"}}
    assert d["same"] is False and d["tensors_same_structure"] == 1 and d["verdict"] == "different"
    text = run_cli("diff", a, b).out
    assert "+ new" in text and "- gone" in text and "~ dt  F32 [2] -> F16 [2]" in text and "result: different" in text


def test_values_exact_and_tolerance(tmp_path: Path) -> None:
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    y = x.copy()
    y[[3, 500]] += np.float32(1e-3)
    a = _save(tmp_path / "a.safetensors", {"t": x})
    b = _save(tmp_path / "b.safetensors", {"t": y})
    assert run_cli("diff", a, b).code == 1  # the bytes differ
    assert run_cli("diff", a, b, "--structure-only").code == 3  # same structure, values not compared
    r = compute_diff(str(a), str(b), values=True)
    v = r.values[0]  # type: ignore[index]
    assert v.differing == 2 and v.elements == 1000
    assert v.max_abs_diff == pytest.approx(1e-3, rel=1e-3)
    assert v.cosine_similarity is not None and 0.99999 < v.cosine_similarity <= 1.0
    assert not r.same and run_cli("diff", a, b, "--values").code == 1
    within = run_cli("diff", a, b, "--atol", "1e-2")  # --atol implies --values
    assert within.code == 0 and within.out.endswith("result: equal within tolerance\n"), within.out
    assert run_cli("diff", a, b, "--rtol", "1e-9").code == 1


def test_exact_is_bitwise_and_nan_equal(tmp_path: Path) -> None:
    x = np.array([0.0, np.nan, np.inf, 1.0], np.float32)
    y = np.array([-0.0, np.nan, np.inf, 1.0], np.float32)
    a, b = _save(tmp_path / "a.safetensors", {"t": x}), _save(tmp_path / "b.safetensors", {"t": y})
    v = compute_diff(str(a), str(b), values=True).values[0]  # type: ignore[index]
    assert v.differing == 1 and v.max_abs_diff == 0.0  # -0.0 vs 0.0: bits differ, values do not
    assert compute_diff(str(a), str(b), values=True, atol=0.0, rtol=0.0).values[0].differing == 0  # type: ignore[index]


def test_values_chunked_equals_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ml_dtypes

    rng = np.random.default_rng(1)
    t = {"f": rng.standard_normal(1001).astype(np.float32), "bf": rng.standard_normal(64).astype(ml_dtypes.bfloat16),
         "f4": rng.standard_normal(64).astype(ml_dtypes.float4_e2m1fn), "i": rng.integers(0, 9, 77).astype(np.int32)}
    u = {k: v.copy() for k, v in t.items()}
    u["f"][::7] = 0
    u["f4"][::5] = ml_dtypes.float4_e2m1fn(0.5)
    u["i"][0] += 1
    a, b = _save(tmp_path / "a.safetensors", t), _save(tmp_path / "b.safetensors", u)
    whole = compute_diff(str(a), str(b), values=True)
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 16)
    chunked = compute_diff(str(a), str(b), values=True)
    for w, c in zip(whole.values or [], chunked.values or []):
        assert (w.name, w.differing, w.max_abs_diff) == (c.name, c.differing, c.max_abs_diff)
        assert w.cosine_similarity == pytest.approx(c.cosine_similarity)
    by_name = {v.name: v for v in whole.values or []}
    assert by_name["i"].differing == 1 and by_name["i"].max_abs_diff == 1.0
    assert by_name["f"].differing == int(np.count_nonzero(t["f"][::7] != 0))


def test_formats(sample: Path, tmp_path: Path) -> None:
    from pysafetensors.tools.metadata import edit_metadata

    other = tmp_path / "o.safetensors"
    edit_metadata(str(sample), "set", {"x": "1"}, output=str(other))
    md = run_cli("diff", sample, other, "--format", "md")
    assert md.code == 1 and md.out.startswith("# diff") and "| + | `x` | '1' |" in md.out
    js = run_cli("diff", sample, other, "--format", "json")
    assert json.loads(js.out)["metadata_added"] == {"x": "1"}
    r = compute_diff(str(sample), str(other))
    assert render_diff(r, "text").endswith("result: different\n")


def test_errors_exit_2(sample: Path, tmp_path: Path) -> None:
    assert run_cli("diff", sample, tmp_path / "missing.safetensors").code == 2
    assert run_cli("diff", sample, sample, "--atol", "-1").code == 2
    assert run_cli("diff", sample, sample, "--format", "xml").code == 2


def test_shape_change_not_compared(tmp_path: Path) -> None:
    a = _save(tmp_path / "a.safetensors", {"t": np.zeros(4, np.float32)})
    b = _save(tmp_path / "b.safetensors", {"t": np.zeros((2, 2), np.float32)})
    v = compute_diff(str(a), str(b), values=True).values[0]  # type: ignore[index]
    assert not v.compared and v.reason == "shapes differ"


def test_real_model_against_itself(real_model: Path) -> None:
    r2 = compute_diff(str(real_model), str(real_model), values=True)
    assert r2.same and len(r2.values or []) == 104
    assert all(v.differing == 0 for v in r2.values or [])


@pytest.mark.parametrize(
    ("x", "y", "dtype_a", "dtype_b", "max_abs"),
    [
        ([2**53 + 1, 5], [2**53, 5], np.int64, np.int64, 1),  # float64 cannot tell them apart
        ([2**64 - 1, 7], [2**64 - 2, 7], np.uint64, np.uint64, 1),
        ([-(2**63), 0], [2**63 - 1, 0], np.int64, np.int64, 2**64 - 1),  # overflows int64 subtraction
        ([-1, 3], [2**64 - 1, 3], np.int64, np.uint64, 2**64),  # needs 65 bits
        ([2**31 - 1, 0], [-(2**31), 0], np.int32, np.int64, 2**32 - 1),
        ([True, False], [True, True], np.bool_, np.bool_, 1),
    ],
)
def test_integers_compare_exactly(tmp_path: Path, x: list[int], y: list[int], dtype_a: type, dtype_b: type,
                                  max_abs: int) -> None:
    a = _save(tmp_path / "a.safetensors", {"t": np.array(x, dtype_a)})
    b = _save(tmp_path / "b.safetensors", {"t": np.array(y, dtype_b)})
    for args in ([], ["--rtol", "0", "--atol", "0"]):
        r = run_cli("diff", a, b, "--values", "--json", *args)
        v = json.loads(r.out)["values"][0]
        assert r.code == 1, args
        assert v["differing"] == 1 and v["max_abs_diff"] == max_abs and type(v["max_abs_diff"]) is int, (args, v)
    text = run_cli("diff", a, b, "--rtol", "0", "--atol", "0").out
    assert f"max_abs_diff {max_abs}  " in text and "result: different" in text


def test_integer_tolerances_and_cosine_of_huge_values(tmp_path: Path) -> None:
    a = _save(tmp_path / "a.safetensors", {"i": np.array([100, 2**62], np.int64), "f": np.array([1e300, -2e300])})
    b = _save(tmp_path / "b.safetensors", {"i": np.array([101, 2**62], np.int64), "f": np.array([1e300, -2e300])})
    by = {v.name: v for v in compute_diff(str(a), str(b), atol=1.0).values or []}
    assert by["i"].differing == 0 and by["i"].max_abs_diff == 1
    assert [v.differing for v in compute_diff(str(a), str(b), atol=0.5).values or []] == [0, 1]  # f, i
    assert by["f"].cosine_similarity == pytest.approx(1.0)  # finite, though the squares overflow float64


def test_infinities_of_opposite_sign_are_inf_in_json(tmp_path: Path) -> None:
    a = _save(tmp_path / "a.safetensors", {"t": np.array([np.inf, 1.0, np.nan]), "u": np.array([np.nan])})
    b = _save(tmp_path / "b.safetensors", {"t": np.array([-np.inf, 1.0, np.nan]), "u": np.array([2.0])})
    for args in (["--values"], ["--atol", "0"]):
        values = {v["name"]: v for v in json.loads(run_cli("diff", a, b, "--json", *args).out)["values"]}
        assert values["t"]["max_abs_diff"] == "inf" and values["t"]["differing"] == 1, args
        assert values["u"]["max_abs_diff"] == "inf", args


def test_cosine_is_undefined_when_a_non_finite_pair_disagrees(tmp_path: Path) -> None:
    # Over the finite pairs alone, [inf, 1] and [-inf, 1] would have cosine 1.0: "same direction".
    a = _save(tmp_path / "a.safetensors", {"opp": np.array([np.inf, 1.0]), "num": np.array([np.nan, 1.0]),
                                            "same": np.array([np.inf, np.nan, 1.0, 2.0])})
    b = _save(tmp_path / "b.safetensors", {"opp": np.array([-np.inf, 1.0]), "num": np.array([3.0, 1.0]),
                                            "same": np.array([np.inf, np.nan, 1.0, 2.0])})
    r = run_cli("diff", a, b, "--values", "--json")
    values = {v["name"]: v for v in json.loads(r.out)["values"]}
    assert values["opp"]["cosine_similarity"] is None and values["num"]["cosine_similarity"] is None
    assert values["same"]["cosine_similarity"] == pytest.approx(1.0)  # equal non-finite values are left out
    text = run_cli("diff", a, b, "--values").out
    assert "~ opp  differing 1/2  max_abs_diff inf  cosine -" in text
