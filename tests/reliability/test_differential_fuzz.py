"""The differential fuzz target against upstream safetensors 0.8.0 (fuzz/differential.py) on a
fixed batch of seeds: every input gets the same verdict at safe_open and in deserialize, and
the same keys, metadata, dtypes, shapes and bytes wherever both accept.  The counts are
printed at the end of the test run (tests/reliability/conftest.py)."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from _reliability_helpers import ROOT
from fuzz import differential, differential_stages
from fuzz.differential import CATEGORIES, Disagreement, compare, differential_input, placed, summary
from fuzz.gen import DTYPES
from fuzz.targets import classify

import pysafetensors

pytest.importorskip("safetensors")

SEEDS = int(os.environ.get("PYSAFETENSORS_DIFFERENTIAL_SEEDS", "2000"))
COUNTS: Counter[str] = Counter()  # read by conftest.py's terminal summary


@pytest.mark.slow
def test_differential_target_on_a_fixed_batch_of_seeds(tmp_path: Any) -> None:
    disagreements = []
    same_before = differential.COUNTS["same_reason"]
    stages_before = differential_stages.COUNTS.copy()
    for seed in range(SEEDS):
        data = differential_input(random.Random(seed))
        try:
            COUNTS[compare(data, str(tmp_path))] += 1
        except Disagreement as e:
            COUNTS["disagreements"] += 1
            disagreements.append(f"seed {seed}: {e}\n  input {data[:300]!r}")
    COUNTS["same_reason"] = differential.COUNTS["same_reason"] - same_before
    assert not disagreements, f"{summary(COUNTS)}\n" + "\n".join(disagreements[:10])
    # Not vacuous: the inputs reach every outcome.
    assert sum(COUNTS[c] for c in CATEGORIES) == SEEDS
    assert COUNTS["both_accept"] > SEEDS // 20 and COUNTS["both_reject"] > SEEDS // 4
    assert COUNTS["expected_better"] > 0 and COUNTS["ours_extends"] > 0
    # The further stages ran: saves with a lone surrogate, torch slices with two "...".
    stages = differential_stages.COUNTS - stages_before
    assert stages["writer_surrogate"] > SEEDS // 100 and stages["torch_ellipses"] > SEEDS // 50, stages


def test_generator_covers_what_the_issue_lists() -> None:
    """Valid files of every dtype (0-rank, zero-size dims), and each mutation kind shows up."""
    texts = [differential_input(random.Random(s)) for s in range(1500)]
    joined = b"\n".join(texts)
    for code in DTYPES:
        assert f'"dtype":"{code}"'.encode() in joined, code
    for needle in [b'"shape":[]', b'"shape":[0', b"-0", b"1e2", b"1.0", b"01", b"18446744073709551616",
                   b"18446744073709551615", b"9223372036854775808", b'"F128"', b'{"F32":null}',
                   b"\\ud800", b"\\udc00", b"\xef\xbb\xbf", b"\x00", b'"x":', b"[1.5]", b"[true]", b"[[2]]",
                   b'"__metadata__":{"k":1', b'"__metadata__":null', b'"__metadata__":[]',
                   b"1e9999999", b"1e8446744073709551615"]:
        assert needle in joined, needle
    # Headers that are one bare JSON number whose exponent passes decimal's limits.
    assert any(t[8:].rstrip() in (b"1e9999999", b"1e8446744073709551615") for t in texts)
    assert re.search(rb'"dtype":"[a-z][a-z0-9_]*"', joined)  # a code in the wrong case
    lengths = {int.from_bytes(t[:8], "little") - (len(t) - 8) for t in texts}
    assert {0} < lengths and any(d < 0 for d in lengths)  # wrong length prefixes, data short or long


def test_the_oracle_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """compare() reports a disagreement when ours differs (here: deserialize loses a tensor)."""
    data = pysafetensors.serialize({"a": {"dtype": "U8", "shape": [2], "data": b"xy"}})
    assert compare(data) == "both_accept"
    monkeypatch.setattr(pysafetensors, "deserialize", lambda data: [])
    with pytest.raises(Disagreement, match="deserialize differs"):
        compare(data)


@pytest.mark.parametrize("number", [b"1e9999999", b"1e8446744073709551615", b" -1E+99999999 "])
def test_a_bare_number_header_past_decimals_limits_is_refused_by_both(number: bytes) -> None:
    """The differential fuzz's finding: ours raised decimal.Overflow / InvalidOperation."""
    data = len(number).to_bytes(8, "little") + number
    assert compare(data) == "both_reject"


def _one(code: str, shape: list[int], data: bytes) -> bytes:
    return pysafetensors.serialize({"t": {"dtype": code, "shape": shape, "data": data}})


# F6 (numpy has no type: upstream's "Dtype not understood", ours through ml_dtypes) and F8
# (upstream's numpy face fails with AttributeError): our tensor must still be the file's.
F6 = _one("F6_E2M3", [2, 4], bytes(range(1, 7)))
F8 = _one("F8_E4M3", [3], b"\x01\x02\x03")


def _wrong_tensor(how: str) -> Any:
    """Our get_tensor, giving a crafted wrong answer."""
    import numpy as np

    real = pysafetensors.safe_open.get_tensor

    def get_tensor(self: Any, name: str) -> Any:
        t = real(self, name)
        if not isinstance(t, np.ndarray):
            return t  # the torch face is left alone
        codes = t.view(np.uint8).copy()
        if how == "byte":
            codes[1] ^= 1
        elif how == "high bit":
            codes[1] |= 0x40  # the same low six bits: a packed comparison alone would miss it
        elif how == "shape":
            return t.reshape(1, -1)
        return codes.view(t.dtype)

    return get_tensor


@pytest.mark.parametrize(
    ("data", "category", "how"),
    [(F6, "ours_extends", "byte"), (F6, "ours_extends", "high bit"), (F6, "ours_extends", "shape"),
     (F8, "expected_better", "byte"), (F8, "expected_better", "shape")],
    ids=["F6-byte", "F6-high-bit", "F6-shape", "F8-byte", "F8-shape"],
)
def test_a_tensor_only_ours_gives_must_be_the_files(
    monkeypatch: pytest.MonkeyPatch, data: bytes, category: str, how: str
) -> None:
    assert compare(data) == category
    monkeypatch.setattr(pysafetensors.safe_open, "get_tensor", _wrong_tensor(how))
    with pytest.raises(Disagreement, match="numpy get_tensor: ours gives"):
        compare(data)


@pytest.mark.parametrize("message", ["Dtype not understood: F6_E3M2", "File does not contain tensor t", "Dtype not understood"])
def test_ours_extends_only_where_upstream_refuses_the_dtype(monkeypatch: pytest.MonkeyPatch, message: str) -> None:
    """Upstream refusing the F6_E2M3 tensor with any other words (a crafted wrong answer) is a disagreement."""
    import safetensors

    real = safetensors.safe_open

    class Refusing:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._f = real(*args, **kwargs)

        def __enter__(self) -> Any:
            self._f.__enter__()
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.__exit__(*exc)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

        def get_tensor(self, name: str) -> Any:
            raise safetensors.SafetensorError(message)

    assert compare(F6) == "ours_extends"
    monkeypatch.setattr(safetensors, "safe_open", Refusing)
    with pytest.raises(Disagreement, match=f"upstream raised SafetensorError: {message}, ours gives the tensor"):
        compare(F6)


def test_an_error_escaping_compare_is_a_bug_and_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our SafetensorError out of a call compare() does not expect to fail is no clean rejection."""
    data = _one("U8", [2], b"xy")
    before = placed(differential.COUNTS)
    assert classify("differential", data, 0) is None
    assert placed(differential.COUNTS) == before + 1

    def metadata(self: Any) -> Any:
        raise pysafetensors.SafetensorError("crafted")

    monkeypatch.setattr(pysafetensors.safe_open, "metadata", metadata)
    report = classify("differential", data, 0)
    assert report is not None and "compare() raised SafetensorError: crafted" in report
    assert placed(differential.COUNTS) == before + 2


def test_the_issue_example_is_rejected_at_open_by_both() -> None:
    h = b'{"t":{"dtype":"I16","shape":[4,0,18446744073709551616],"data_offsets":[0,0]}}'
    assert compare(len(h).to_bytes(8, "little") + h) == "both_reject"
    assert differential.COUNTS["both_reject"] > 0


@pytest.mark.slow
def test_runner_prints_the_differential_counts() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), "--target", "differential", "--seconds", "60", "--count", "60",
         "--seed", "1000000"],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "differential vs upstream" in x)
    assert "inputs 60," in line and "disagreements 0" in line
