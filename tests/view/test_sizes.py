"""The page writes sizes and counts as the CLI does: app.js's fmtBytes gives the text of the CLI's
fmt_size (decimal units) for every size, and one tensor is "1 tensor"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pysafetensors.cli._common import fmt_size
from pysafetensors.view import ViewSession

from .conftest import open_page, serving

SIZES = [0, 1, 999, 1000, 1049, 1050, 1250, 11_408, 99_950, 999_949, 999_950, 90_868_376, 30_000_000,
         5 * 10**9, 2**40, 5 * 10**15]


def test_sizes_and_counts_are_the_clis(page: Any, minilm: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    sizes = SIZES + [int(x) for x in rng.integers(0, 10**13, 200)] + [int(10 ** rng.uniform(0, 15)) for _ in range(200)]
    with serving(ViewSession.open([str(minilm)])) as server:
        open_page(page, server.url)
        shown = page.evaluate("xs => xs.map(fmtBytes)", sizes)
        assert shown == [fmt_size(n) for n in sizes]
        assert page.text_content("#file-size .value") == "90.9 MB"  # inspect: 90,868,376 bytes (90.9 MB)
        assert page.text_content("#header-size .value") == "11.4 kB"
        page.click("button[data-tab=tree]")
        page.locator("#search").press_sequentially("pooler.dense.bias")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '1 of 104 tensors'")
        page.locator("#search").fill("")
        page.locator("#search").press_sequentially("embeddings.position_ids")
        page.wait_for_function("() => document.getElementById('match-count').textContent === '1 of 104 tensors'")
        assert page.evaluate("() => [plural(1, 'tensor'), plural(2, 'tensor'), plural(1000, 'tensor')]") == [
            "1 tensor", "2 tensors", "1,000 tensors"]
        assert page.log.errors == []
    from pysafetensors.numpy import save_file

    one = tmp_path / "one.safetensors"
    save_file({"w": np.zeros(3, np.float32)}, str(one))
    with serving(ViewSession.open([str(one)])) as server:
        open_page(page, server.url)
        page.click("button[data-tab=table]")
        assert page.text_content("#match-count") == "1 of 1 tensor"
        page.click("button[data-tab=tree]")
        assert page.text_content("#match-count") == "1 tensor"
        assert "1 tensors" not in str(page.text_content("#view"))
