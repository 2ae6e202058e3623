"""tools/ sits below cli/ (and the viewer): it never imports them, and cli/ uses only the public
modules of the layers below it (the tools' own private helpers stay inside tools/)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "pysafetensors"


def _imports(path: Path) -> list[str]:
    """Absolute dotted names of the modules ``path`` imports from."""
    package = ["pysafetensors", *path.parent.relative_to(PKG).parts]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                out.append(".".join(base + ([node.module] if node.module else [])))
            else:
                out.append(node.module or "")
        elif isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
    return out


def test_tools_never_import_the_cli_or_the_viewer() -> None:
    for path in (PKG / "tools").glob("*.py"):
        for name in _imports(path):
            assert not name.startswith(("pysafetensors.cli", "pysafetensors.view")), (path.name, name)


def test_cli_uses_public_modules_below_it() -> None:
    for path in (PKG / "cli").glob("*.py"):
        for name in _imports(path):
            parts = name.split(".")
            if parts[:2] == ["pysafetensors", "cli"] or parts[0] != "pysafetensors":
                continue
            private = [p for p in parts[1:] if p.startswith("_") and p != "__init__"]
            # _optional is the one place optional dependencies are imported (DESIGN rule 5).
            assert private in ([], ["_optional"]), (path.name, name)
