"""Helpers shared by tests in several folders: optional dependencies, sample tensors, page-cache
control, advice spies.

``evict`` is the benchmarks' own (``benchmarks/_common.py``, stdlib only), loaded by path since
``benchmarks/`` is a folder of scripts, not a package.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pysafetensors.io.sources import MmapSource

ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.spec_from_file_location("benchmarks_common", ROOT / "benchmarks" / "_common.py")
assert _spec is not None and _spec.loader is not None
_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_common)

#: Drop a file from the page cache (written back first, so every page can go).
evict = _common.evict

#: The extra (``pip install -e '.[EXTRA]'``) that installs each optional top-level module the tests
#: import; a module not named here comes with the ``test`` extra.
EXTRA_OF = {
    "torch": "torch",
    "jax": "jax",
    "flax": "flax",
    "tensorflow": "tensorflow",
    "paddle": "paddle",
    "mlx": "mlx",
    "mkdocs": "docs",
    "mkdocstrings": "docs",
    "griffe": "docs",
    "matplotlib": "bench",
}

#: Every missing-dependency skip's reason holds this text: the conftest hook turns such skips into
#: failures under ``PYSAFETENSORS_REQUIRE_ALL=1`` (``make test``), so a full run cannot hide one.
INSTALL_HINT = "pip install -e '.["


def install_hint(module: str, extra: str | None = None) -> str:
    """The skip reason for a missing ``module``: what to install to run the test."""
    extra = extra or EXTRA_OF.get(module.partition(".")[0], "test")
    return f"{module} is not installed: {INSTALL_HINT}{extra}]'"


def require(module: str, extra: str | None = None) -> ModuleType:
    """Import ``module``, or skip the test with the install hint of the extra that provides it.

    For tests parametrized over frameworks: call it inside the test (or the parameter's factory),
    so a missing framework skips its own parameters, never the whole file.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.skip(install_hint(module, extra), allow_module_level=True)  # a test, or a whole module


def sample_arrays() -> dict[str, dict[str, np.ndarray]]:
    """Three checkpoints' tensors (seeded): mixed dtypes and ranks, one big tensor, many small ones."""
    rng = np.random.default_rng(1)
    return {
        "mixed": {
            "a": rng.standard_normal((64, 33)).astype(np.float32),
            "b": rng.integers(-9, 9, (17,), dtype=np.int64),
            "c": np.zeros((0, 4), np.float16),
            "d": rng.integers(0, 2, (5, 5)).astype(bool),
            "e": rng.standard_normal(()).astype(np.float64),
        },
        "one_big": {"w": rng.standard_normal((300, 257)).astype(np.float32)},
        "many_small": {f"t{i:03d}": np.full((i % 7 + 1,), i, np.int32) for i in range(150)},
    }


def spy_advice(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int]]:
    """Every ``MmapSource.advise`` call (offset, length, advice); the advice is still given."""
    calls: list[tuple[int, int, int]] = []
    real = MmapSource.advise

    def spy(self: MmapSource, offset: int, length: int, advice: int) -> None:
        calls.append((offset, length, advice))
        real(self, offset, length, advice)

    monkeypatch.setattr(MmapSource, "advise", spy)
    return calls


#: the MiniLM tensors the verdict pairs edit
NEGATED = "encoder.layer.0.attention.self.query.weight"
NUDGED = "encoder.layer.2.output.dense.weight"


def verdict_pairs(directory: Path, minilm: Path) -> dict[str, tuple[Path, Path, str]]:
    """Pairs of checkpoints whose structure and metadata are equal and whose bytes differ in one
    tensor, for the tests that no output calls them identical: name -> (a, b, that tensor).

    ``negated``: MiniLM with one matrix negated; ``nudged``: one value moved to the next float;
    ``nan_payload``: a NaN whose payload changed; ``signed_zero``: -0.0 for 0.0 (equal as numbers).
    """
    from pysafetensors.numpy import load_file, save_file

    def minilm_with(name: str, edit: object) -> Path:
        tensors = {k: np.array(v) for k, v in load_file(str(minilm)).items()}
        edit(tensors)  # type: ignore[operator]
        path = directory / f"{name}.safetensors"
        save_file(tensors, str(path), metadata={"format": "pt"})  # MiniLM's own metadata
        return path

    def negate(t: dict[str, np.ndarray]) -> None:
        t[NEGATED] = -t[NEGATED]

    def nudge(t: dict[str, np.ndarray]) -> None:
        t[NUDGED][5, 7] = np.nextafter(t[NUDGED][5, 7], np.float32(np.inf))

    def one(name: str, value: np.ndarray) -> Path:
        path = directory / f"{name}.safetensors"
        save_file({"bias": np.zeros(3, np.float32), "x": value}, str(path), metadata={"k": "v"})
        return path

    nan1 = np.array([0x7FC00001, 0], np.uint32).view(np.float32)
    nan2 = np.array([0x7FC00002, 0], np.uint32).view(np.float32)
    assert np.isnan(nan1[0]) and np.isnan(nan2[0])
    return {
        "negated": (minilm, minilm_with("negated", negate), NEGATED),
        "nudged": (minilm, minilm_with("nudged", nudge), NUDGED),
        "nan_payload": (one("nan1", nan1), one("nan2", nan2), "x"),
        "signed_zero": (one("zero", np.array([0.0, 1.0], np.float32)),
                        one("negzero", np.array([-0.0, 1.0], np.float32)), "x"),
    }


def paddle_before_tensorflow() -> None:
    """Import paddle first when both paddle and tensorflow are installed and tensorflow is not
    loaded yet: paddle 3.3 segfaults when imported after tensorflow 2.21 (their bundled native
    libraries clash), the other order works.  Call it before importing either."""
    import sys
    import warnings

    if "tensorflow" in sys.modules or "paddle" in sys.modules:
        return
    if importlib.util.find_spec("paddle") is None or importlib.util.find_spec("tensorflow") is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        importlib.import_module("paddle")


@contextmanager
def pipe_of(data: bytes) -> Iterator[str]:
    """A real pipe holding ``data`` (written by a thread as it is read), named by a path
    (``/proc/self/fd/N``: Linux)."""
    r, w = os.pipe()

    def feed() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(w, view) :]
        except BrokenPipeError:
            pass  # the reader stopped early (a refused stream)
        finally:
            os.close(w)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        yield f"/proc/self/fd/{r}"
    finally:
        os.close(r)
        writer.join(10)


def count_name_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of the save's name check (``format.layout.unique_by_name``): one entry per
    call.  It is patched in every module that holds it under its own name; ``sharded`` imports it
    from ``layout`` when it writes, so patching ``layout`` covers that call."""
    from pysafetensors import sharded
    from pysafetensors.format import index, layout

    calls: list[int] = []
    unique_by_name = layout.unique_by_name

    def counted(items: Any, name_of: Any) -> Any:
        calls.append(1)
        return unique_by_name(items, name_of)

    for module in (layout, index, sharded):
        if hasattr(module, "unique_by_name"):
            monkeypatch.setattr(module, "unique_by_name", counted)
    return calls
