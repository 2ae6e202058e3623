"""The page in a real browser: Debian's Chromium driven by Playwright, against the real server and
the exported report."""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import numpy as np

from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.stats import tensor_stats
from pysafetensors.view import ViewSession, export_report

from .conftest import THUMBNAIL, canvas_ink, open_page, serving

QUERY = "encoder.layer.0.attention.self.query.weight"


def only_from(log: Any, origin: str) -> None:
    """Every request went to ``origin`` (the page's own server, or the report's file): no CDN, no leak."""
    assert log.requests, "no request recorded"
    stray = [u for u in log.requests if not u.startswith((origin, "data:"))]
    assert stray == [], stray


def texts(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_text_contents()]


def test_page_loads_with_the_parameter_count(page: Any, minilm: Path) -> None:
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        assert page.url == f"http://127.0.0.1:{server.port}/"  # the token left the address bar
        assert page.text_content("#param-count .value") == "22,713,728"
        assert page.text_content("#tensor-count .value") == "104"
        assert texts(page, "#dtypes td")[:2] == ["F32", "22,713,216"]
        assert texts(page, "#metadata td") == ["format", "pt"]
        only_from(page.log, f"http://127.0.0.1:{server.port}/")
        assert page.log.errors == []


def test_search_filters_the_tree(page: Any, minilm: Path) -> None:
    with open_checkpoint(str(minilm)) as ckpt:
        names = [t.name for t in ckpt.tensors]
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=tree]")
        # Collapsed by default: the three top-level groups with their subtree totals.
        assert page.locator("#tree .row[data-k]").count() == 3
        # tensors, parameters, bytes, share of all parameters (a group's name spans dtype and shape: it has none)
        assert texts(page, "#tree .row[data-path=encoder] .cell") == ["96", "10,646,784", "42.6 MB", "46.9%"]
        for query in ("attention.self.query", "*.attention.self.*.bias", "encoder.layer.[0-2].output.dense.weight"):
            box = page.locator("#search")
            box.fill("")
            box.press_sequentially(query)
            expected = [n for n in names if (fnmatchcase(n, query) if "*" in query or "[" in query else query in n)]
            page.wait_for_function("t => document.getElementById('match-count').textContent === t",
                                   arg=f"{len(expected)} of 104 tensors")
            shown = page.locator("#tree .row[data-k]").evaluate_all("rows => rows.map(r => r.dataset.tensor)")
            assert sorted(shown) == sorted(expected) and expected
        page.locator("#search").fill("")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '104 tensors'")
        page.click("#tree .row[data-path=encoder]")
        assert page.locator("#tree .row[data-path='encoder.layer']").count() == 1


def test_clicking_a_tensor_shows_stats_histogram_and_heatmap(page: Any, minilm: Path) -> None:
    with open_checkpoint(str(minilm)) as ckpt:
        expected = tensor_stats(ckpt, QUERY)
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        page.locator("#search").press_sequentially("layer.0.attention.self.query")
        page.click(f"#table .row[data-tensor='{QUERY}']")
        page.wait_for_selector("#heatmap")
        assert page.text_content("#detail-name") == QUERY
        stats = dict(zip(texts(page, "#stats td.key"), texts(page, "#stats td.val")))
        for key in ("min", "max", "mean", "std"):
            assert stats[key] == page.evaluate("x => fmtNum(x)", getattr(expected, key)), key
        assert stats["elements"] == "147,456" and stats["nan"] == "0"
        assert canvas_ink(page, "#histogram") > 100
        assert canvas_ink(page, "#heatmap") > 10_000
        assert "384 × 384 matrix in 384 × 384 cells" in page.text_content("#values")
        # A 1-D tensor: stats and histogram, no heatmap.
        page.locator("#search").fill("embeddings.LayerNorm.bias")
        page.click("#table .row[data-tensor='embeddings.LayerNorm.bias']")
        page.wait_for_selector("#histogram")
        assert page.locator("#heatmap").count() == 0
        assert page.log.errors == []


def test_a_tensor_whose_read_fails_shows_the_error_and_the_server_goes_on(page: Any, minilm: Path) -> None:
    from servers import RangeServer

    with RangeServer({"model.safetensors": minilm.read_bytes()}) as origin, \
            serving(ViewSession.open([origin.url("model.safetensors")])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        page.locator("#search").press_sequentially("layer.0.attention.self.query")
        origin.fail_status, origin.fail_first = 404, 1_000  # the file is gone from the server
        page.click(f"#table .row[data-tensor='{QUERY}']")
        page.wait_for_selector("#stats-error")
        assert QUERY in page.text_content("#stats-error")
        origin.fail_first = 0
        page.click("#table .row[data-tensor='encoder.layer.0.attention.self.query.bias']")
        page.wait_for_selector("#histogram")
        page.click(f"#table .row[data-tensor='{QUERY}']")  # a failure is not remembered: asked again
        page.wait_for_selector("#heatmap")


def test_the_thumbnail_renders_as_an_image(page: Any, tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "spec.safetensors"
    save_file({"w": np.ones((2, 3), np.float32)}, str(path), metadata={
        "modelspec.sai_model_spec": "1.0.0", "modelspec.title": "Orange", "modelspec.thumbnail": THUMBNAIL})
    text_only = tmp_path / "text.safetensors"
    svg = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="
    save_file({"w": np.ones(2, np.float32)}, str(text_only), metadata={"modelspec.thumbnail": svg})
    with serving(ViewSession.open([str(path)])) as server:
        open_page(page, server.url)
        img = page.locator("img#thumbnail")
        page.wait_for_function("() => document.getElementById('thumbnail').complete")
        assert img.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [12, 8]
        pixel = img.evaluate("""i => { const c = document.createElement('canvas'); c.width = 12; c.height = 8;
            const g = c.getContext('2d'); g.drawImage(i, 0, 0); return Array.from(g.getImageData(5, 4, 1, 1).data); }""")
        assert pixel == [240, 120, 20, 255]
        assert "Orange" in page.text_content("#modelspec")
        assert THUMBNAIL not in page.text_content("#modelspec")  # shown as the picture, not as base64
    with serving(ViewSession.open([str(text_only)])) as server:
        open_page(page, server.url)
        assert page.locator("img").count() == 0
        assert svg in page.text_content("#modelspec")  # not an allowed image: text


def test_the_diff_page_lists_changed_tensors_and_compares_values(page: Any, edited_pair: Any) -> None:
    a, b, changed = edited_pair
    with serving(ViewSession.open([str(a), str(b)])) as server:
        open_page(page, server.url)
        assert page.locator("button[data-tab=diff].active").count() == 1
        assert page.text_content("#diff-changed .value") == "2"
        assert page.text_content("#diff-added .value") == "1" and page.text_content("#diff-removed .value") == "1"
        rows = page.locator("#diff-list .row[data-k]").evaluate_all("rs => rs.map(r => [r.dataset.tensor, r.dataset.kind])")
        # The nudged tensor keeps its dtype and shape: its bytes, compared, differ.
        assert sorted(rows) == sorted([[changed["cast"], "changed"], [changed["reshaped"], "changed"],
                                       [changed["added"], "added"], [changed["removed"], "removed"],
                                       [changed["nudged"], "values differ"]])
        assert page.text_content("#diff-result .value") == "different"
        assert page.text_content("#diff-identical .value") == "100"  # 103 both hold, 2 changed, 1 differs
        assert "note" in page.text_content("#diff-metadata")
        page.click(f"#diff-list .row[data-tensor='{changed['cast']}']")
        page.wait_for_selector("#diff-histogram")
        numbers = dict(zip(texts(page, "#value-diff-numbers td.key"), texts(page, "#value-diff-numbers td.val")))
        assert numbers["compared"] == "yes" and numbers["elements"] == "589,824"
        assert canvas_ink(page, "#diff-histogram") > 50
        page.click(f"#diff-list .row[data-tensor='{changed['reshaped']}']")
        page.wait_for_function("() => document.getElementById('value-diff-numbers')"
                               " && document.getElementById('value-diff-numbers').textContent.includes('shapes differ')")
        page.select_option("#diff-filter", "all")
        page.locator("#search").press_sequentially(changed["nudged"])
        page.click(f"#diff-list .row[data-tensor='{changed['nudged']}']")
        page.wait_for_selector("#diff-histogram")
        numbers = dict(zip(texts(page, "#value-diff-numbers td.key"), texts(page, "#value-diff-numbers td.val")))
        assert numbers["differing"] == "8"
        assert page.log.errors == []


def test_the_exported_report_opens_from_file_with_no_network_request(page: Any, edited_pair: Any, tmp_path: Path) -> None:
    a, b, changed = edited_pair
    one, two = tmp_path / "one.html", tmp_path / "two.html"
    with ViewSession.open([str(a)]) as session:
        export_report(session, one, with_stats=True)
    with ViewSession.open([str(a), str(b)]) as session:
        export_report(session, two, with_stats=True)
    open_page(page, one.as_uri())
    assert page.text_content("#param-count .value") == "22,713,728"
    page.click("button[data-tab=table]")
    page.locator("#search").press_sequentially(QUERY)
    page.click(f"#table .row[data-tensor='{QUERY}']")
    page.wait_for_selector("#histogram")
    assert canvas_ink(page, "#histogram") > 100
    assert "live viewer" in page.text_content("#values")  # no heatmap in a report
    only_from(page.log, one.as_uri())
    assert page.log.requests == [one.as_uri()]
    assert page.log.errors == []  # the CSP hashes admit the inline script and style

    page.log.requests.clear()
    open_page(page, two.as_uri())
    # diff --values over the 103 tensors both hold: nudged, cast (F16 rounding) and reshaped (not comparable).
    assert page.text_content("#diff-values .value") == "3 of 103 differ"
    page.click(f"#diff-list .row[data-tensor='{changed['cast']}']")
    numbers = dict(zip(texts(page, "#value-diff-numbers td.key"), texts(page, "#value-diff-numbers td.val")))
    assert numbers["compared"] == "yes"
    assert page.log.requests == [two.as_uri()]
    assert page.log.errors == []


MARKERS = ["__pwned1", "__pwned2", "__pwned3", "__pwned4", "__pwned5", "__pwned6"]
ATTACK_NAMES = [
    '<img src=x onerror="window.__pwned1=1">',
    "<script>window.__pwned2=1</script>",
    '"><svg onload=window.__pwned3=1>',
    "javascript:window.__pwned4=1",
    "__proto__",
    "constructor",
    "a.<img src=x onerror=window.__pwned5=1>.b",
    "</script><script>window.__pwned6=1</script>",
]


def attack_file(path: Path) -> None:
    from pysafetensors.numpy import save_file

    tensors = {name: np.full((2, 2), i, np.float32) for i, name in enumerate(ATTACK_NAMES)}
    save_file(tensors, str(path), metadata={
        '<img src=x onerror="window.__pwned1=1">': "<script>window.__pwned2=1</script>",
        "__proto__": '{"polluted": 1}',
        "modelspec.title": '<svg onload="window.__pwned3=1">',
        "modelspec.thumbnail": "javascript:window.__pwned4=1",
        "modelspec.description": "</script><script>window.__pwned6=1</script><!--",
    })


def exercise(page: Any) -> None:
    """Visit every view of the page and click every tensor, group and row it offers."""
    for tab in ("overview", "tree", "table"):
        page.click(f"button[data-tab={tab}]")
        if tab == "tree":
            for _ in range(4):  # expand every group, level by level
                for row in page.locator("#tree .row.group").all():
                    if "▸" in (row.text_content() or ""):
                        row.click()
            for row in page.locator("#tree .row[data-tensor]").all():
                row.click()
        if tab == "table":
            for row in page.locator("#table .row[data-tensor]").all():
                row.click()
                page.wait_for_selector("#stats, #values p")
            page.locator("#search").press_sequentially("<img")
            # The filter applies after a short debounce: wait for its result, a state that holds.
            page.wait_for_function("() => document.getElementById('match-count').textContent === '2 of 8 tensors'")
            assert texts(page, "#table .row[data-tensor] .name") == sorted(n for n in ATTACK_NAMES if "<img" in n)


def check_shown_as_text(page: Any) -> None:
    """The hostile strings are on the page as the very text they are: metadata keys and values
    on the Overview, the ModelSpec fields (the javascript: thumbnail as text, not an image)."""
    page.click("button[data-tab=overview]")
    metadata = dict(zip(texts(page, "#metadata td.key"), texts(page, "#metadata td.val")))
    assert metadata == {'<img src=x onerror="window.__pwned1=1">': "<script>window.__pwned2=1</script>",
                        "__proto__": '{"polluted": 1}'}
    spec = dict(zip(texts(page, "#modelspec-fields td.key"), texts(page, "#modelspec-fields td.val")))
    assert spec == {"title": '<svg onload="window.__pwned3=1">', "thumbnail": "javascript:window.__pwned4=1",
                    "description": "</script><script>window.__pwned6=1</script><!--"}


def test_hostile_names_and_metadata_never_run(page: Any, tmp_path: Path) -> None:
    path = tmp_path / "attack.safetensors"
    attack_file(path)
    report = tmp_path / "attack.html"
    with ViewSession.open([str(path)]) as session:
        export_report(session, report, with_stats=True)
    with serving(ViewSession.open([str(path)])) as server:
        open_page(page, server.url)
        exercise(page)
        check_shown_as_text(page)
        leaked = page.evaluate("ms => ms.filter(m => m in window)", MARKERS)
        images = page.evaluate("() => document.images.length + document.querySelectorAll('svg, iframe, object').length")
        assert page.evaluate("() => document.scripts.length") == 1  # static/app.js
        polluted = page.evaluate("() => ({}).polluted")
        origin = f"http://127.0.0.1:{server.port}/"
        assert not [u for u in page.log.requests if u.startswith(origin) and u.rstrip("/").endswith("/x")]
        only_from(page.log, origin)
    assert leaked == [] and images == 0 and polluted is None
    page.log.requests.clear()
    open_page(page, report.as_uri())
    exercise(page)
    check_shown_as_text(page)
    assert page.evaluate("ms => ms.filter(m => m in window)", MARKERS) == []
    assert page.evaluate("() => document.images.length + document.querySelectorAll('svg, iframe, object').length") == 0
    assert page.evaluate("() => document.scripts.length") == 2  # the data block and the page's script
    assert page.log.requests == [report.as_uri()]
    assert not [e for e in page.log.errors if "uncaught" in e]


def test_a_hundred_thousand_tensors_render_lazily(page: Any, big_header: Any) -> None:
    path, names = big_header
    with serving(ViewSession.open([str(path)])) as server:
        open_page(page, server.url)
        assert page.text_content("#tensor-count .value") == "100,000"
        page.click("button[data-tab=table]")
        assert page.text_content("#match-count") == "100,000 of 100,000 tensors"
        assert page.locator("#table .row[data-k]").count() < 100  # only the rows in view exist
        page.locator("#table").evaluate("b => { b.scrollTop = b.scrollHeight; b.dispatchEvent(new Event('scroll')); }")
        page.wait_for_selector(f"#table .row[data-tensor='{names[-1]}']")
        for query in ("layers.7.experts.12", "*.experts.99?.w"):
            page.locator("#search").fill("")
            page.locator("#search").press_sequentially(query)
            expected = [n for n in names if (fnmatchcase(n, query) if "*" in query else query in n)]
            page.wait_for_function("t => document.getElementById('match-count').textContent === t",
                                   arg=f"{len(expected):,} of 100,000 tensors")
            assert len(expected) in (11, 1000)
        page.click("button[data-tab=tree]")  # the query carries over to the tree
        assert page.text_content("#match-count") == "1,000 of 100,000 tensors"
        page.locator("#search").fill("")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '100,000 tensors'")
        assert page.locator("#tree .row[data-k]").count() == 1  # "model", collapsed
