"""The house's layers (shared/DESIGN.md): each module imports only its own layer and those below.

    errors <- format <- io <- reader/writer <- sharded <- adapters <- staging <- handle/_api/_incremental
           <- faces, convert, distributed, gguf <- tools <- _alias <- the package root <- cli, view

Every import statement counts, including the lazy ones inside functions, so a layer cannot reach
upward by hiding the import in a function body; and no module is part of an import cycle, inside
a layer either (two modules that import each other, however lazily, are one module in two files).
Imports under ``if TYPE_CHECKING:`` never run and are left out of the cycle check.  What is
imported by name at run time is the documented plugin/optional-dependency mechanism and is not an
import statement: ``_optional.require`` (third-party extras), the URL scheme registry
(``io.registry``), the framework adapters (``_adapters``) and the CLI's command table.
The command line and the viewer also use only the public names of the layers below them: a
``_private`` name or module imported from a lower layer fails.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
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
    "_incremental": 7,
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
    "_version": 0,
    "_lazy": 0,
    "tools": 10,
    "_alias": 11,
    "__init__": 12,
    "__version__": 12,  # the root's name, from _version
    "run": 13,
    "cli": 13,
    "view": 13,
    "__main__": 14,
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


# --- no cycles ---------------------------------------------------------------------------------


def _module_names() -> dict[str, Path]:
    """Dotted name -> file for every module of the package (a package by its ``__init__``)."""
    out = {}
    for path in _modules():
        parts = path.relative_to(PKG).with_suffix("").parts
        out[".".join(["pysafetensors", *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return out


def _graph() -> dict[str, dict[str, str]]:
    """module -> {module it imports: "module level" or "in a function"}, imports under
    ``if TYPE_CHECKING:`` left out.  ``from pkg import name`` is an import of the submodule
    ``pkg.name`` when there is one, else of ``pkg``."""
    modules = _module_names()

    def resolve(dotted: str) -> str:
        while dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted

    graph: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in ast.walk(f)}
        type_only = {id(n) for i in ast.walk(tree) if isinstance(i, ast.If) and "TYPE_CHECKING" in ast.unparse(i.test)
                     for n in ast.walk(i)}
        edges: dict[str, str] = {}
        for node in ast.walk(tree):
            if id(node) in type_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, node.module] if node.module else base)
                targets = [f"{module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] != "pysafetensors" or (imported := resolve(target)) == name:
                    continue
                if edges.get(imported) != "module level":
                    edges[imported] = "in a function" if id(node) in lazy else "module level"
        graph[name] = edges
    return graph


def _cycles(graph: Mapping[str, Mapping[str, str] | set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = _graph()
    assert "pysafetensors.io.sources" in graph["pysafetensors.io.registry"]  # the graph sees relative imports
    described = [
        " ; ".join(f"{a} -> {b} ({graph[a][b]})" for a in cycle for b in cycle if b in graph[a])
        for cycle in _cycles(graph)
    ]
    assert not described, "import cycles:\n" + "\n".join(described)
