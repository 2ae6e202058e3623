"""Cross-framework matrix: a file written by each face (ours and upstream's) is read by every
face (ours and upstream's) with identical values, and every writer produces the same bytes.

Only the dtypes every framework holds exactly are used (jax without x64 has no 64-bit types).
Framework conversions here avoid pysafetensors, so a bug cannot cancel itself out.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from _fw_cases import same, sample

import pysafetensors.numpy as ps_numpy

CODES = ("BOOL", "U8", "I8", "I16", "F16", "BF16", "I32", "F32", "C64")
REFERENCE = {code.lower(): sample(code, (2, 3), seed=i) for i, code in enumerate(CODES)}
BF16 = np.dtype(ml_dtypes.bfloat16)


def _import(module: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip(module)


# --- numpy -> framework tensor, and back, per framework -----------------------------------


def _torch() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    torch = _import("torch")

    def to(a: np.ndarray) -> Any:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == BF16 else torch.from_numpy(a)

    def back(t: Any) -> np.ndarray:
        return t.view(torch.int16).numpy().view(BF16) if t.dtype == torch.bfloat16 else t.numpy()

    return to, back


def _jax() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    jnp = _import("jax.numpy")
    return jnp.asarray, np.asarray


def _tf() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    tf = _import("tensorflow")
    return tf.convert_to_tensor, lambda t: t.numpy()


def _paddle() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    paddle = _import("paddle")

    def to(a: np.ndarray) -> Any:
        return paddle.to_tensor(a.view(np.int16)).view(paddle.bfloat16) if a.dtype == BF16 else paddle.to_tensor(a)

    def back(t: Any) -> np.ndarray:
        return t.view(paddle.int16).numpy().view(BF16) if t.dtype == paddle.bfloat16 else t.numpy()

    return to, back


def _mlx() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    mx = _import("mlx.core")

    def back(t: Any) -> np.ndarray:
        return np.array(t.view(mx.int16)).view(BF16) if t.dtype == mx.bfloat16 else np.array(t)

    return mx.array, back


def _numpy() -> tuple[Callable[[np.ndarray], Any], Callable[[Any], np.ndarray]]:
    return (lambda a: a), np.asarray


FACES = {"numpy": _numpy, "torch": _torch, "flax": _jax, "paddle": _paddle, "tensorflow": _tf, "mlx": _mlx}


def _face(package: str, face: str) -> Any:
    if package == "safetensors":
        _import("safetensors")
    return _import(f"{package}.{face}")


# --- writers and readers ---------------------------------------------------------------

WRITERS = [(p, f) for p in ("pysafetensors", "safetensors") for f in FACES]
READERS = WRITERS
# Upstream bugs the matrix works around: its mlx face cannot save bfloat16 (numpy's buffer
# protocol has no bfloat16 format) and its numpy face cannot load BF16 (KeyError 'BF16').
CANNOT_WRITE = {("safetensors", "mlx"): {"bf16"}}
CANNOT_READ = {("safetensors", "numpy"): {"bf16"}}


@pytest.fixture(scope="module")
def files(tmp_path_factory: Any) -> dict[tuple[str, str], str]:
    """One file per writer that can run here: {(package, face): path}, holding REFERENCE
    less the writer's CANNOT_WRITE tensors."""
    out = {}
    folder = tmp_path_factory.mktemp("matrix")
    for package, face in WRITERS:
        try:
            to, _ = FACES[face]()
            module = _face(package, face)
        except pytest.skip.Exception:
            continue
        tensors = {k: to(v) for k, v in REFERENCE.items() if k not in CANNOT_WRITE.get((package, face), ())}
        path = os.path.join(folder, f"{package}-{face}.safetensors")
        module.save_file(tensors, path)
        out[(package, face)] = path
    return out


def _read(package: str, face: str, path: str) -> dict[str, np.ndarray]:
    _, back = FACES[face]()
    module = _face(package, face)
    if package == "safetensors" and face == "numpy":
        # Upstream's numpy face cannot load BF16 (KeyError 'BF16'): read the rest one by one.
        safe_open = importlib.import_module("safetensors").safe_open
        with safe_open(path, "np") as f:
            return {k: f.get_tensor(k) for k in f.keys() if k not in CANNOT_READ[(package, face)]}  # noqa: SIM118
    return {k: back(v) for k, v in module.load_file(path).items()}


def test_every_writer_writes_the_same_bytes(files: dict[tuple[str, str], str]) -> None:
    assert ("pysafetensors", "numpy") in files
    for writer, path in files.items():
        skip = CANNOT_WRITE.get(writer, set())
        with open(path, "rb") as fh:
            assert fh.read() == ps_numpy.save({k: v for k, v in REFERENCE.items() if k not in skip}), writer


@pytest.mark.parametrize("reader", READERS, ids=lambda r: f"{r[0]}.{r[1]}")
def test_every_reader_reads_every_file(files: dict[tuple[str, str], str], reader: tuple[str, str]) -> None:
    for writer, path in files.items():
        got = _read(*reader, path)
        missing = CANNOT_WRITE.get(writer, set()) | CANNOT_READ.get(reader, set())
        assert set(got) == set(REFERENCE) - missing, (writer, reader)
        for name, value in got.items():
            assert same(value, REFERENCE[name]), (writer, reader, name)


def test_importing_pysafetensors_imports_no_framework() -> None:
    code = (
        "import sys, pysafetensors, pysafetensors._adapters, pysafetensors.handle\n"
        "bad = sorted(m for m in ('jax', 'tensorflow', 'paddle', 'mlx', 'torch', 'flax') if m in sys.modules)\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


@pytest.mark.parametrize(
    ("face", "module", "extra"),
    [("flax", "jax", "jax"), ("tensorflow", "tensorflow", "tensorflow"), ("paddle", "paddle", "paddle"),
     ("mlx", "mlx", "mlx")],
)
def test_missing_framework_names_the_extra(face: str, module: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{module!r}] = None\n"
        "from pysafetensors.errors import MissingDependency\n"
        "from pysafetensors import safe_open\n"
        f"try:\n    import pysafetensors.{face}\nexcept MissingDependency as e:\n"
        f"    assert \"pip install 'pysafetensors[{extra}]'\" in str(e), e\nelse:\n    raise SystemExit('no error')\n"
        f"try:\n    safe_open(b'', {face!r})\nexcept MissingDependency:\n    pass\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


def _env() -> dict[str, str]:
    src = os.path.dirname(importlib.import_module("pysafetensors").__path__[0])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
