"""The documentation site builds, and it shows what the code and the repository hold.

- ``mkdocs build --strict`` succeeds (the ``site`` fixture, conftest.py): no broken link or anchor,
  no API reference to a missing name, the CLI reference generated from the parser,
  SECURITY.md/RESULTS.md/CHANGELOG.md included.
- README.md stays a short front page: at most 10 KB, the two set-up commands first, a link to each
  docs page in the site's nav.

The examples in the pages run in test_doc_examples.py; test_api_reference.py checks that every
public name has an entry in the API reference.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from docs_helpers import DOCS, README, ROOT, SRC, doc_pages
from docs_helpers import html_text as _text

# --- the site builds -------------------------------------------------------------------------


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
    parsers = _walk(build_parser("*"))
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
    for parser in _walk(build_parser("*")):
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


def test_the_differences_from_upstream_are_listed_in_one_place() -> None:
    """docs/upstream-differences.md is the one list: the upstream names the alias cannot stand in for
    (kept equal to ``_alias.NOT_PROVIDED`` by tests/integration/test_alias.py) are named there, and on no
    other page, so no second copy of the list can go stale."""
    sys.path.insert(0, str(SRC))
    from pysafetensors._alias import NOT_PROVIDED

    # _getdtype: only paddle's is missing; numpy's and torch's exist, and pages may name them.
    names = {f"`{n}`" for names in NOT_PROVIDED.values() for n in names} - {"`_getdtype`"}
    home = DOCS / "upstream-differences.md"
    assert names <= set(re.findall(r"`[^`\n]+`", home.read_text(encoding="utf-8")))
    for page in doc_pages():
        if page != home:
            text = page.read_text(encoding="utf-8")
            assert not [n for n in names if n in text], f"{page.relative_to(ROOT)} repeats the list of differences"


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
    generated = {"reference/cli.md", "changelog.md", "security-policy.md", "benchmarks.md", "scale/index.md"}
    readme = README.read_text(encoding="utf-8")
    links = set(re.findall(r"\]\((docs/[^)#\s]+)", readme))
    # the two benchmark pages are generated from files under benchmarks/, which the README links
    for source in ("benchmarks/RESULTS.md", "benchmarks/scale/RESULTS.md"):
        assert f"]({source})" in readme, f"README has no link to {source}"
        assert (ROOT / source).is_file()
    for link in links:
        assert (ROOT / link).is_file(), f"README links {link}, which does not exist"
    for page in _nav_pages(config["nav"]):
        if page in generated or page.startswith("reference/api/") and page != "reference/api/index.md":
            continue
        assert f"docs/{page}" in links, f"README has no link to docs/{page}"
