"""The README's screenshot of the viewer: made by scripts/screenshot_viewer.py, a small PNG, shown
by the README and the viewer guide; and the page's files are package data."""

from __future__ import annotations

import struct
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOT = ROOT / "docs" / "assets" / "viewer.png"


def test_the_screenshot_is_a_small_png_the_docs_show() -> None:
    data = SHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) <= 300 * 1024
    width, height = struct.unpack(">II", data[16:24])  # IHDR
    assert (width, height) == (1280, 900)
    assert "](docs/assets/viewer.png)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "](../assets/viewer.png)" in (ROOT / "docs" / "guides" / "viewer.md").read_text(encoding="utf-8")
    assert (ROOT / "scripts" / "screenshot_viewer.py").is_file()


def test_the_page_files_are_package_data() -> None:
    static = resources.files("pysafetensors.view").joinpath("static")
    for name in ("index.html", "app.js", "app.css"):
        text = static.joinpath(name).read_text(encoding="utf-8")
        assert text
        # the page builds text nodes only: no sink that parses a string as HTML
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "DOMParser"):
            assert sink not in text, sink
        assert "http://" not in text and "https://" not in text  # no CDN, nothing fetched from elsewhere
