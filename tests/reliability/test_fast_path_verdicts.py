"""The fast header paths (json's and msgspec's) are private optimisations of the rule set: on the
whole corpus and on every fuzzer's inputs, each either steps aside (None) or returns exactly the
header the rules return.  And parse_header's error is always the first problem check_header lists."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import random
from pathlib import Path
from typing import Any

import pytest
from _reliability_helpers import ROOT
from fuzz.differential import differential_input
from fuzz.gen import random_input
from fuzz.targets import classify, fast_path_input
from test_differential_verdicts import CASES

from pysafetensors.errors import SafetensorError
from pysafetensors.format import Header, check_header, parse_header
from pysafetensors.format import header as header_mod

_spec = importlib.util.spec_from_file_location("corpus_cases", ROOT / "tests" / "corpus" / "cases.py")
assert _spec and _spec.loader
corpus: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


def _inputs() -> dict[str, bytes]:
    inputs: dict[str, bytes] = {}
    inputs.update({f"corpus broken {k}": v[0] for k, v in corpus.BROKEN.items()})
    inputs.update({f"corpus accepted {k}": v for k, v in corpus.ACCEPTED.items()})
    inputs.update({f"handpicked {k}": v for k, v in CASES.items()})
    inputs.update({f"random_input {s}": random_input(random.Random(s)) for s in range(2500)})
    inputs.update({f"differential_input {s}": differential_input(random.Random(s)) for s in range(2500)})
    return inputs


def _header(data: bytes) -> tuple[bytes, int] | None:
    """The N header bytes and the file size, when the length prefix is valid."""
    if len(data) < 8:
        return None
    n = int.from_bytes(data[:8], "little")
    return (data[8 : 8 + n], len(data)) if n <= 100_000_000 and 8 + n <= len(data) else None


def _fast_paths(text: str, n: int, size: int) -> list[tuple[str, Any]]:
    """Both fast paths' answers: json's, and msgspec's (the ``fast`` extra, installed in CI)."""
    typed = header_mod._typed_entries()
    assert typed is not None, "msgspec (pysafetensors[fast]) is part of the test install"
    from_typed = header_mod._typed_header.fast_header(text, n, size, typed, Header)
    return [
        ("json", header_mod._fast_header(text, n, size)),
        ("msgspec", None if from_typed is header_mod._typed_header.NOT_CANONICAL else from_typed),
    ]


def test_fast_path_gives_the_rules_verdict_on_the_corpus_and_the_fuzzers_inputs() -> None:
    fast_accepted = typed_accepted = rules_accepted = 0
    wrong = []
    for name, data in _inputs().items():
        split = _header(data)
        if split is None:
            continue
        header, size = split
        try:
            careful: Any = header_mod._careful_header(header, size)
            rules_accepted += 1
        except SafetensorError as e:
            careful = e
        try:
            text = header.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for path, fast in _fast_paths(text, len(header), size):
            if fast is None:
                continue
            fast_accepted += path == "json"
            typed_accepted += path == "msgspec"
            if fast != careful:
                wrong.append(f"{name}: {path} fast path {fast!r:.200}, rules {careful!r:.200}")
    assert not wrong, "\n".join(wrong[:10])
    assert typed_accepted > 0.3 * rules_accepted, (typed_accepted, rules_accepted)
    # Not vacuous: many accepted headers take the fast path (the generators write many in
    # an order or a spelling it leaves to the rules on purpose).
    assert fast_accepted > 0.3 * rules_accepted > 200, (fast_accepted, rules_accepted)


def test_parse_header_raises_the_first_problem_check_header_lists() -> None:
    rejected = 0
    for name, data in _inputs().items():
        split = _header(data)
        if split is None:
            continue
        header, size = split
        problems = [p for p in check_header(header, size) if not p.warning]
        try:
            parse_header(header, size)
        except SafetensorError as e:
            rejected += 1
            assert problems, f"{name}: parse_header raised {e} but check_header found nothing"
            assert type(e) is type(problems[0].error) and str(e) == str(problems[0].error), name
            assert e.code == problems[0].code  # type: ignore[attr-defined]
        else:
            assert not problems, f"{name}: parse_header accepts, check_header lists {problems[0].message}"
    assert rejected > 1000


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_validate_agrees_with_the_reader_on_files(backend: str, tmp_path: Path) -> None:
    """validate (tools.validate) and safe_open decide every file the same way, and validate's
    first problem is the reader's error."""
    from pysafetensors import safe_open
    from pysafetensors.tools.validate import validate

    path = tmp_path / "f.safetensors"
    for seed in range(300):
        data = differential_input(random.Random(50_000 + seed))
        path.write_bytes(data)
        r = validate(str(path))
        try:
            with safe_open(path, framework="np", backend=backend):
                pass
            assert r.valid and not r.problems, (seed, [p.message for p in r.problems])
        except SafetensorError as e:
            assert not r.valid and r.problems, seed
            assert str(e).endswith(r.problems[0].message), (seed, str(e), r.problems[0].message)


def test_the_fast_path_fuzz_target_reaches_msgspec_through_parse_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast_path target's large inputs (one draw in 16) take msgspec's path inside
    parse_header, which accepts some of them, and the target finds nothing wrong."""
    real = header_mod._typed_header.fast_header
    accepted: list[int] = []

    def counting(text: str, n: int, *args: Any) -> Any:
        answer = real(text, n, *args)
        accepted.extend([n] if isinstance(answer, Header) else [])
        return answer

    large = [s for s in range(400) if random.Random(s).randrange(16) == 0][:12]  # fast_path_input's first draw
    inputs = {s: fast_path_input(random.Random(s)) for s in large}
    assert sum(int.from_bytes(d[:8], "little") >= header_mod.TYPED_FROM for d in inputs.values()) > len(inputs) // 2
    monkeypatch.setattr(header_mod._typed_header, "fast_header", counting)
    for split in filter(None, map(_header, inputs.values())):
        with contextlib.suppress(SafetensorError):
            parse_header(*split)
    assert accepted and min(accepted) >= header_mod.TYPED_FROM, accepted
    monkeypatch.undo()
    bugs = [(s, report) for s, data in inputs.items() if (report := classify("fast_path", data, s))]
    assert not bugs, bugs[0]


def _valid() -> bytes:
    from pysafetensors import serialize

    return serialize({"t": {"dtype": "U8", "shape": [2], "data": b"xy"}}, metadata={"k": "v"})


@pytest.mark.parametrize("wrong", ["json accepts", "json differs", "msgspec differs", "msgspec raises"])
def test_the_fast_path_fuzz_target_can_fail(monkeypatch: pytest.MonkeyPatch, wrong: str) -> None:
    """A fast path giving a crafted wrong answer is reported, on a small header (msgspec not
    used by parse_header) and on a refused one."""
    data = _valid()
    assert classify("fast_path", data, 0) is None
    h = parse_header(*_header(data))
    other = Header(h.names, h.dtypes, h.shapes, h.offsets, {"k": "w"}, h.header_size)
    if wrong == "json accepts":
        data = data[:-1]  # the rules refuse: the data is a byte short
        monkeypatch.setattr(header_mod, "_fast_header", lambda text, n, size: other)
        expected = "parse_header gives"
    elif wrong == "json differs":
        monkeypatch.setattr(header_mod, "_fast_header", lambda text, n, size: other)
        expected = "parse_header gives"
    elif wrong == "msgspec differs":
        monkeypatch.setattr(header_mod._typed_header, "fast_header", lambda *args: other)
        expected = "the msgspec fast path gives"
    else:
        monkeypatch.setattr(header_mod._typed_header, "fast_header", lambda *args: 1 // 0)
        expected = "the msgspec fast path raised ZeroDivisionError"
    report = classify("fast_path", data, 0)
    assert report is not None and expected in report, report


@pytest.mark.parametrize(
    ("second", "why"),
    [
        ('{"dtype":"F32","shape":[2,3],"data_offsets":[24,47]}', "a repeated shape with a short span"),
        ('{"dtype":"F32","shape":[2,3],"data_offsets":[24,52]}', "a repeated shape with a long span"),
        ('{"dtype":"F32","shape":[2.0,3],"data_offsets":[24,48]}', "a float dim equal to the first shape's"),
        ('{"dtype":"F16","shape":[2,3],"data_offsets":[24,48]}', "the same shape in a narrower dtype"),
    ],
)
def test_a_repeated_shape_is_checked_against_each_tensors_own_span(second: str, why: str) -> None:
    # Both fast paths check a shape's size once per (dtype width, shape) and compare every
    # later tensor of that pair with it: a later tensor that breaks a rule must still fall to
    # the rules, whose verdict is an error.
    text = '{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":' + second + "}"
    end = int(second.rsplit(",", 1)[1].rstrip("]}"))
    _left_to_the_rules(text, 8 + len(text) + end, why)


def _left_to_the_rules(text: str, size: int, why: str) -> None:
    """The rules find an error in ``text``, both fast paths leave it to them, and parse_header raises."""
    assert any(not p.warning for p in check_header(text.encode(), size)), why
    for path, got in _fast_paths(text, len(text), size):
        assert got is None, (path, why)
    with pytest.raises(SafetensorError):
        parse_header(text.encode(), size)


def test_a_repeated_shape_that_fits_is_taken_by_both_fast_paths() -> None:
    text = (
        '{"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},'
        '"b":{"dtype":"F32","shape":[2,3],"data_offsets":[24,48]},'
        '"c":{"dtype":"F16","shape":[2,3],"data_offsets":[48,60]}}'
    )
    size = 8 + len(text) + 60
    for path, got in _fast_paths(text, len(text), size):
        assert isinstance(got, Header), path
        assert got.offsets == [0, 24, 48, 60] and got.shapes[0] is got.shapes[1] is got.shapes[2], path


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("[1,3]", "[true,3]"),  # equal as keys: (1, 3) == (True, 3)
        ("[3,1]", "[3,true]"),
        ("[0,3]", "[false,3]"),
        ("[true,3]", "[1,3]"),  # the boolean first
    ],
)
def test_a_boolean_dim_equal_to_an_earlier_shapes_int_falls_to_the_rules(first: str, second: str) -> None:
    # The fast paths key each (dtype, shape) kind by its dims, where JSON's true and false equal
    # 1 and 0: a kind with a 0 or 1 dim has every later shape's dims checked one by one.
    nbytes = 4 * 3 * (0 if "0" in first or "false" in first else 1)
    text = (f'{{"a":{{"dtype":"F32","shape":{first},"data_offsets":[0,{nbytes}]}},'
            f'"b":{{"dtype":"F32","shape":{second},"data_offsets":[{nbytes},{2 * nbytes}]}}}}')
    _left_to_the_rules(text, 8 + len(text) + 2 * nbytes, f"{first} then {second}")


def test_true_and_false_in_names_and_metadata_take_the_fast_paths() -> None:
    entry = {"dtype": "F32", "shape": [1, 3]}
    header = {"__metadata__": {"true": "false"}, "true.weight": {**entry, "data_offsets": [0, 12]},
              "false.bias": {**entry, "data_offsets": [12, 24]}}
    text = json.dumps(header, separators=(",", ":"))
    careful = header_mod._careful_header(text.encode(), 8 + len(text) + 24)
    assert [got for _, got in _fast_paths(text, len(text), 8 + len(text) + 24)] == [careful, careful]
