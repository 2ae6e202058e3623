"""Deep links in a real browser (Debian's Chromium driven by Playwright): the address's hash holds
the tab, the selected tensor, the filter and the diff mode; reload, back and forward restore them;
"Copy link" and "Copy name" put them on the clipboard; truncated names have their full text as a
tooltip."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from pysafetensors.view import ViewSession, export_report

from .conftest import open_page, serving

QUERY = "encoder.layer.0.attention.self.query.weight"
DEEP = "encoder.layer.3.attention.self.query.weight"  # inside the folded block of six layers


def hash_of(page: Any) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(page.evaluate("location.hash").lstrip("#")).items()}


def shown_state(page: Any) -> dict[str, Any]:
    """What the page shows: the selected tab, the search box, the tensor in the detail panel."""
    return page.evaluate("""() => ({
        tab: document.querySelector('#tabs [aria-selected=true]').dataset.tab,
        query: document.getElementById('search') ? document.getElementById('search').value : null,
        detail: document.getElementById('detail').hidden ? null : document.getElementById('detail-name').textContent,
        selected: Array.from(document.querySelectorAll('.row[aria-selected=true]')).map(r => r.dataset.tensor),
    })""")


def wait_ready(page: Any) -> None:
    page.wait_for_selector("body[data-ready]")
    page.wait_for_function("() => !document.getElementById('loading-tensors')")


def test_tab_filter_and_tensor_survive_reload_back_and_forward(page: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        assert hash_of(page) == {"tab": "table"}
        page.locator("#search").press_sequentially("self.query")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '12 of 104 tensors'")
        page.click(f"#table .row[data-tensor='{QUERY}']")
        page.wait_for_selector("#heatmap")
        assert hash_of(page) == {"tab": "table", "t": QUERY, "q": "self.query"}
        table = {"tab": "table", "query": "self.query", "detail": QUERY, "selected": [QUERY]}
        assert shown_state(page) == table

        page.reload()
        wait_ready(page)
        page.wait_for_selector("#heatmap")
        assert shown_state(page) == table  # the filter applied, the tensor selected and its values shown
        assert page.text_content("#match-count") == "12 of 104 tensors"

        page.click("button[data-tab=tree]")
        wait_ready(page)
        tree = {"tab": "tree", "query": "self.query", "detail": QUERY, "selected": [QUERY]}
        assert shown_state(page) == tree
        page.go_back()
        page.wait_for_function("() => document.querySelector('#tabs [aria-selected=true]').dataset.tab === 'table'")
        assert shown_state(page) == table
        page.go_forward()
        page.wait_for_function("() => document.querySelector('#tabs [aria-selected=true]').dataset.tab === 'tree'")
        assert shown_state(page) == tree
        page.click("button[data-tab=overview]")
        page.go_back()
        page.wait_for_function("() => document.querySelector('#tabs [aria-selected=true]').dataset.tab === 'tree'")
        assert shown_state(page) == tree
        assert page.log.errors == []


def test_a_link_opens_the_tree_at_a_tensor_inside_a_repeated_block(browser: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 600})
        page = context.new_page()
        page.goto(server.url)
        wait_ready(page)
        base = page.url
        page.goto(base + f"#tab=tree&t={DEEP}")
        page.reload()  # a fresh load of the link (goto to a new hash alone only scrolls)
        wait_ready(page)
        page.wait_for_selector("#heatmap")
        # The groups above it are open, the block of six layers too, and its row is in view.
        for path in ("encoder", "encoder.layer", "encoder.layer.3", "encoder.layer.3.attention",
                     "encoder.layer.3.attention.self", "encoder.layer.3.attention.self.query"):
            assert page.get_attribute(f"#tree .row[data-path='{path}']", "aria-expanded") == "true", path
        row = page.locator(f"#tree .row[data-tensor='{DEEP}']")
        assert row.get_attribute("aria-selected") == "true"
        box, view = row.bounding_box(), page.locator("#tree").bounding_box()
        assert view["y"] <= box["y"] and box["y"] + box["height"] <= view["y"] + view["height"]
        assert page.text_content("#detail-name") == DEEP
        context.close()


def test_the_diff_mode_is_in_the_link(page: Any, edited_pair: Any) -> None:
    a, b, changed = edited_pair
    with serving(ViewSession.open([str(a), str(b)])) as server:
        open_page(page, server.url)
        assert page.input_value("#diff-filter") == "changes"
        page.select_option("#diff-filter", "all")
        assert hash_of(page) == {"tab": "diff", "diff": "all"}
        assert page.locator("#diff-list .row[data-k]").count() > 10  # every tensor listed
        page.locator("#search").press_sequentially("layer.1.")
        page.click(f"#diff-list .row[data-tensor='{changed['cast']}']")
        page.wait_for_selector("#diff-histogram")
        assert hash_of(page) == {"tab": "diff", "diff": "all", "q": "layer.1.", "t": changed["cast"]}
        page.reload()
        wait_ready(page)
        assert page.input_value("#diff-filter") == "all" and page.input_value("#search") == "layer.1."
        assert page.text_content("#match-count") == "16 tensors"  # the equal ones too: "all"
        page.wait_for_selector("#diff-histogram")
        assert page.text_content("#detail-name") == changed["cast"]
        page.go_back()  # before the tensor was clicked
        page.wait_for_function("() => document.getElementById('detail').hidden")
        page.fill("#search", "")
        page.wait_for_function("() => !location.hash.includes('q=')")
        page.go_back()  # the filter was typed over the same entry: back goes to before "all"
        page.wait_for_function("() => document.getElementById('diff-filter').value === 'changes'")
        assert hash_of(page) == {}  # the address the page was opened at


def test_copy_link_and_copy_name(browser: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=f"http://127.0.0.1:{server.port}")
        page = context.new_page()
        page.goto(server.url)
        wait_ready(page)
        page.click("button[data-tab=table]")
        page.click(f"#table .row[data-tensor='{QUERY}']")
        page.click("#copy-link")
        page.wait_for_function("() => document.getElementById('copy-link').textContent === 'Copied'")
        link = page.evaluate("navigator.clipboard.readText()")
        assert link == page.url and parse_qs(link.split("#", 1)[1]) == {"tab": ["table"], "t": [QUERY]}
        page.click("#copy-name")
        page.wait_for_function("() => document.getElementById('copy-name').textContent === 'Copied'")
        assert page.evaluate("navigator.clipboard.readText()") == QUERY
        # The link opens what was copied, in another tab of the same browser.
        other = context.new_page()
        other.goto(link)
        wait_ready(other)
        other.wait_for_selector("#heatmap")
        assert other.text_content("#detail-name") == QUERY
        context.close()


def test_full_names_are_tooltips(page: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        page.set_viewport_size({"width": 700, "height": 800})  # names cut short
        open_page(page, server.url)
        assert page.get_attribute("#title", "title") == str(minilm)
        page.click("button[data-tab=table]")
        cells = page.locator("#table .row[data-tensor] .name")
        cut = cells.evaluate_all("cs => cs.filter(c => c.scrollWidth > c.clientWidth).map(c => [c.textContent, c.title])")
        assert cut, "no name was cut short at 700 px"
        assert all(text == title for text, title in cut)
        page.click("button[data-tab=tree]")
        page.click("#tree .row[data-path=encoder]")
        title = page.get_attribute("#tree .row[data-path='encoder.layer'] .name", "title")
        assert title.startswith("encoder.layer — encoder.layer.[0–5] × 6: 16 tensors and 1,774,464 parameters each")


def test_the_exported_report_keeps_its_state_in_the_hash_too(page: Any, minilm: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    with ViewSession.open([str(minilm)]) as session:
        export_report(session, report, with_stats=True)
    page.goto(report.as_uri() + f"#tab=table&t={QUERY}&q=query")
    wait_ready(page)
    assert shown_state(page) == {"tab": "table", "query": "query", "detail": QUERY, "selected": [QUERY]}
    page.click("button[data-tab=tree]")
    assert hash_of(page)["tab"] == "tree"
    page.reload()
    wait_ready(page)
    assert shown_state(page)["tab"] == "tree"
    assert page.log.requests[-1].startswith(report.as_uri()) and page.log.errors == []
