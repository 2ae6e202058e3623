"""Names a module loads on first use (PEP 562 module ``__getattr__``/``__dir__``): the package
root, ``format``, ``io`` and the framework faces keep their imports light this way, so reading
one file never imports the write side.  Standard library only, so the format core may use it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping, MutableMapping
from typing import Any


def lazy_attributes(
    package: str,
    namespace: MutableMapping[str, Any],
    table: Mapping[str, str],
    public: Collection[str],
    submodules: Collection[str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the module named ``package`` (whose globals are
    ``namespace``): a package, or a plain module such as a framework face.

    A name in ``table`` is imported from the module it maps to (``"header"`` or ``".header"``),
    relative to the package (for a plain module, the package it is in); any other name is the
    submodule of that name, among ``submodules`` (None: any submodule that exists; a plain
    module passes none).  The value is kept in ``namespace``, so later lookups are plain
    attribute reads.  ``__dir__`` lists ``public`` (loaded or not) and what is already loaded.
    """

    anchor = namespace.get("__package__") or package

    def __getattr__(name: str) -> Any:
        module_name = table.get(name)
        if module_name is not None:
            value = getattr(importlib.import_module("." + module_name.lstrip("."), anchor), name)
        elif (name in submodules) if submodules is not None else not name.startswith("__"):
            try:
                value = importlib.import_module(f".{name}", package)
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__
