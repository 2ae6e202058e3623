"""Every performance figure has one source: benchmarks/RESULTS.md.

The README and the documentation's top-level pages quote no figure of their own (they drift apart
otherwise: the home page and the README once disagreed on the same workload); the home page shows
RESULTS.md's headline section through pymdownx.snippets, and RESULTS.md links every run log kept
under benchmarks/runs/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_helpers import DOCS, README, ROOT
from docs_helpers import html_text as _text

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
RUNS = ROOT / "benchmarks" / "runs"
START = "<!-- --8<-- [start:headline] -->"
END = "<!-- --8<-- [end:headline] -->"
INCLUDE = '--8<-- "benchmarks/RESULTS.md:headline"'

# A ratio ("0.97x", "1.14-1.25x", "3×") or a time or rate ("132 ms", "95 MB/s"): what a benchmark
# measures.  Shapes ("16x64") and folded blocks ("[0–5] × 6") are not figures.
FIGURE = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?(?:\s?[-–]\s?\d+(?:\.\d+)?)?\s?(?:[x×](?![\w×])|(?:ms|µs|GB/s|MB/s|GiB/s|MiB/s)\b)"
)


def _top_level_pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _headline(text: str) -> str:
    assert text.count(START) == 1 and text.count(END) == 1, "RESULTS.md needs one headline start and end marker"
    start, end = text.index(START), text.index(END)
    assert start < end
    return text[start + len(START) : end]


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("torch `load_file` of 512 MiB in 0.65x upstream's time", True),
        ("at parity (0.97x, 0.93x)", True),
        ("the one slower case (1.14-1.25x)", True),
        ("132 vs 39 ms = **3.4×**", True),
        ("converts at about 95 MB/s", True),
        ("16x64 F32 tensors", False),
        ("encoder.layer.[0–5] × 6: 16 tensors", False),
        ("sha256 0x1f and 512 MiB", False),
    ],
)
def test_the_figure_pattern(line: str, found: bool) -> None:
    assert bool(FIGURE.search(line)) is found


def test_top_level_pages_quote_no_figure_of_their_own() -> None:
    """README.md and docs/*.md: figures come only through the included headline section."""
    offenders = []
    for page in _top_level_pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if match := FIGURE.search(line):
                offenders.append(f"{page.relative_to(ROOT)}:{number}: {match.group(0)!r} in {line.strip()!r}")
    assert not offenders, "performance figures belong in benchmarks/RESULTS.md:\n" + "\n".join(offenders)


def test_the_home_page_includes_the_headline_section() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    headline = _headline(text)
    assert FIGURE.search(headline), "the headline section holds the figures"
    assert re.search(r"^\|.*\|$", headline, re.MULTILINE), "the headline section is a table"
    assert INCLUDE in (DOCS / "index.md").read_text(encoding="utf-8")
    assert "pymdownx.snippets" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    # Links in the section must work from RESULTS.md and from the home page alike: only run logs,
    # which sit beside both (benchmarks/runs/ on GitHub, runs/ in the site).
    for target in re.findall(r"\]\(([^)#\s]+)", headline):
        assert target.startswith("runs/") and (RESULTS.parent / target).is_file(), target


def test_results_is_short_and_links_every_run_log() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 24 * 1024, "RESULTS.md keeps the current table; logs go in runs/"
    logs = sorted(RUNS.glob("*.md"))
    assert logs
    for log in logs:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", log.name), log.name
        assert f"](runs/{log.name})" in text, f"RESULTS.md does not link {log.name}"


def test_the_site_shows_the_headline_and_the_run_logs(site: Path) -> None:
    home = _text(site / "index.html")
    results = _text(site / "benchmarks" / "index.html")
    rows = [ln for ln in _headline(RESULTS.read_text(encoding="utf-8")).splitlines() if ln.startswith("| ")]
    first_cell = rows[1].split("|")[1].replace("`", "").strip()  # rows[0] is the header
    assert first_cell in home and first_cell in results
    assert "--8<--" not in home
    for log in RUNS.glob("*.md"):
        heading = next(ln for ln in log.read_text(encoding="utf-8").splitlines() if ln.startswith("# "))
        assert heading[2:].replace("`", "").strip() in _text(site / "runs" / log.stem / "index.html")
