"""``pysafetensors view INPUT [INPUT2]``: the checkpoint in the browser, or compared with a second.

A thin shell over :mod:`pysafetensors.view`: it opens the inputs (as every command does), builds
the page's data from the headers, then either serves it on 127.0.0.1 (a random port unless
``--port``) and prints the URL with its access token, opening the default browser unless
``--no-browser``, until Ctrl-C or SIGTERM (:mod:`._stopper`: SIGTERM ends it in any case); or, with ``--export FILE``, writes one self-contained HTML
report and exits (``--with-stats`` streams the data once to add every tensor's stats and
histogram, with a progress bar on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import os
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..io.redact import redact_text
from ..io.registry import url_scheme
from ._common import bar_enabled, emit, escape_text, fmt_bytes, progress_factory
from ._inputs import open_input
from ._stopper import Stopper

if TYPE_CHECKING:
    from ..tools.checkpoint import AnyCheckpoint
    from ..view import ViewSession

DEFAULT_HOST = "127.0.0.1"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return value


EXAMPLES = """\
examples:
  pysafetensors view model.safetensors
  pysafetensors view base.safetensors finetuned.safetensors --no-browser --port 8765
  pysafetensors view model.safetensors --export report.html --with-stats
"""


DESCRIPTION = "Serve a page showing the checkpoint on 127.0.0.1 (Ctrl-C stops), or write it as one HTML file."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="INPUT", help="file (.safetensors or .gguf), URL, index JSON or checkpoint directory")
    p.add_argument("b", metavar="INPUT2", nargs="?", help="a second checkpoint: the page shows their diff")
    p.add_argument("--port", type=_port, default=0, help="port to listen on (default: a free one)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="address to listen on (default 127.0.0.1; any other prints a warning)")
    p.add_argument("--no-browser", action="store_true", help="print the URL without opening a browser")
    p.add_argument("--export", metavar="FILE_OR_URL",
                   help="write a self-contained HTML report instead of serving: a path or a store URL "
                        "(s3://bucket/report.html, memory://...; -o options apply), written all or nothing")
    p.add_argument("--with-stats", action="store_true",
                   help="with --export: add every tensor's stats and histogram (reads all the data once)")


def _host_warning(host: str, port: int) -> str | None:
    if host == DEFAULT_HOST:
        return None
    try:
        loopback = ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = host.lower() == "localhost"
    if loopback:
        return f"warning: listening on {host}:{port}, not {DEFAULT_HOST} (still only this machine)"
    return (f"warning: listening on {host}:{port}, not {DEFAULT_HOST}: other machines that can reach this address "
            "can connect; the page still needs the URL's token")


# Seconds the redirect file waits for the browser to open the page before it is removed.
BROWSER_WAIT = 30.0
_REDIRECT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<meta http-equiv="refresh" content="0;url={url}"><title>pysafetensors view</title></head>
<body><p>Opening pysafetensors view: <a href="{url}">continue</a>.</p></body></html>
"""


def _redirect_file(url: str) -> str:
    """A new HTML file, mode 0600, that sends the browser on to ``url``; its path.

    The browser is started with this file's name on its command line, never the URL itself:
    any local user reads a process's command line (``/proc/PID/cmdline`` is world-readable),
    and the URL carries the token.  The file is readable by this user only (as Jupyter does).
    """
    import html
    import tempfile

    fd, path = tempfile.mkstemp(prefix="pysafetensors-view-", suffix=".html")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, _REDIRECT.format(url=html.escape(url, quote=True)).encode("utf-8"))
    finally:
        os.close(fd)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def _open_browser(url: str, visited: threading.Event | None = None, wait: float = BROWSER_WAIT) -> None:
    """Open the default browser (``BROWSER`` or webbrowser's choice) on a redirect file to
    ``url`` (:func:`_redirect_file`), and remove that file once the page has traded its token
    (``visited``, set by the server), after ``wait`` seconds, or at exit, whichever comes first."""
    import atexit
    import webbrowser
    from pathlib import Path

    path = _redirect_file(url)

    def remove() -> None:
        _remove(path)

    atexit.register(remove)  # the process may end first
    try:
        try:
            opened = webbrowser.open(Path(path).as_uri())
        except Exception:  # noqa: BLE001 - a browser that fails to start is not an error of the viewer
            opened = False
        if not opened:
            if sys.stderr is not None:
                print("pysafetensors: could not open a browser; open the URL above", file=sys.stderr)
        elif visited is not None and not visited.wait(wait) and sys.stderr is not None:
            print(f"pysafetensors: the browser has not opened the page after {wait:.0f} s; open the URL above "
                  "(a sandboxed browser may not see the temporary directory: set TMPDIR to one it sees)",
                  file=sys.stderr)
    finally:
        remove()
        atexit.unregister(remove)


# Seconds before a slow start (a huge header, a slow network) says what it is doing.
SLOW_START = 1.0


@contextlib.contextmanager
def _notice_if_slow(message: str, enabled: bool, after: float = SLOW_START) -> Iterator[None]:
    """Print ``message`` on stderr if the block takes longer than ``after`` seconds: the URL
    comes once the inputs are open, and a silent wait looks like a hang.  Like the progress
    bars: only when ``enabled`` (not ``--quiet``) and stderr is a terminal."""
    if not enabled or sys.stderr is None or not sys.stderr.isatty():
        yield
        return

    def say() -> None:
        print(message, file=sys.stderr, flush=True)

    timer = threading.Timer(after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def run(args: argparse.Namespace) -> int:
    from ._options import UsageError

    if args.with_stats and not args.export:
        raise UsageError("pysafetensors view: error: --with-stats needs --export FILE (see --help)")
    export_options: dict[str, Any] | None = None
    if args.export:
        # Checked before any input is read: a report that cannot be written is refused at once.
        if url_scheme(args.export) in ("http", "https"):
            raise UsageError("pysafetensors view: error: --export cannot write to an http(s) URL; give a file path "
                             "or a store URL (s3://, gs://, memory://...)")
        export_options = args.remote.for_path(args.export) or None
    # Serving: SIGINT and SIGTERM stop it from here on, before the server's modules load, the
    # inputs are opened and the port bound (a signal inherited as ignored is lost until a handler
    # is set), and SIGTERM ends it in any case (_stopper).
    with contextlib.nullcontext() if args.export else Stopper():
        from ..view import ViewSession, export_report  # the server's modules load only for this command

        opened: list[AnyCheckpoint] = []
        try:
            for path in [args.a] + ([args.b] if args.b is not None else []):
                notice = f"pysafetensors view: reading {escape_text(redact_text(path))}..."
                with _notice_if_slow(notice, bar_enabled(args)):
                    opened.append(open_input(path, args.remote, gguf=True))
        except BaseException:
            for c in opened:
                c.close()
            raise
        with ViewSession(opened) as session:
            if args.export:
                size = export_report(session, args.export, args.with_stats, progress_factory(args), export_options)
                emit(f"wrote {escape_text(redact_text(args.export))}: {fmt_bytes(size)}")
                return 0
            return _serve(session, args)


def _serve(session: ViewSession, args: argparse.Namespace) -> int:
    from ..view import ViewServer

    session.document_json(progress_factory(args))  # built before listening: a bad input fails here
    try:
        server = ViewServer(session, args.host, args.port)
    except OSError as e:
        raise OSError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    try:
        warning = _host_warning(args.host, server.port)
        if warning and sys.stderr is not None:
            print(f"pysafetensors: {warning}", file=sys.stderr)
        labels = " vs ".join(escape_text(c.path) for c in session.inputs)
        if args.json:
            import json

            emit(json.dumps({"url": server.url, "host": args.host, "port": server.port}))
        else:
            emit(f"pysafetensors view: {labels}; open this URL (Ctrl-C stops the server):")
            emit(server.url)
        sys.stdout.flush()
        if not args.no_browser:
            threading.Thread(target=_open_browser, args=(server.url, server.visited), daemon=True).start()
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()  # also ends every open connection
    if sys.stderr is not None:
        print("pysafetensors view: stopped", file=sys.stderr)
    return 0
