"""``install_as_safetensors()``: ``import safetensors`` gives pysafetensors in this process.

As PyMySQL's ``install_as_MySQLdb()``: a finder at the front of ``sys.meta_path`` answers
``safetensors`` and its submodules, so libraries that ``import safetensors`` (transformers,
peft, accelerate, sentence-transformers, huggingface_hub...) run on pysafetensors unchanged.

- ``safetensors`` is a small module with upstream's top-level names (``safe_open``,
  ``SafetensorError``, ``serialize``...) bound to pysafetensors' objects, and
  ``__version__`` the upstream release whose API is implemented (version checks in client
  libraries compare against upstream's numbers, not ours).
- ``safetensors.numpy``, ``.torch``, ``.flax``, ``.tensorflow``, ``.paddle``, ``.mlx`` are the
  pysafetensors modules themselves, imported when first imported under either name, so
  installing imports no framework and patching ``safetensors.torch.save_file`` patches the
  function the face's own code calls.  ``safetensors._safetensors_rust`` (upstream's compiled
  module) is made like ``safetensors``, with the compiled module's ``__all__`` too.
- While installed, ``importlib.metadata`` finds a ``safetensors`` distribution (version
  ``__version__``) when no real one is installed, so dependency checks such as
  transformers' ``safetensors>=0.4.3`` pass where upstream cannot be installed.

The real ``safetensors`` already imported refuses the install: two libraries would then
each hold half the program (a ``SafetensorError`` of one is not caught as the other's).
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import sys
import threading
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from . import _api, errors, handle
from ._version import __version__
from .errors import AliasConflict

if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.metadata import Distribution

UPSTREAM_VERSION = "0.8.0"  # the upstream safetensors release whose Python API this implements
NAME = "safetensors"
# safetensors.<name> -> the pysafetensors module that stands in for it.
SUBMODULES = {
    "numpy": "pysafetensors.numpy",
    "torch": "pysafetensors.torch",
    "flax": "pysafetensors.flax",
    "tensorflow": "pysafetensors.tensorflow",
    "paddle": "pysafetensors.paddle",
    "mlx": "pysafetensors.mlx",
}
# Upstream's top level (its __init__ re-exports them from the compiled _safetensors_rust), each
# taken from the module that defines it here (the package root, which imports this one, re-exports them).
_DEFINED_IN: dict[str, ModuleType] = {
    "SafetensorError": errors, "TensorSpec": _api, "deserialize": _api, "safe_open": handle,
    "_safe_open_handle": handle, "serialize": _api, "serialize_file": _api,
}
# Names upstream's face modules define that ours do not: private conversion helpers and
# tables built on its TensorSpec/numpy round trips (no client library we checked uses them;
# torch.distributed.checkpoint's ``_getdtype`` and transformers' ``_remove_duplicate_names``,
# ``_find_shared_tensors`` and ``storage_ptr`` do exist).  docs/upstream-differences.md lists them; a test
# checks this against upstream's source.
NOT_PROVIDED = {
    "numpy": ("_TYPES", "_flatten", "_is_little_endian", "_view2np"),
    "torch": (
        "_SIZE", "_TYPES", "_flatten_as_ptr", "_float4_e2m1_x2", "_float8_e4m3fn", "_float8_e4m3fnuz", "_float8_e5m2",
        "_float8_e5m2fnuz", "_float8_e8m0", "_to_ndarray", "_view2torch",
    ),
    "flax": ("_jnp2np", "_np2jnp"),
    "tensorflow": ("_np2tf", "_tf2np"),
    "paddle": (
        "NPDTYPES", "_SIZE", "_TYPES", "_flatten", "_getdtype", "_np2paddle", "_paddle2np", "_to_ndarray",
        "_view2paddle",
    ),
    "mlx": ("_mx2np", "_np2mx"),
}
_RUST = f"{NAME}._safetensors_rust"
# The compiled module's __all__, in upstream's order, so ``from safetensors._safetensors_rust import *``
# binds the same names (upstream's package itself declares no __all__, and neither does ours).
RUST_ALL = (
    "serialize", "serialize_file", "deserialize", "TensorSpec", "safe_open", "_safe_open_handle", "SafetensorError",
    "__version__",
)
_ORIGIN = "pysafetensors.install_as_safetensors"  # shown by repr(safetensors)
_lock = threading.Lock()


def _is_ours(module: Any) -> bool:
    return getattr(module, "__alias_of__", None) == "pysafetensors" or (
        getattr(module, "__name__", "") or ""
    ).startswith("pysafetensors")


def _top_level(name: str) -> ModuleType:
    """A fresh ``safetensors`` (or ``safetensors._safetensors_rust``) module."""
    module = ModuleType(name, "pysafetensors standing in for safetensors (pysafetensors.install_as_safetensors)")
    for attr, defined_in in _DEFINED_IN.items():
        setattr(module, attr, getattr(defined_in, attr))
    module.__version__ = UPSTREAM_VERSION  # type: ignore[attr-defined]
    module.__alias_of__ = "pysafetensors"  # type: ignore[attr-defined]
    module.__pysafetensors_version__ = __version__  # type: ignore[attr-defined]
    if name == _RUST:
        module.__all__ = list(RUST_ALL)  # type: ignore[attr-defined]
    return module


class _Loader:
    """Creates the top-level module, or hands back the pysafetensors module for a submodule.

    A loader by protocol (create_module + exec_module): importing importlib.abc to subclass
    its Loader would cost every ``import pysafetensors`` a few milliseconds.
    """

    def __init__(self) -> None:
        self._specs: dict[str, Any] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if spec.name in (NAME, _RUST):
            return _top_level(spec.name)
        module = importlib.import_module(SUBMODULES[spec.name.partition(".")[2]])
        # The import system sets __spec__ on whatever we return; exec_module gives the
        # module its own spec back, so it stays importable (and reloadable) as itself.
        self._specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is not None and spec.name in self._specs:
            module.__spec__ = self._specs.pop(spec.name)


@functools.cache
def _distribution() -> Distribution:
    """A ``safetensors`` distribution for ``importlib.metadata`` (imported only when asked)."""
    import importlib.metadata

    text = (
        f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {UPSTREAM_VERSION}\n"
        f"Summary: provided by pysafetensors {__version__} (install_as_safetensors)\n"
    )

    class Metadata(importlib.metadata.Distribution):
        def read_text(self, filename: str) -> str | None:
            return text if filename == "METADATA" else None

        def locate_file(self, path: Any) -> Any:
            return None

    return Metadata()


class AliasFinder:
    """The ``sys.meta_path`` entry ``install_as_safetensors`` adds."""

    def __init__(self) -> None:
        self.loader = cast("Loader", _Loader())

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == NAME:
            # A package with no search path: a submodule we do not name is not found, as upstream.
            return importlib.machinery.ModuleSpec(NAME, self.loader, origin=_ORIGIN, is_package=True)
        if fullname == _RUST or (fullname.startswith(NAME + ".") and fullname.partition(".")[2] in SUBMODULES):
            return importlib.machinery.ModuleSpec(fullname, self.loader, origin=_ORIGIN)
        return None

    def find_distributions(self, context: Any = None) -> Iterator[Distribution]:
        """``importlib.metadata``'s hook: our distribution, asked by name, when no real one answers."""
        name = getattr(context, "name", None)
        if name is None or name.replace("-", "_").lower() != NAME:
            return iter(())
        import importlib.metadata

        if any(True for _ in importlib.metadata.MetadataPathFinder.find_distributions(context)):
            return iter(())  # the installed safetensors' own metadata answers
        return iter((_distribution(),))


def _finder() -> AliasFinder | None:
    return next((f for f in sys.meta_path if isinstance(f, AliasFinder)), None)


def _loaded(ours: bool) -> list[str]:
    """The ``safetensors`` modules imported in this process: ours (the alias's), or the real ones."""
    return sorted(
        name for name, module in list(sys.modules.items())
        if (name == NAME or name.startswith(NAME + ".")) and module is not None and _is_ours(module) == ours
    )


def install_as_safetensors() -> None:
    """Make ``import safetensors`` (and ``safetensors.torch``...) give pysafetensors in this process.

    Call it before anything imports ``safetensors`` (first thing in the program), or run an
    unchanged program with ``python -m pysafetensors.run script.py`` / ``-m module``.
    Idempotent.  Imports no framework: ``safetensors.torch`` imports torch when it is imported.

    Raises:
        AliasConflict: the real ``safetensors`` is already imported in this process.
    """
    with _lock:
        if _finder() is not None:
            return
        real = _loaded(ours=False)
        if real:
            where = getattr(sys.modules[real[0]], "__file__", None) or "?"
            raise AliasConflict(
                f"install_as_safetensors(): the real safetensors is already imported in this process "
                f"({', '.join(real)} from {where}); installing now would mix two libraries (a SafetensorError "
                "raised by one is not caught as the other's). Call pysafetensors.install_as_safetensors() before "
                "anything imports safetensors, or run the program with: python -m pysafetensors.run SCRIPT",
                modules=real,
            )
        sys.meta_path.insert(0, AliasFinder())


def uninstall_as_safetensors() -> None:
    """Undo ``install_as_safetensors``: remove the finder and the ``safetensors`` modules it made.

    Objects already imported through the alias stay what they are (pysafetensors objects).
    """
    with _lock:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AliasFinder)]
        for name in _loaded(ours=True):
            del sys.modules[name]


def is_installed() -> bool:
    """Whether ``install_as_safetensors()`` is in effect in this process."""
    return _finder() is not None
