"""The house's layers (shared/DESIGN.md): each module imports only its own layer and those below.

    errors <- format <- io <- reader/writer <- sharded <- adapters <- staging <- handle/_api
           <- faces, convert, distributed, gguf <- tools <- the package root <- cli, view

Every import counts, including the lazy ones inside functions, so a layer cannot reach upward by
hiding the import in a function body.  The command line and the viewer also use only the public
names of the layers below them: a ``_private`` name or module imported from a lower layer fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "pysafetensors"

#: top-level module or package -> layer (lower numbers are further down)
LAYERS: dict[str, int] = {
    "errors": 0,
    "_optional": 1,
    "format": 1,
    "_device": 1,
    "io": 2,
    "reader": 3,
    "writer": 3,
    "sharded": 4,
    "_adapters": 5,
    "staging": 6,
    "handle": 7,
    "_api": 7,
    "gguf": 8,
    "_face": 9,
    "numpy": 9,
    "torch": 9,
    "flax": 9,
    "tensorflow": 9,
    "paddle": 9,
    "mlx": 9,
    "distributed": 9,
    "convert": 9,
    "tools": 10,
    "__init__": 11,
    "_alias": 11,
    "__version__": 11,
    "run": 12,
    "cli": 12,
    "view": 12,
    "__main__": 13,
}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "static" not in p.parts)


def _top(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module imported from, names imported) for every import in ``path``."""
    package = ["pysafetensors", *path.parent.relative_to(PKG).parts]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [a.name for a in node.names]
            if node.module is None:  # "from . import x": each name is a module
                out.extend((f"{module}.{n}", []) for n in names)
            else:
                out.append((module, names))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return [(m, n) for m, n in out if m == "pysafetensors" or m.startswith("pysafetensors.")]


def _own_top(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.name != "__init__.py" else "__init__"


def test_every_module_has_a_layer() -> None:
    missing = sorted({_own_top(p) for p in _modules()} - set(LAYERS))
    assert not missing, f"give these modules a layer in LAYERS: {missing}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_import_reaches_a_higher_layer(path: Path) -> None:
    own = _own_top(path)
    for module, names in _imports(path):
        targets = [module] if module != "pysafetensors" else [f"pysafetensors.{n}" for n in names] or [module]
        for target in targets:
            top = _top(target)
            if top not in LAYERS:  # "from pysafetensors import safe_open": the root's public names
                top = "__init__"
            assert LAYERS[top] <= LAYERS[own], f"{own} (layer {LAYERS[own]}) imports {target} (layer {LAYERS[top]})"


@pytest.mark.parametrize("top", ["cli", "view"])
def test_the_shells_use_public_names_only(top: str) -> None:
    for path in sorted((PKG / top).rglob("*.py")):
        for module, names in _imports(path):
            parts = module.split(".")
            if len(parts) > 1 and parts[1] == top:
                continue  # inside the shell itself
            private_modules = [p for p in parts[1:] if p.startswith("_") and p not in ("__init__", "__version__")]
            # _optional is the one place optional dependencies are imported (DESIGN rule 5).
            assert private_modules in ([], ["_optional"]), (path.name, module)
            private_names = [n for n in names if n.startswith("_") and n != "__version__"]
            assert not private_names, (path.name, module, private_names)
