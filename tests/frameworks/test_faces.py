"""Every face has upstream's signatures plus the same keyword-only extras.

Upstream's signatures are read from its source with ``ast`` (importing upstream's faces
would import every framework a second time, through upstream's own conversions).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
from typing import Any

import _fw_cases  # also imports paddle before tensorflow (see there)
import numpy as np
import pytest

FACES = ["numpy", "torch", "flax", "tensorflow", "paddle", "mlx"]
THIN = ["flax", "tensorflow", "paddle", "mlx"]


def _upstream_signatures(face: str) -> dict[str, list[tuple[str, str, Any]]]:
    """{function: [(name, kind, default source)]} for upstream's public functions of ``face``."""
    spec = importlib.util.find_spec("safetensors")
    assert spec is not None and spec.submodule_search_locations
    path = os.path.join(next(iter(spec.submodule_search_locations)), f"{face}.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            a = node.args
            positional = a.posonlyargs + a.args
            defaults = [None] * (len(positional) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
            params = [(p.arg, "positional", d) for p, d in zip(positional, defaults)]
            params += [
                (p.arg, "keyword", None if d is None else ast.unparse(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)
            ]
            out[node.name] = params
    return out


def _ours(face: str, function: str) -> inspect.Signature:
    return inspect.signature(getattr(importlib.import_module(f"pysafetensors.{face}"), function))


# Keyword-only parameters whose default differs from upstream's, and why: ``backend=None``
# picks mmap, or pread on network/FUSE filesystems, where upstream always maps.
DEFAULT_DIFFERS = {"backend"}


@pytest.mark.parametrize("face", FACES)
def test_upstream_parameters_come_first_with_their_defaults(face: str) -> None:
    upstream = _upstream_signatures(face)
    assert {"save", "save_file", "load", "load_file"} <= set(upstream)
    for function, params in upstream.items():
        ours = _ours(face, function).parameters
        positional = [p for p in ours.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
        expected = [(n, d) for n, k, d in params if k == "positional"]
        got = [(p.name, None if p.default is p.empty else repr(p.default)) for p in positional]
        assert [n for n, _ in got] == [n for n, _ in expected], (face, function)
        for (name, want), (_, have) in zip(expected, got):
            assert (want is None) == (have is None), (face, function, name)
            if want is not None:
                assert ast.literal_eval(want) == ast.literal_eval(have), (face, function, name)
        for name, kind, default in params:
            if kind == "keyword":
                assert ours[name].kind is inspect.Parameter.KEYWORD_ONLY, (face, function, name)
                if name not in DEFAULT_DIFFERS:
                    assert ours[name].default == ast.literal_eval(default), (face, function, name)


@pytest.mark.parametrize("face", THIN)
def test_thin_faces_take_numpy_and_torch_extras(face: str) -> None:
    for function in ("save", "save_file", "save_sharded", "load_file"):
        extras = {n for n, p in _ours(face, function).parameters.items() if p.kind is p.KEYWORD_ONLY}
        assert extras == {n for n, p in _ours("numpy", function).parameters.items() if p.kind is p.KEYWORD_ONLY}
        assert extras == {n for n, p in _ours("torch", function).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert list(_ours(face, "save_sharded").parameters)[1:] == list(_ours("torch", "save_sharded").parameters)[1:]


@pytest.mark.parametrize("face", THIN)
def test_thin_faces_name_and_document_their_functions(face: str) -> None:
    module = importlib.import_module(f"pysafetensors.{face}")
    for function in module.__all__:
        f = getattr(module, function)
        assert f.__module__ == module.__name__ and f.__name__ == function
        assert f.__doc__ and f.__doc__.strip(), function


@pytest.mark.parametrize("face", THIN)
def test_thin_faces_honour_alignment_and_durable(face: str, tmp_path: Any) -> None:
    case = importlib.import_module(f"test_{face}").CASE
    module = case.module
    tensors = {"x": case.from_np(_fw_cases.sample("F32", (3,)))}
    data = module.save(tensors, alignment=4096)
    assert (8 + int.from_bytes(data[:8], "little")) % 4096 == 0
    path = os.path.join(tmp_path, "a.safetensors")
    module.save_file(tensors, path, alignment=4096, durable=True)
    with open(path, "rb") as fh:
        assert fh.read() == data
    assert _fw_cases.same(case.to_np(module.load_file(path, threads=2, backend="pread")["x"]),
                          _fw_cases.sample("F32", (3,)))


@pytest.mark.parametrize("face", ["numpy", "torch"])
def test_getdtype_agrees_with_upstream(face: str) -> None:
    # torch.distributed.checkpoint calls safetensors.torch._getdtype on header codes.
    from pysafetensors.format.dtypes import CODES

    ours = importlib.import_module(f"pysafetensors.{face}")._getdtype
    upstream = importlib.import_module(f"safetensors.{face}")._getdtype
    known = 0
    for code in CODES:
        try:
            theirs = upstream(code)
        except KeyError:
            continue  # upstream's table lacks it; ours may know more (documented)
        known += 1
        mine = ours(code)
        assert (np.dtype(mine) == np.dtype(theirs)) if face == "numpy" else (mine == theirs), code
    assert known >= 13
    for bad in ("f32", "X", ""):
        with pytest.raises(KeyError):
            ours(bad)
    if face == "torch":
        with pytest.raises(KeyError):
            ours("F6_E2M3")  # torch has no float6 type


@pytest.mark.parametrize("face", FACES)
def test_every_load_file_takes_storage_options_as_every_save_file(face: str) -> None:
    for function in ("load_file", "save_file", "save_sharded"):
        parameter = _ours(face, function).parameters["storage_options"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None, (face, function)
