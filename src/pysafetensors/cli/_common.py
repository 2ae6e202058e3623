"""Helpers shared by the commands: output, escaping for the terminal, number formatting, progress bars."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
import secrets
import sys
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..errors import MissingDependency
from ..gguf.values import joined_text
from ..tools import Bar, Progress, to_jsonable
from ..tools.checkpoint import matches
from ..tools.summary import VALUE_CHARS, shorten
from ._options import escape_text, escape_texts

__all__ = ["emit", "escape_json_controls", "escape_text", "escape_texts", "matches", "progress", "progress_factory", "render_json", "terminal_safe", "to_jsonable"]


def emit(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def terminal_safe(obj: Any) -> Any:
    """A copy of a result with every string in it (dict keys included) passed through
    :func:`escape_text`: every text renderer starts from this, so no field is missed.
    JSON output uses the result as it is (exact)."""
    if isinstance(obj, str):
        return escape_text(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = copy.copy(obj)
        for f in dataclasses.fields(obj):
            if not f.name.startswith("_"):  # private fields are never rendered
                object.__setattr__(out, f.name, terminal_safe(getattr(obj, f.name)))  # frozen ones too
        return out
    if isinstance(obj, dict):
        return {terminal_safe(k): terminal_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        if all(type(v) is int for v in obj):  # indices, shapes, offsets: nothing to escape
            return list(obj)
        return [terminal_safe(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(terminal_safe(v) for v in obj)
    return obj


_NUMBER_LIST = re.compile(r"\[(?:\s*-?\d[\d.eE+-]*\s*,)*\s*-?\d[\d.eE+-]*\s*\]")


def _one_line_list(m: re.Match[str]) -> str:
    text = m.group(0)
    if "\n" not in text:  # raw newlines never occur inside JSON strings, so this is structure
        return text
    return "[" + ", ".join(part.strip() for part in text[1:-1].split(",")) + "]"


# JSON escapes C0 controls but writes DEL and the C1 controls raw; some terminals obey U+009B
# as CSI, so --json escapes them too (they occur only inside strings: the escape is exact).
_C1 = re.compile("[\x7f-\x9f]")


def escape_json_controls(text: str) -> str:
    """JSON text with DEL and the C1 controls (U+007F-U+009F) written as ``\\u00XX`` escapes."""
    return _C1.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


#: items of a compact array rendered at a time (a bounded number of Python objects)
_CHUNK = 1 << 16


def _is_compact(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray, list, tuple))


def _compact_json(value: Any) -> str:
    """A read-only sequence (a GGUF metadata array) as one line of JSON, a chunk of items at a
    time: the same text the indented dump gives such a list of numbers after its one-line pass."""
    if not _is_compact(value):
        return _plain_json(value)
    n = len(value)
    first = value[0] if n else None
    parts = []
    if isinstance(first, Sequence) and not isinstance(first, str):
        # An array of arrays (each item an array of its own type): each item the same way, made
        # and dropped one at a time, their text joined a chunk at a time.
        parts.append(joined_text(value, _compact_json, ", "))
    else:
        for lo in range(0, n, _CHUNK):
            parts.append(_plain_json(value[lo : lo + _CHUNK])[1:-1])
    return "[" + ", ".join(parts) + "]"


def _plain_json(items: list[Any]) -> str:
    try:  # numbers, booleans and strings as they are: the C encoder, no object per item
        return json.dumps(items, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):  # NaN or an infinity (JSON has none): to_jsonable's strings
        return json.dumps(to_jsonable(items), ensure_ascii=False)


def render_json(result: Any) -> str:
    """Indented JSON; lists of numbers (shapes, offsets) stay on one line, GGUF metadata arrays
    too (rendered a chunk at a time: a 10 MB array is not ten million Python objects first).
    DEL and C1 controls are escaped as C0 ones are."""
    token = secrets.token_hex(8)  # placeholders no string in the result can forge
    arrays: list[Sequence[Any]] = []

    def hold(seq: Sequence[Any]) -> str:
        arrays.append(seq)
        return f"\0{token}:{len(arrays) - 1}"

    text = json.dumps(to_jsonable(result, hold), indent=2, ensure_ascii=False)
    text = _NUMBER_LIST.sub(_one_line_list, text)
    if arrays:
        text = re.sub(f'"\\\\u0000{token}:([0-9]+)"', lambda m: _compact_json(arrays[int(m.group(1))]), text)
    return escape_json_controls(text) + "\n"


def fmt_int(n: int) -> str:
    return f"{n:,}"


# Decimal SI units, as the Hub and the shard sizes ("5GB" = 5 * 10**9) use.
SIZE_UNITS = (("kB", 10**3), ("MB", 10**6), ("GB", 10**9), ("TB", 10**12), ("PB", 10**15))


def fmt_size(n: int) -> str:
    """``90.9 MB``, ``11.4 kB``, ``999 B``: the one size format of the CLI, the viewer (app.js's
    fmtBytes prints the same text) and the progress bars (decimal units).  The smallest unit
    whose value, rounded half up to one decimal in integer arithmetic, stays under 1,000.0."""
    if n < 1000:
        return f"{n} B"
    for i, (unit, scale) in enumerate(SIZE_UNITS):
        tenths = (n * 10 + scale // 2) // scale
        if tenths < 10000 or i == len(SIZE_UNITS) - 1:
            return f"{tenths // 10}.{tenths % 10} {unit}"
    raise AssertionError("unreachable")


def fmt_bytes(n: int) -> str:
    """``90,868,376 bytes (90.9 MB)``: the exact count, then :func:`fmt_size` (``999 bytes`` alone
    under 1,000).  Never inside parentheses of its own (``wrote F: 57,241 bytes (57.2 kB)``)."""
    return f"{n:,} bytes ({fmt_size(n)})" if n >= 1000 else plural(n, "byte")


def plural(n: int, word: str) -> str:
    """``1 tensor``, ``3 tensors`` (with thousands separators)."""
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def first_names(names: Sequence[str], most: int = 8) -> str:
    """``a, b, c ...``: the first ``most`` names, and `` ...`` when there are more."""
    return ", ".join(names[:most]) + (" ..." if len(names) > most else "")


def gguf_order_warning(names: Sequence[str], verb: str = "written") -> str:
    """The warning for tensors whose rows were ``verb`` (written, compared) in GGUF order although
    llama.cpp may have rearranged them (``left_in_gguf_order`` of a GGUF conversion or diff; the
    reasons are in ``--json``).  ``names`` come from the file: escape them first (:func:`terminal_safe`)."""
    return (f"warning: rows {verb} in GGUF order in {plural(len(names), 'tensor')} llama.cpp may have "
            f"rearranged: {first_names(names)} (--json gives why)")


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
    if not enabled or sys.stderr is None or not sys.stderr.isatty():
        return _NoBar()
    try:
        from .._optional import require

        tqdm = require("tqdm", "cli").tqdm
    except MissingDependency:
        return _NoBar()
    # Decimal units (unit_divisor 1000), as every size the CLI and the viewer print.
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, unit_divisor=1000, leave=False, file=sys.stderr)


def bar_enabled(args: Any) -> bool:
    return not getattr(args, "quiet", False)


def progress_factory(args: Any) -> Progress:
    """The tools' progress hook for this command line: a bar unless --quiet or not a terminal."""
    enabled = bar_enabled(args)

    def make(total: int, label: str) -> AbstractContextManager[Bar]:
        bar: AbstractContextManager[Bar] = progress(total, label, enabled)
        return bar

    return make


def short_text(value: str, limit: int = VALUE_CHARS) -> str:
    return shorten(value, limit)  # the rule the viewer shows long values by too


def disagreement_lines(disagreements: Any) -> list[str]:
    """One ``! shard headers disagree on KEY: ...`` line per MetadataDisagreement (escaped input)."""
    out = []
    for d in disagreements or []:
        parts = ([f"index {quote_value(d.index)}"] if d.index is not None else [])
        parts += [f"{shard} {quote_value(v)}" for shard, v in d.shards.items()]
        out.append(f"! shard headers disagree on {d.key}: {', '.join(parts)}")
    return out


def quote_value(v: str | None) -> str:
    return "(absent)" if v is None else f"'{short_text(v, 60)}'"
