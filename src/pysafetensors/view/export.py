"""The viewer as one self-contained HTML file: the page's CSS and JS inline, the data embedded.

The report opens from disk with no server and makes no network request: its
Content-Security-Policy (a ``<meta>`` ahead of everything else in ``<head>``) allows only the
inline script and style it carries, by hash, and ``data:`` images, so neither a stray URL nor
anything a hostile checkpoint smuggles into its names or metadata can load or run.  The data is a
JSON block (``type="application/json"``), which browsers never execute, with every ``<`` written
as ``\\u003c`` so no string can close the block.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from html import escape
from typing import Any

from ..io.targets import StorageOptions, open_sink
from ..tools import Progress, no_progress
from .data import ViewSession
from .server import static_bytes

_HEAD_LINKS = '<link rel="stylesheet" href="static/app.css">\n<script src="static/app.js" defer></script>\n'
_CHARSET = '<meta charset="utf-8">\n'


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def embed_json(data: Any) -> str:
    """``data`` as JSON text safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # "<" as \u003c keeps "</script>" and "<!--" out of the block; U+2028/2029 are legal in JSON.
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_report(data: Any, title: str) -> str:
    """The report's HTML text for ``data`` (the document ``/api/checkpoint`` serves)."""
    css = static_bytes("app.css").decode("utf-8")
    js = static_bytes("app.js").decode("utf-8")
    page = static_bytes("index.html").decode("utf-8")
    # The shipped files and this function change together: fail loudly, never write a broken page.
    if _HEAD_LINKS not in page or _CHARSET not in page or "</body>" not in page:
        raise RuntimeError("index.html does not have the structure the report is built from")
    if "</script" in js.lower() or "</style" in css.lower():
        raise RuntimeError("app.js/app.css must not contain a closing script/style tag")
    csp = (
        f"default-src 'none'; script-src {_sha256_source(js)}; style-src {_sha256_source(css)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    page = page.replace(_CHARSET, _CHARSET + f'<meta http-equiv="Content-Security-Policy" content="{escape(csp)}">\n', 1)
    page = page.replace(_HEAD_LINKS, f"<style>{css}</style>\n", 1)
    page = page.replace("<title>pysafetensors view</title>", f"<title>{escape(title)} — pysafetensors view</title>", 1)
    # The data block comes first: the inline script reads it when it runs.
    data_block = f'<script type="application/json" id="pst-data">{embed_json(data)}</script>\n'
    return page.replace("</body>", data_block + f"<script>{js}</script>\n</body>", 1)


def write_report(data: Any, path: str | os.PathLike[str], title: str, storage_options: StorageOptions = None) -> int:
    """Write the report all or nothing through the sink every writer uses (:func:`open_sink`):
    a path (temp file + rename) or an fsspec URL (``s3://``, ``memory://``...: streamed, published
    on commit, with ``storage_options``); an ``http(s)://`` target raises UnwritableTarget.
    Returns the report's size in bytes."""
    body = render_report(data, title).encode("utf-8")
    with open_sink(path, storage_options=storage_options) as sink:
        sink.write([body])
    return len(body)


def export_report(
    session: ViewSession, path: str | os.PathLike[str], with_stats: bool = False, progress: Progress = no_progress,
    storage_options: StorageOptions = None,
) -> int:
    """The session's checkpoint(s) as one HTML file at ``path`` (a path or an fsspec URL, see
    :func:`write_report`); returns its size in bytes.

    ``with_stats`` adds every tensor's stats and histogram (streaming each input once) and, for
    two inputs, the ``diff --values`` numbers.
    """
    data = session.document(with_stats=with_stats, progress=progress)
    title = " vs ".join(inp["label"] for inp in data["inputs"])
    return write_report(data, path, title, storage_options)


__all__ = ["embed_json", "export_report", "render_report", "write_report"]
