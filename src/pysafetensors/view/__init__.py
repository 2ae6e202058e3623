"""The viewer: a checkpoint (or two, compared) in the browser.

``pysafetensors view`` is a thin shell over this package:

* :mod:`.data`: :class:`ViewSession`, the inputs opened once and the JSON the page shows, built
  by the same ``pysafetensors.tools`` functions as ``inspect``, ``stats`` and ``diff``;
* :mod:`.server`: :class:`ViewServer`, a stdlib ThreadingHTTPServer on 127.0.0.1 with a per-run
  token, a Host check and read-only endpoints;
* :mod:`.export`: :func:`export_report`, the same page as one self-contained HTML file;
* ``static/``: the page itself (HTML, CSS, vanilla JavaScript; no build step, no CDN).
"""

from .data import ViewSession
from .export import export_report
from .server import ViewServer

__all__ = ["ViewServer", "ViewSession", "export_report"]
