"""The viewer's diff says what ``diff`` says: the same verdicts (computed once in tools.diff), on
the live page in Chromium and in the exported report, for checkpoints whose structure and
metadata are equal and whose bytes differ in one tensor; a URL pair says its values were not
compared, and nothing on its page calls a tensor identical or unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import verdict_pairs
from servers import RangeServer

from pysafetensors.view import ViewSession, export_report

from .conftest import open_page, serving
from .test_data import cli_json

CASES = ["negated", "nudged", "nan_payload", "signed_zero"]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory, minilm: Path) -> dict[str, tuple[Path, Path, str]]:
    return verdict_pairs(tmp_path_factory.mktemp("pairs"), minilm)


def embedded(report: Path) -> dict[str, Any]:
    text = report.read_text(encoding="utf-8")
    return json.loads(text.split('<script type="application/json" id="pst-data">', 1)[1].split("</script>", 1)[0])


def rows(page: Any) -> dict[str, str]:
    """The diff list's rows shown now: tensor -> the label the page gives it."""
    got = page.locator("#diff-list .row[data-k]").evaluate_all(
        "rs => rs.map(r => [r.dataset.tensor, r.querySelector('.cell.verdict').textContent])")
    return dict(got)


def card(page: Any, name: str) -> str:
    return str(page.text_content(f"#diff-{name} .value"))


@pytest.mark.parametrize("case", CASES)
def test_the_document_is_the_diff_commands(pairs: dict[str, tuple[Path, Path, str]], case: str) -> None:
    a, b, name = pairs[case]
    with ViewSession.open([str(a), str(b)]) as session:
        diff = session.document()["diff"]
    assert diff == cli_json("diff", a, b, code=1)  # one computation: the page gets exactly the command's JSON
    assert diff["verdict"] == "different" and diff["tensor_verdicts"][name] == "values differ"


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("with_stats", [False, True])
def test_the_export_carries_the_verdicts(pairs: dict[str, tuple[Path, Path, str]], case: str, with_stats: bool,
                                         tmp_path: Path, page: Any) -> None:
    a, b, name = pairs[case]
    report = tmp_path / "report.html"
    with ViewSession.open([str(a), str(b)]) as session:
        export_report(session, report, with_stats=with_stats)
    diff = embedded(report)["diff"]
    expected = cli_json("diff", a, b, *(["--values"] if with_stats else []), code=1)
    assert diff == {**expected, "a": diff["a"], "b": diff["b"]}
    assert diff["tensor_verdicts"][name] == "values differ"
    open_page(page, report.as_uri())
    assert card(page, "result") == "different"
    assert card(page, "values-differ") == "1"
    assert rows(page) == {name: "values differ"}  # hidden equal tensors: the one that differs is listed
    page.select_option("#diff-filter", "all")
    both = len(diff["tensor_verdicts"])
    assert page.text_content("#match-count") == (f"{both:,} tensors" if both > 1 else "1 tensor")
    assert {v for k, v in rows(page).items() if k != name} == {"identical"}  # the rows drawn (a virtual list)
    page.locator("#search").press_sequentially(name)
    page.wait_for_function("t => document.getElementById('match-count').textContent === t", arg="1 tensor")
    assert rows(page) == {name: "values differ"}
    assert page.log.errors == []


def test_the_live_page_labels_the_negated_matrix(pairs: dict[str, tuple[Path, Path, str]], page: Any) -> None:
    a, b, name = pairs["negated"]
    with serving(ViewSession.open([str(a), str(b)])) as server:
        open_page(page, server.url)
        assert card(page, "result") == "different"
        assert card(page, "compared") == "tensor bytes"
        assert (card(page, "values-differ"), card(page, "identical")) == ("1", "103")
        assert rows(page) == {name: "values differ"}
        page.click(f"#diff-list .row[data-tensor='{name}']")
        page.wait_for_function("() => document.getElementById('value-diff-numbers')")
        numbers = dict(zip(page.locator("#value-diff-numbers td.key").all_text_contents(),
                           page.locator("#value-diff-numbers td.val").all_text_contents()))
        assert numbers["verdict"] == "values differ" and numbers["differing"] == "147,456"
        assert numbers["elements"] == "147,456"
        assert page.log.errors == []


@pytest.fixture(scope="module")
def origin(pairs: dict[str, tuple[Path, Path, str]]) -> Iterator[RangeServer]:
    a, b, _ = pairs["negated"]
    with RangeServer({"a.safetensors": a.read_bytes(), "b.safetensors": b.read_bytes()}) as server:
        yield server


def test_a_url_pair_says_values_were_not_compared(origin: RangeServer, page: Any) -> None:
    urls = [origin.url("a.safetensors"), origin.url("b.safetensors")]
    with ViewSession.open(urls) as session:
        diff = session.document()["diff"]
    assert diff == cli_json("diff", *urls, code=3)
    assert diff["compared"] == "structure" and diff["same"] is None
    with serving(ViewSession.open(urls)) as server:
        open_page(page, server.url)
        assert card(page, "result") == "same structure, values not compared"
        assert card(page, "compared") == "structure only"
        assert card(page, "values-not-compared") == "104"
        assert page.text_content("#match-count") == "104 tensors"  # nothing is known equal: every tensor is listed
        assert set(rows(page).values()) == {"values not compared"}
        text = str(page.text_content("#view"))
        assert "identical" not in text and "unchanged" not in text
        assert "values were not compared" in text
        assert page.log.errors == []
