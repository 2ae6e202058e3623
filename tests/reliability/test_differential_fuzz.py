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
from fuzz import differential
from fuzz.differential import CATEGORIES, Disagreement, compare, differential_input, summary
from fuzz.gen import DTYPES

import pysafetensors

pytest.importorskip("safetensors")

SEEDS = int(os.environ.get("PYSAFETENSORS_DIFFERENTIAL_SEEDS", "2000"))
COUNTS: Counter[str] = Counter()  # read by conftest.py's terminal summary


def test_differential_target_on_a_fixed_batch_of_seeds(tmp_path: Any) -> None:
    disagreements = []
    same_before = differential.COUNTS["same_reason"]
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


def test_generator_covers_what_the_issue_lists() -> None:
    """Valid files of every dtype (0-rank, zero-size dims), and each mutation kind shows up."""
    texts = [differential_input(random.Random(s)) for s in range(1500)]
    joined = b"\n".join(texts)
    for code in DTYPES:
        assert f'"dtype":"{code}"'.encode() in joined, code
    for needle in [b'"shape":[]', b'"shape":[0', b"-0", b"1e2", b"1.0", b"01", b"18446744073709551616",
                   b"18446744073709551615", b"9223372036854775808", b'"F128"', b'{"F32":null}',
                   b"\\ud800", b"\\udc00", b"\xef\xbb\xbf", b"\x00", b'"x":', b"[1.5]", b"[true]", b"[[2]]",
                   b'"__metadata__":{"k":1', b'"__metadata__":null', b'"__metadata__":[]']:
        assert needle in joined, needle
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


def test_the_issue_example_is_rejected_at_open_by_both() -> None:
    h = b'{"t":{"dtype":"I16","shape":[4,0,18446744073709551616],"data_offsets":[0,0]}}'
    assert compare(len(h).to_bytes(8, "little") + h) == "both_reject"
    assert differential.COUNTS["both_reject"] > 0


def test_runner_prints_the_differential_counts() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), "--target", "differential", "--seconds", "60", "--count", "60",
         "--seed", "1000000"],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if "differential vs upstream" in x)
    assert "inputs 60," in line and "disagreements 0" in line
