"""The page by keyboard, and what assistive technology sees of it, in a real browser (Debian's
Chromium driven by Playwright): / searches, the arrows move in the lists, Enter opens, Esc clears;
focus is visible and every row is reachable by Tab; the tree and the table have their ARIA roles
(Playwright's accessibility snapshot) and axe-core finds no violation, in light and dark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pysafetensors.view import ViewSession

from .conftest import open_page, serving

QUERY = "encoder.layer.0.attention.self.query.weight"


def focused(page: Any) -> dict[str, Any]:
    return page.evaluate("""() => { const e = document.activeElement;
        return {id: e.id, tensor: e.dataset.tensor || null, path: e.dataset.path ?? null, k: e.dataset.k ?? null,
                list: e.closest('.vlist') ? e.closest('.vlist').id : null, tabindex: e.tabIndex}; }""")


def test_the_keyboard_path_search_move_open_clear(page: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        page.locator("body").press("/")  # from anywhere: the search box
        assert focused(page)["id"] == "search"
        page.keyboard.type("self.query")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '12 of 104 tensors'")
        page.keyboard.press("ArrowDown")  # into the list: its first row
        first = focused(page)
        assert first["list"] == "table" and first["k"] == "0" and first["tabindex"] == 0
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        row = focused(page)
        assert row["k"] == "2"
        page.keyboard.press("Enter")  # opens it
        page.wait_for_selector("#stats")
        assert page.text_content("#detail-name") == row["tensor"]
        assert focused(page)["tensor"] == row["tensor"]  # the focus stays on the row
        page.keyboard.press("End")
        assert focused(page)["k"] == "11"
        page.keyboard.press("Home")
        assert focused(page)["k"] == "0"
        page.keyboard.press("Escape")  # clears the filter first...
        page.wait_for_function("() => document.getElementById('match-count').textContent === '104 of 104 tensors'")
        assert page.input_value("#search") == "" and not page.locator("#detail").is_hidden()
        page.keyboard.press("Escape")  # ...then the selection
        page.wait_for_function("() => document.getElementById('detail').hidden")
        assert "t=" not in page.evaluate("location.hash")
        # Esc in the search box clears it; a second Esc leaves it.
        page.locator("body").press("/")
        page.keyboard.type("bias")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '50 of 104 tensors'")
        page.keyboard.press("Escape")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '104 of 104 tensors'")
        assert focused(page)["id"] == "search"
        page.keyboard.press("Escape")
        assert focused(page)["id"] != "search"
        assert page.log.errors == []


def test_the_tree_by_keyboard_and_tab(page: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=tree]")
        page.locator("#search").focus()
        for _ in range(3):  # search, Expand all, Collapse all, then the tree's one tab stop
            page.keyboard.press("Tab")
        assert focused(page) == {"id": "", "tensor": None, "path": "embeddings", "k": "0", "list": "tree", "tabindex": 0}
        assert page.locator("#tree [tabindex='0']").count() == 1  # one tab stop: Tab leaves the tree after it
        page.keyboard.press("ArrowDown")
        assert focused(page)["path"] == "encoder"
        page.keyboard.press("ArrowRight")  # opens it
        page.wait_for_function("() => document.querySelector(\"#tree .row[data-path='encoder']\").ariaExpanded === 'true'")
        page.keyboard.press("ArrowRight")  # goes to its first child: the six layers' block
        assert focused(page)["path"] == "encoder.layer"
        page.keyboard.press("Enter")  # opens the block: its six layers
        page.wait_for_selector("#tree .row[data-path='encoder.layer.5']")
        for _ in range(3):
            page.keyboard.press("ArrowDown")
        assert focused(page)["path"] == "encoder.layer.2"
        page.keyboard.press("ArrowLeft")  # closed: goes to the parent
        assert focused(page)["path"] == "encoder.layer"
        page.keyboard.press("ArrowLeft")  # open: closes it
        page.wait_for_function("() => !document.querySelector(\"#tree .row[data-path='encoder.layer.5']\")")
        # Focus is visible: the focused row has an outline in the accent colour.
        outline = page.evaluate("() => { const s = getComputedStyle(document.activeElement); "
                                "return [s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor]; }")
        assert outline[0] == "solid" and outline[1] >= 2, outline
        # The tabs: Left and Right move between them.
        page.focus("#tab-tree")
        page.keyboard.press("ArrowRight")
        assert focused(page)["id"] == "tab-table" and page.get_attribute("#tab-table", "aria-selected") == "true"
        assert page.log.errors == []


def test_a_row_scrolled_away_keeps_the_tab_stop(page: Any, big_header: Any) -> None:
    path, names = big_header
    with serving(ViewSession.open([str(path)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        page.locator("#search").focus()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("PageDown")
        k = int(focused(page)["k"])
        assert k > 10
        page.locator("#table").evaluate("b => { b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); }")
        page.wait_for_selector(f"#table .row[data-tensor='{names[-1]}']")
        page.locator("#table [data-sort=offset]").focus()  # the last column header
        page.keyboard.press("Tab")  # back into the list: the active row, drawn although scrolled away
        assert focused(page)["k"] == str(k)


def test_aria_roles_of_the_tree_and_the_table(page: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        assert page.locator("#tabs").aria_snapshot().splitlines()[0] == '- tablist "Views":'
        page.click("button[data-tab=tree]")
        page.click("#tree .row[data-path=encoder]")
        snap = page.locator("#tree").aria_snapshot()
        assert snap.startswith('- treegrid "Tensors by dotted prefix":')
        for line in ('- columnheader "tensors"', '- columnheader "% of total"',
                     '- row "embeddings 6 11,919,104 47.7 MB 52.5%" [level=1]',
                     '- row "encoder 96 10,646,784 42.6 MB 46.9%" [expanded] [level=1]',
                     '- gridcell "10,646,784"'):
            assert line in snap, (line, snap)
        assert '"layer.[0–5] × 6 1,774,464 params each 96 10,646,784 42.6 MB 46.9%" [level=2]' in snap, snap
        page.click("button[data-tab=table]")
        page.click(f"#table .row[data-tensor='{QUERY}']")
        snap = page.locator("#table").aria_snapshot()
        assert snap.startswith('- grid "Tensors":')
        assert '- columnheader "data offsets ▴"' in snap
        assert f'- row "{QUERY} F32 [384, 384] 147,456 589.8 kB [48865792, 49455616)" [selected]' in snap, snap
        assert page.get_attribute("#table [data-sort=offset]", "aria-sort") == "ascending"
        assert page.get_attribute("#table", "aria-rowcount") == "105"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation(browser: Any, minilm: Path, edited_pair: Any, scheme: str) -> None:
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    context = browser.new_context(viewport={"width": 1280, "height": 860}, color_scheme=scheme)
    page = context.new_page()

    def check(where: str) -> None:
        results = axe.run(page)
        assert results.violations_count == 0, (where, results.generate_report())

    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        check("overview")
        page.click("button[data-tab=tree]")
        page.click("#tree .row[data-path=encoder]")
        page.click("#tree .row[data-path='encoder.layer']")
        check("tree")
        page.click("button[data-tab=table]")
        page.click(f"#table .row[data-tensor='{QUERY}']")
        page.wait_for_selector("#heatmap")
        check("table and a tensor")
    a, b, changed = edited_pair
    with serving(ViewSession.open([str(a), str(b)])) as server:
        open_page(page, server.url)
        page.click(f"#diff-list .row[data-tensor='{changed['nudged']}']")
        page.wait_for_selector("#diff-histogram")
        check("diff")
    context.close()
