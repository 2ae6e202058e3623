"""What every tools module shares: JSON-able results and the progress hook.

Results are dataclasses; ``to_dict()`` gives the JSON-able form the CLI prints with
``--json`` and the viewer serves (fields starting with ``_`` are left out; NaN and the
infinities, which JSON lacks, become the strings ``"nan"``, ``"inf"``, ``"-inf"``).

Long computations take ``progress``: a callable ``progress(total_bytes, label)`` returning a
context manager whose ``update(n)`` is called as bytes are processed (the CLI passes a tqdm
bar factory; the default does nothing).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol


def to_jsonable(obj: Any, compact: Callable[[Sequence[Any]], Any] | None = None) -> Any:
    """Dataclasses/tuples/sequences -> dicts/lists; non-finite floats -> "nan"/"inf"/"-inf" (JSON has none).

    ``compact``, when given, stands in for every read-only sequence that is not a list or tuple
    (a GGUF metadata array, kept as the file's bytes): its result is used as it is, so the
    caller can render such an array a chunk at a time instead of as a Python object per item.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name), compact) for f in dataclasses.fields(obj)
                if not f.name.startswith("_")}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, compact) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, compact) for v in obj]
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes, bytearray)):  # a GGUF metadata array
        return compact(obj) if compact is not None else [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


class JsonResult:
    """Mixin for result dataclasses: ``to_dict()`` is the stable, JSON-able form."""

    def to_dict(self) -> dict[str, Any]:
        out = to_jsonable(self)
        assert isinstance(out, dict)
        return out


class Bar(Protocol):
    def update(self, n: int = 1) -> None: ...


Progress = Callable[[int, str], AbstractContextManager[Bar]]


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


def no_progress(total: int, label: str) -> AbstractContextManager[Bar]:
    """The default progress hook: reports nothing."""
    return nullcontext(_NoBar())
