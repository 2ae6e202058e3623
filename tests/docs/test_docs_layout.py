"""The built site in a real browser (#31): at 1400 px no code block or inline code runs past the
content column (a long line scrolls inside its block or a table's scroll box), and the page
never scrolls sideways; the CLI guide starts with an example."""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from docs_helpers import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# For each pre/code: its right edge, the content column's, and whether an ancestor between the two
# scrolls sideways within the column (then the element may be wider: it scrolls, it does not run off).
# SLACK: text widths are fractional and a line is filled to the last sub-pixel; 1.5 px is rounding,
# not a code block running off (without extra.css inline code stood out 2-3 px, blocks far more).
_OVERFLOWS = """() => {
  const column = document.querySelector('.md-content__inner');
  const right = column.getBoundingClientRect().right + 1.5;  // SLACK
  const bad = [];
  for (const el of column.querySelectorAll('pre, code')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0) continue;
    if (box.right <= right) continue;
    let scroller = null;
    for (let a = el; a && a !== column; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if ((ox === 'auto' || ox === 'scroll') && a.getBoundingClientRect().right <= right) { scroller = a; break; }
    }
    if (!scroller) bad.push([el.tagName, Math.round(box.right - right), el.textContent.slice(0, 60)]);
  }
  return {bad, docWidth: document.documentElement.scrollWidth, viewport: innerWidth};
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_code_never_runs_off_the_page_at_1400px(site: Path, served: str) -> None:
    assert os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing (apt-get install -y chromium)"
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    assert len(pages) > 20 and "reference/cli/index.html" in pages
    problems: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            for rel in pages:
                page.goto(f"{served}/{rel}")
                result = page.evaluate(_OVERFLOWS)
                if result["bad"] or result["docWidth"] > result["viewport"]:
                    problems[rel] = result
        finally:
            browser.close()
    assert problems == {}


def test_the_stylesheet_is_wired_in(site: Path) -> None:
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert "overflow-wrap: anywhere" in css
    assert (site / "stylesheets" / "extra.css").read_text(encoding="utf-8") == css
    assert 'href="../../stylesheets/extra.css"' in (site / "guides" / "cli" / "index.html").read_text(encoding="utf-8")


def test_the_cli_guide_starts_with_an_example() -> None:
    lines = [line for line in (ROOT / "docs" / "guides" / "cli.md").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    assert lines[0] == "# The command line"
    first = next(line for line in lines[1:] if not line.startswith("<!--"))
    assert first == "```console", first
    assert lines[lines.index(first) + 1].startswith("$ pysafetensors ")
