"""Helpers shared by the commands: output, number formatting, progress bars, chunked reads."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..errors import MissingDependency
from ..format.dtypes import DType

# A chunk is at most this many elements: 2M x 8 bytes (float64 working copies) = 16 MiB per
# array (32 MiB complex128), so the temporaries of a two-file comparison peak near 160 MiB
# (measured, C64 --atol), under the 256 MiB bound whatever the tensor size.
CHUNK_ELEMENTS = 1 << 21


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def to_jsonable(obj: Any) -> Any:
    """Dataclasses/tuples -> dicts/lists; non-finite floats -> "nan"/"inf"/"-inf" (JSON has none)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj) if not f.name.startswith("_")}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


_NUMBER_LIST = re.compile(r"\[(?:\s*-?\d[\d.eE+-]*\s*,)*\s*-?\d[\d.eE+-]*\s*\]")


def _one_line_list(m: re.Match[str]) -> str:
    text = m.group(0)
    if "\n" not in text:  # raw newlines never occur inside JSON strings, so this is structure
        return text
    return "[" + ", ".join(part.strip() for part in text[1:-1].split(",")) + "]"


def render_json(result: Any) -> str:
    """Indented JSON; lists of numbers (shapes, offsets) stay on one line."""
    text = json.dumps(to_jsonable(result), indent=2, ensure_ascii=False)
    return _NUMBER_LIST.sub(_one_line_list, text) + "\n"


def fmt_int(n: int) -> str:
    return f"{n:,}"


def fmt_bytes(n: int) -> str:
    """``90,868,376 bytes (90.9 MB)``: exact count plus a decimal-unit approximation."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n:,} bytes ({n / scale:.1f} {unit})"
    return f"{n:,} bytes"


def plural(n: int, word: str) -> str:
    """``1 tensor``, ``3 tensors`` (with thousands separators)."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def fmt_count(n: int) -> str:
    """``22,713,728 (22.7M)``."""
    for unit, scale in (("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if n >= scale:
            return f"{n:,} ({n / scale:.1f}{unit})"
    return f"{n:,}"


def fmt_float(x: float | None) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.6g}"


def table(rows: Sequence[Sequence[str]], header: Sequence[str], right: Iterable[int] = ()) -> str:
    """A plain aligned text table; columns in ``right`` are right-aligned."""
    right = set(right)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(parts).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def matches(name: str, patterns: Sequence[str] | None) -> bool:
    """Shell-glob match against any of ``patterns`` (None or empty: everything)."""
    return not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _NoBar:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def progress(total: int, desc: str, enabled: bool, unit: str = "B") -> Any:
    """A tqdm bar on stderr when ``enabled`` and stderr is a terminal; a no-op otherwise."""
    if not enabled or not sys.stderr.isatty():
        return _NoBar()
    try:
        from .._optional import require

        tqdm = require("tqdm", "cli").tqdm
    except MissingDependency:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, unit_divisor=1024, leave=False, file=sys.stderr)


def bar_enabled(args: Any) -> bool:
    return not getattr(args, "quiet", False)


def iter_chunks(data: Any, dtype: DType, nelements: int, step: int | None = None) -> Iterator[Any]:
    """The tensor's elements as flat numpy arrays of at most ``step`` elements each.

    ``data`` is a buffer or anything sliceable by byte range (the CLI's RangedBytes reads just
    that range from a remote source).  Each chunk views ``data[lo:hi]`` (unpacked to one code
    per element for F4/F6), so memory stays bounded by the chunk size whatever the tensor size.
    """
    import numpy as np

    from .._adapters.numpy import numpy_dtype, unpack

    step = step or CHUNK_ELEMENTS  # read at call time so tests can shrink it
    nd = numpy_dtype(dtype)
    bits = dtype.bits
    for start in range(0, nelements, step):
        count = min(step, nelements - start)
        lo, hi = start * bits // 8, (start + count) * bits // 8
        piece = data[lo:hi]
        if dtype.packed:
            yield unpack(piece, dtype, count).view(nd)
        else:
            yield np.frombuffer(piece, dtype=nd)
