"""Every public name has an entry in the API reference, so the reference cannot fall behind the code.

The public names are read from the source by griffe (the library mkdocstrings renders with), so no
framework is imported: every name in ``pysafetensors.__all__``, and for each module that a
``::: module`` directive in docs/reference/api/ documents, its ``__all__`` (or, without one, the
functions and classes it defines whose names do not start with ``_``).  Each must have an anchor
(``id="pysafetensors.x.name"``, under its own path or the module's) on a built reference page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _helpers import require
from docs_helpers import DOCS, SRC

griffe = require("griffe", "docs")

DIRECTIVE = re.compile(r"^:::\s*(?P<path>[\w.]+)\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    return griffe.load("pysafetensors", search_paths=[str(SRC)], resolve_aliases=True,
                       resolve_external=False)


@pytest.fixture(scope="module")
def anchors(site: Path) -> set[str]:
    found: set[str] = set()
    for page in (site / "reference" / "api").rglob("*.html"):
        found |= set(re.findall(r'\bid="(pysafetensors[\w.]*)"', page.read_text(encoding="utf-8")))
    return found


def directives() -> list[str]:
    return [m.group("path") for page in sorted((DOCS / "reference" / "api").glob("*.md"))
            for m in DIRECTIVE.finditer(page.read_text(encoding="utf-8"))]


def documented_modules(package: griffe.Module) -> list[griffe.Module]:
    modules = []
    for path in directives():
        obj = package.get_member(path.partition(".")[2]) if "." in path else package
        if isinstance(obj, griffe.Module):
            modules.append(obj)
    return modules


def public_names(module: griffe.Module) -> list[str]:
    if module.exports is not None:
        return sorted(str(name) for name in module.exports)
    return sorted(name for name, member in module.members.items()
                  if not name.startswith("_") and not member.is_alias and (member.is_function or member.is_class))


def _entries(module: griffe.Module, name: str) -> set[str]:
    """The anchors that document ``module.name``: under the module, or where it is defined."""
    member = module.members.get(name)  # None for a name griffe cannot see being bound (then no entry can exist)
    where = set() if member is None else {member.canonical_path if member.is_alias else member.path}
    return {f"{module.path}.{name}", *where}


def missing(module: griffe.Module, names: list[str], anchors: set[str]) -> list[str]:
    return [name for name in names if not (_entries(module, name) & anchors)]


def test_every_name_in_the_package_all_has_an_entry(package: griffe.Module, anchors: set[str]) -> None:
    names = public_names(package)
    assert {"safe_open", "install_as_safetensors", "uninstall_as_safetensors", "__version__"} <= set(names)
    assert missing(package, names, anchors) == []


def test_every_public_name_of_a_documented_module_has_an_entry(package: griffe.Module, anchors: set[str]) -> None:
    modules = documented_modules(package)
    paths = {m.path for m in modules}
    # The check sees the pages: the faces, and the modules the guides use from Python.
    assert {"pysafetensors.numpy", "pysafetensors.flax", "pysafetensors.errors", "pysafetensors.tools.checkpoint",
            "pysafetensors.gguf"} <= paths, paths
    gaps = {m.path: gap for m in modules if (gap := missing(m, public_names(m), anchors))}
    assert gaps == {}, f"public names with no entry in docs/reference/api/: {gaps}"


def test_the_check_finds_a_name_with_no_entry(package: griffe.Module, anchors: set[str]) -> None:
    numpy_face = package.get_member("numpy")
    assert missing(numpy_face, ["save_file"], anchors) == []
    assert missing(numpy_face, ["save_file"], anchors - {"pysafetensors.numpy.save_file"}) == ["save_file"]
