"""The tests mirror ``src/``: every test lives in a folder named after the module or package it covers
(or one of a few cross-cutting subjects named below), the root of ``tests/`` holds only the shared
fixtures and helpers, and no test file grows past ~400 lines (split it by subject instead)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
PKG = TESTS.parent / "src" / "pysafetensors"

#: What may stand at the root of tests/: the shared fixtures and helpers every folder imports.
ROOT_FILES = {"conftest.py", "_helpers.py", "servers.py", "s3_servers.py"}

#: Folders whose name is not a module of src/pysafetensors, and what they cover.
SUBJECTS = {
    "api": "the top-level API (_api.py, handle.py's safe_open)",
    "read": "reader.py",
    "write": "writer.py",
    "frameworks": "the faces (numpy.py, torch.py, ...) end to end",
    "architecture": "the layering and purity of src/ and this layout",
    "reliability": "faults, crashes and differential verdicts across the layers",
    "integration": "the package installed under real clients, and the wheel",
    "corpus": "the valid/broken file corpus (data, no tests)",
    "benchmarks": "benchmarks/",
    "docs": "docs/ and README.md",
    "examples": "examples/",
}

MAX_LINES = 400


@cache
def _tracked() -> tuple[Path, ...]:
    """The project's files as git knows them (``git ls-files``): never a venv, build output or
    other untracked file that happens to lie in the checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=TESTS.parent, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:  # an unpacked sdist: no layout to check
        pytest.skip(f"not a git checkout: {e}")
    paths = (TESTS.parent / name for name in out.decode("utf-8").split("\0") if name)
    return tuple(p for p in paths if p.is_file())  # a file deleted but not yet staged is gone


def _tracked_tests() -> list[Path]:
    try:
        return sorted(p for p in _tracked() if p.suffix == ".py" and TESTS in p.parents)
    except pytest.skip.Exception:
        return []


def _src_names() -> set[str]:
    return {p.stem.lstrip("_") for p in PKG.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()}


def test_the_root_holds_only_shared_fixtures_and_helpers() -> None:
    loose = sorted(p.name for p in _tracked() if p.parent == TESTS and p.suffix == ".py" and p.name not in ROOT_FILES)
    assert loose == [], f"move these into the folder of the code they cover: {loose}"


def test_every_folder_is_a_module_of_src_or_a_named_subject() -> None:
    names = _src_names()
    assert {"format", "io", "sharded", "staging", "gguf"} <= names  # the check itself sees src/
    folders = sorted({p.relative_to(TESTS).parts[0] for p in _tracked() if TESTS in p.parents and p.parent != TESTS})
    unknown = [f for f in folders if f.lstrip("_") not in names and f not in SUBJECTS]  # _adapters/: src's _adapters
    assert unknown == [], f"name a tests/ folder after the src/pysafetensors module it covers: {unknown}"


@pytest.mark.parametrize("path", _tracked_tests(), ids=lambda p: p.relative_to(TESTS).as_posix())
def test_no_file_is_longer_than_the_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(TESTS)} has {lines} lines: split it by subject"


#: Where the project names its test files (CHANGELOG.md records history: the paths as they were then).
_NAMED_IN = (".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt")
_TEST_PATH = re.compile(r"(?<![\w/.-])tests/[\w/.-]*\.py\b")


def _project_texts() -> list[Path]:
    return [p for p in _tracked() if p.name.endswith(_NAMED_IN) and p.name != "CHANGELOG.md"]


def test_the_layout_is_read_from_git_not_the_working_directory() -> None:
    """A venv or build folder inside the checkout is not part of the project: only tracked files count."""
    tracked = set(_tracked())
    assert TESTS / "conftest.py" in tracked and TESTS / "architecture" / "test_tests_layout.py" in tracked
    assert not any(part.startswith(".venv") or part == "site-packages" for p in tracked for part in p.parts)


def test_every_test_file_named_in_the_project_exists() -> None:
    """A docstring, doc page or config naming ``tests/<folder>/<file>.py`` names a file that is
    there (files move when the layout above is kept: the references move with them)."""
    texts = _project_texts()
    assert TESTS / "architecture" / "test_tests_layout.py" in texts  # the scan sees tests/ itself
    stale = sorted(
        f"{path.relative_to(TESTS.parent)}: {m}"
        for path in texts
        for m in _TEST_PATH.findall(path.read_text(encoding="utf-8", errors="replace"))
        if not (TESTS.parent / m).is_file()
    )
    assert stale == [], f"these name test files that are not there: {stale}"
