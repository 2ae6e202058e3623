"""The page's table and tree in a real browser (Debian's Chromium driven by Playwright): sorting by a
column header, and the tree's groups for names with empty parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.view import ViewSession

from .conftest import open_page, serving


def shown(page: Any, selector: str) -> list[str]:
    """The ``data-tensor`` (or ``data-path``) of the rows drawn, top to bottom."""
    return page.locator(selector).evaluate_all("rows => rows.map(r => r.dataset.tensor ?? r.dataset.path)")


def sort_by(page: Any, key: str, arrow: str) -> None:
    page.click(f"#table [data-sort={key}]")
    page.wait_for_function("([k, a]) => document.querySelector(`#table [data-sort=${k}]`).textContent.endsWith(a)",
                           arg=[key, arrow])


def test_clicking_a_column_header_sorts_the_table(page: Any, minilm: Path) -> None:
    with open_checkpoint(str(minilm)) as ckpt:
        names = [t.name for t in ckpt.tensors]  # file order
        params = [t.nelements for t in ckpt.tensors]
    by_name = sorted(names)
    by_params = [names[i] for i in sorted(range(len(names)), key=lambda i: (params[i], i))]  # ties: file order
    assert by_name[:5] != names[:5] and by_params[:5] != names[:5]
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        rows = shown(page, "#table .row[data-tensor]")
        assert 10 < len(rows) < len(names) and rows == names[: len(rows)]  # file order (data offsets) first
        n = len(rows)
        sort_by(page, "name", " ▴")
        assert shown(page, "#table .row[data-tensor]") == by_name[:n]
        sort_by(page, "name", " ▾")  # the same header again: descending
        assert shown(page, "#table .row[data-tensor]") == by_name[::-1][:n]
        sort_by(page, "params", " ▴")
        assert shown(page, "#table .row[data-tensor]") == by_params[:n]
        cells = [t.replace(",", "") for t in page.locator("#table .row[data-tensor] .cell.params").all_text_contents()]
        assert [int(c) for c in cells] == sorted(params)[:n]
        sort_by(page, "params", " ▾")
        assert shown(page, "#table .row[data-tensor]") == by_params[::-1][:n]
        assert page.log.errors == []


def test_groups_of_names_with_empty_parts_expand_on_their_own(page: Any, tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "dots.safetensors"
    # ".x.a" sits under group "" then group "x", beside a top-level group "x" ("x.b"); "a..b" under "a" then "".
    save_file({n: np.zeros(i + 1, np.float32) for i, n in enumerate([".x.a", "x.b", "a..b"])}, str(path))
    with serving(ViewSession.open([str(path)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=tree]")
        assert shown(page, "#tree .row[data-k]") == ["", "a", "x"]
        page.click("#tree .row[data-path='']")
        assert shown(page, "#tree .row[data-k]") == ["", ".x", "a", "x"]  # the inner "x" is ".x", not the top-level "x"
        page.click("#tree .row[data-path='x']")
        assert shown(page, "#tree .row[data-k]") == ["", ".x", "a", "x", "x.b"]  # ".x" stays collapsed
        page.click("#tree .row[data-path='.x']")
        page.click("#tree .row[data-path='a']")
        page.click("#tree .row[data-path='a.']")
        assert shown(page, "#tree .row[data-k]") == ["", ".x", ".x.a", "a", "a.", "a..b", "x", "x.b"]
        labels = [t.strip().lstrip("▾▸") for t in page.locator("#tree .row[data-k] .name").all_text_contents()]
        assert labels == ['""', "x", "a", "a", '""', "b", "x", "b"]  # a tensor's label: its name after its group's path
        counts = [t.strip() for t in page.locator("#tree .row.group .cell.count").all_text_contents()]
        assert counts == ["1"] * 5
        assert page.log.errors == []
