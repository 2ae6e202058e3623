"""How the page looks, in a real browser (Debian's Chromium driven by Playwright): dark mode from
the system's preference and from the theme button (remembered), with legible text and canvases in
both; and a 420 px wide window where nothing runs off the page: the table's columns wrap, the
heatmap and its legend stay in their panel, no word of the diff's labels is broken, the metadata
table fits its content.  Screenshots go to the test's tmp_path (look at them)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pysafetensors.view import ViewSession

from .conftest import open_page, serving

QUERY = "encoder.layer.0.attention.self.query.weight"


def rgb(text: str) -> tuple[float, float, float]:
    m = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(?:, [\d.]+)?\)", text)
    assert m, text
    return tuple(int(v) / 255 for v in m.groups())  # type: ignore[return-value]


def luminance(c: tuple[float, float, float]) -> float:
    """WCAG 2's relative luminance."""
    lin = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(rgb(a)), luminance(rgb(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def colours(page: Any) -> dict[str, str]:
    """Computed colours of the page's main surfaces and texts."""
    return page.evaluate("""() => {
        const c = (sel, prop) => getComputedStyle(document.querySelector(sel))[prop];
        return {bg: c('body', 'backgroundColor'), fg: c('body', 'color'), card: c('header#top', 'backgroundColor'),
                muted: c('#theme', 'color'), tab: c('#tabs [aria-selected=true]', 'color'),
                tab_bg: c('#tabs [aria-selected=true]', 'backgroundColor')};
    }""")


def pixel(page: Any, selector: str, x: int, y: int) -> list[int]:
    return page.evaluate("([s, x, y]) => Array.from(document.querySelector(s).getContext('2d').getImageData(x, y, 1, 1).data)",
                         [selector, x, y])


def check_legible(c: dict[str, str]) -> None:
    assert contrast(c["fg"], c["bg"]) >= 7, c  # body text: AAA
    assert contrast(c["fg"], c["card"]) >= 7, c
    assert contrast(c["muted"], c["card"]) >= 4.5, c  # small grey labels: AA
    assert contrast(c["tab"], c["tab_bg"]) >= 4.5, c


def test_dark_mode_follows_the_system_and_stays_legible(browser: Any, minilm: Path, tmp_path: Path) -> None:
    seen = {}
    with serving(ViewSession.open([str(minilm)])) as server:
        for scheme in ("light", "dark"):
            context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
            page = context.new_page()
            open_page(page, server.url)
            c = colours(page)
            check_legible(c)
            seen[scheme] = luminance(rgb(c["bg"]))
            page.click("button[data-tab=table]")
            page.click(f"#table .row[data-tensor='{QUERY}']")
            page.wait_for_selector("#heatmap")
            card = rgb(c["card"])
            hist_bg = pixel(page, "#histogram", 2, 2)
            assert hist_bg[:3] == [round(v * 255) for v in card] or abs(luminance(tuple(v / 255 for v in hist_bg[:3])) - luminance(card)) < 0.02
            # The histogram's tallest bar against its background: a clear difference.
            bar = page.evaluate("""() => { const c = document.getElementById('histogram'), g = c.getContext('2d');
                for (let x = 0; x < c.width; x++) { const p = g.getImageData(x, 60, 1, 1).data;
                  const bg = g.getImageData(2, 2, 1, 1).data;
                  if (Math.abs(p[0] - bg[0]) + Math.abs(p[1] - bg[1]) + Math.abs(p[2] - bg[2]) > 120) return Array.from(p); }
                return null; }""")
            assert bar is not None
            assert contrast(f"rgb({bar[0]}, {bar[1]}, {bar[2]})", f"rgb({hist_bg[0]}, {hist_bg[1]}, {hist_bg[2]})") >= 3
            # The heatmap's middle colour (values near 0) is the page's tone: white on light, dark on dark.
            scale = [pixel(page, "#heatmap-scale", x, 5)[:3] for x in (0, 128, 255)]
            middle = luminance(tuple(v / 255 for v in scale[1]))
            assert (middle > 0.8) if scheme == "light" else (middle < 0.05), scale
            for end in (scale[0], scale[2]):  # the extremes stand out from the middle
                assert contrast(f"rgb({end[0]}, {end[1]}, {end[2]})", f"rgb({scale[1][0]}, {scale[1][1]}, {scale[1][2]})") >= 3
            page.screenshot(path=str(tmp_path / f"{scheme}.png"))
            context.close()
    assert seen["light"] > 0.9 and seen["dark"] < 0.02


def test_the_theme_button_overrides_the_system_and_is_remembered(browser: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light")
        page = context.new_page()
        open_page(page, server.url)
        bg = lambda: luminance(rgb(colours(page)["bg"]))
        assert page.text_content("#theme") == "Theme: auto" and bg() > 0.9
        page.click("button[data-tab=table]")
        page.click(f"#table .row[data-tensor='{QUERY}']")
        page.wait_for_selector("#histogram")
        light_canvas = pixel(page, "#histogram", 2, 2)
        page.click("#theme")
        assert page.text_content("#theme") == "Theme: dark" and bg() < 0.02
        check_legible(colours(page))
        assert pixel(page, "#histogram", 2, 2) != light_canvas  # the canvases are redrawn in the theme
        page.reload()
        page.wait_for_selector("body[data-ready]")
        assert page.text_content("#theme") == "Theme: dark" and bg() < 0.02  # remembered
        page.emulate_media(color_scheme="dark")
        page.click("#theme")
        assert page.text_content("#theme") == "Theme: light" and bg() > 0.9  # chosen over the system's dark
        page.click("#theme")
        assert page.text_content("#theme") == "Theme: auto" and bg() < 0.02  # back to the system's
        page.emulate_media(color_scheme="light")
        assert bg() > 0.9
        context.close()


def overflow(page: Any) -> list[str]:
    """Elements wider than the window or than their list: what would need a horizontal scroll."""
    return page.evaluate("""() => {
        const out = [], W = document.documentElement.clientWidth;
        if (document.documentElement.scrollWidth > W) out.push('page ' + document.documentElement.scrollWidth);
        for (const e of document.querySelectorAll('body *')) {
            if (e.closest('.offscreen, .sr-only, [hidden]')) continue;
            const r = e.getBoundingClientRect();
            if (r.width && (r.right > W + 0.5 || r.left < -0.5)) out.push((e.id || e.className || e.tagName) + ' ' + r.left + '..' + r.right);
        }
        for (const list of document.querySelectorAll('.vlist')) {
            if (list.scrollWidth > list.clientWidth) out.push(list.id + ' scrolls sideways');
            for (const row of list.querySelectorAll('.row')) {
                const box = row.getBoundingClientRect();
                if (row.scrollWidth > row.clientWidth) out.push('row ' + (row.dataset.tensor || row.dataset.path));
                for (const cell of row.children) {
                    const c = cell.getBoundingClientRect();
                    if (getComputedStyle(cell).display !== 'none' && (c.right > box.right + 0.5 || c.bottom > box.bottom + 0.5))
                        out.push('cell outside its row: ' + cell.className + ' of ' + (row.dataset.tensor || row.dataset.path));
                }
            }
        }
        return out;
    }""")


def broken_words(page: Any, selector: str) -> list[str]:
    """Words under ``selector`` that are split over two lines (a Range over a word then has two boxes);
    a name may break after a dot or an underscore (cosine_ / similarity), not elsewhere."""
    return page.evaluate("""(sel) => {
        const out = [];
        for (const root of document.querySelectorAll(sel)) {
            const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
            for (let n = walk.nextNode(); n; n = walk.nextNode()) {
                for (const m of n.textContent.matchAll(/[^\\s._]+[._]?/g)) {
                    const r = document.createRange();
                    r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
                    if (r.getClientRects().length > 1) out.push(m[0]);
                }
            }
        }
        return out;
    }""", selector)


def test_a_420_px_window(browser: Any, minilm: Path, edited_pair: Any, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 420, "height": 900})
    page = context.new_page()
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        assert overflow(page) == []
        page.screenshot(path=str(tmp_path / "overview-420.png"), full_page=True)
        page.click("button[data-tab=table]")
        assert page.get_attribute("#table", "class") == "vlist narrow"  # each row on two lines
        assert overflow(page) == []
        # Every column but the offsets is still shown: the name on its own line, the numbers below it.
        row = page.locator(f"#table .row[data-tensor='{QUERY}']")
        shown = row.evaluate("r => Array.from(r.children).filter(c => getComputedStyle(c).display !== 'none').map(c => c.textContent)")
        assert shown == [QUERY, "F32", "[384, 384]", "147,456", "589.8 kB"]
        name, dtype = row.locator(".name").bounding_box(), row.locator(".dtype").bounding_box()
        assert dtype["y"] >= name["y"] + name["height"] - 1  # below the name
        assert row.locator(".name").evaluate("n => n.scrollWidth <= n.clientWidth")  # the whole name fits
        row.click()
        page.wait_for_selector("#heatmap")
        assert overflow(page) == []
        panel = page.locator("#detail").bounding_box()
        for part in ("#heatmap", "#heatmap-scale", "#heatmap-legend", "#histogram", "#stats"):
            box = page.locator(part).bounding_box()
            assert panel["x"] <= box["x"] and box["x"] + box["width"] <= panel["x"] + panel["width"], part
        assert broken_words(page, "#heatmap-legend, #values p, #stats, #tensor-info, #detail-name") == []
        page.screenshot(path=str(tmp_path / "table-420.png"), full_page=True)
        page.click("button[data-tab=tree]")
        page.click("#tree .row[data-path=encoder]")
        assert overflow(page) == []
        page.screenshot(path=str(tmp_path / "tree-420.png"))
    a, b, changed = edited_pair
    with serving(ViewSession.open([str(a), str(b)])) as server:
        open_page(page, server.url)
        assert overflow(page) == []
        assert broken_words(page, ".card, #diff-list .cell, #diff-metadata, #diff-inputs dt") == []
        page.click(f"#diff-list .row[data-tensor='{changed['nudged']}']")
        page.wait_for_selector("#diff-histogram")
        assert overflow(page) == []
        assert broken_words(page, "#value-diff-numbers, #detail-name") == []
        page.screenshot(path=str(tmp_path / "diff-420.png"), full_page=True)
    context.close()


@pytest.mark.parametrize("width", [1280, 420])
def test_the_metadata_tables_fit_their_content(browser: Any, minilm: Path, edited_pair: Any, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        table = page.locator("#metadata").bounding_box()
        cells = page.locator("#metadata td").evaluate_all("cs => cs.map(c => c.getBoundingClientRect().width)")
        assert table["width"] < 200 and all(w < 120 for w in cells)  # "format: pt": no wide empty column
    a, b, _ = edited_pair
    with serving(ViewSession.open([str(a), str(b)])) as server:
        open_page(page, server.url)
        mark = page.locator("#diff-metadata th.mark").bounding_box()
        assert mark["width"] <= 40  # the +/-/~ column stays narrow
        assert broken_words(page, "#diff-metadata td.key") == []
    context.close()
