"""griffe extension: the functions of the faces (numpy, torch, flax, ...), for the API reference.

Those modules make their public functions with one call,
``save, save_file, save_sharded, load, load_file = declare(__name__, adapter, framework=..., ...)``
(``pysafetensors._face.declare``), which writes each function's signature and docstring at import
time.  mkdocstrings reads the source without importing it, so it would see five undocumented
names.  This extension finds that assignment in a module's source, calls the same ``declare``
with the same keyword arguments (its adapter is only used when a function runs, so no framework
is imported), and gives griffe the functions it returns: the page shows exactly what ``help()``
shows at run time, and cannot drift from it.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path
from typing import Any

import griffe

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _declare_call(node: ast.AST) -> tuple[ast.Assign, ast.Call] | None:
    if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "declare"):
        return node, node.value
    return None


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _parameter(p: inspect.Parameter) -> griffe.Parameter:
    annotation = None if p.annotation is p.empty else str(p.annotation)
    default = None if p.default is p.empty else repr(p.default)
    return griffe.Parameter(p.name, annotation=annotation, kind=griffe.ParameterKind(p.kind.description),
                            default=default)


class DeclaredFaces(griffe.Extension):
    def on_module_members(self, *, node: Any, mod: griffe.Module, **kwargs: Any) -> None:
        if not isinstance(node, ast.Module):
            return
        found = next(filter(None, map(_declare_call, node.body)), None)
        if found is None:
            return
        assign, call = found
        (targets,) = assign.targets
        assert isinstance(targets, ast.Tuple), ast.dump(assign)
        names = [t.id for t in targets.elts if isinstance(t, ast.Name)]
        # Literal options shape signatures and docstrings; the others (``check``, ``storage_id``)
        # are callables used only when a function runs.
        options = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg and _literal(k.value)}
        if SRC not in sys.path:
            sys.path.insert(0, SRC)
        from pysafetensors import _face

        # ``face=`` names one of _face's tuples (which loads take a device).
        face = next((k.value.id for k in call.keywords if k.arg == "face" and isinstance(k.value, ast.Name)), "Face")
        functions = _face.declare(mod.path, adapter=None, face=getattr(_face, face), **options)  # type: ignore[arg-type]
        for name, function in zip(names, functions, strict=True):
            signature = inspect.signature(function)
            returns = signature.return_annotation
            member = griffe.Function(
                name,
                parameters=griffe.Parameters(*map(_parameter, signature.parameters.values())),
                returns=None if returns is signature.empty else str(returns),
                lineno=assign.lineno,
                endlineno=assign.end_lineno,
            )
            member.docstring = griffe.Docstring(inspect.cleandoc(function.__doc__ or ""), parent=member,
                                                lineno=assign.lineno)
            mod.set_member(name, member)
