"""The viewer as one self-contained HTML file: the page's CSS and JS inline, the data embedded.

The report opens from disk with no server and makes no network request: its
Content-Security-Policy allows only the inline script and style it carries (by hash) and
``data:`` images, so neither a stray URL nor anything a hostile checkpoint smuggles into its
names or metadata can load or run.  The data is a JSON block (``type="application/json"``),
which browsers never execute, with every ``<`` escaped so no string can close the block.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

from ..io.sinks import AtomicFileSink
from .server import static_bytes


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _embed_json(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # "<" as \u003c keeps "</script>" and "<!--" out of the block; U+2028/2029 are legal in JSON.
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_report(data: Any, title: str) -> str:
    """The report's HTML text for ``data`` (the same document ``/api/checkpoint`` serves)."""
    css = static_bytes("app.css").decode("utf-8")
    js = static_bytes("app.js").decode("utf-8")
    csp = (
        f"default-src 'none'; script-src {_sha256_source(js)}; style-src {_sha256_source(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    page = static_bytes("index.html").decode("utf-8")
    head_links = '<link rel="stylesheet" href="static/app.css">\n<script src="static/app.js" defer></script>\n'
    if head_links not in page:  # the shipped index.html and this function change together
        raise RuntimeError("index.html does not reference static/app.css and static/app.js as expected")
    from html import escape

    inline_head = (
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp, quote=True)}">\n'
        f"<style>{css}</style>\n"
    )
    page = page.replace(head_links, inline_head)
    page = page.replace("<title>pysafetensors view</title>", f"<title>{escape(title)} — pysafetensors view</title>")
    body_end = "</body>"
    data_block = f'<script type="application/json" id="pst-data">{_embed_json(data)}</script>\n'
    # The data block comes first: the inline script reads it synchronously when it runs.
    page = page.replace(body_end, data_block + f"<script>{js}</script>\n" + body_end)
    return page


def write_report(data: Any, path: str | os.PathLike[str], title: str) -> int:
    """Write the report atomically (temp file + rename); returns its size in bytes."""
    body = render_report(data, title).encode("utf-8")
    sink = AtomicFileSink(path)
    try:
        sink.write([body])
        sink.commit()
    except BaseException:
        sink.abort()
        raise
    return len(body)


__all__ = ["render_report", "write_report"]
