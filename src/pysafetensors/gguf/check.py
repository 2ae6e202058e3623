"""The layout rules of a parsed GGUF header, every broken one listed.

:func:`check_layout` yields each problem (``validate`` shows them all); :func:`require_valid`
raises the first one, which is what opening a file for reading does, so a tensor is never read
from a range that lies outside the file or over another tensor.  :func:`validate_gguf` is the
whole check of a file: the header parse (whose first structural problem stops it: past a
length that runs off the end there is nothing left to read) and then every layout problem.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import GGUFError
from .header import GGUFHeader, Reader, parse_gguf_header


@dataclass(frozen=True)
class GGUFProblem:
    """One broken rule: a stable ``code``, the message, and the tensor it concerns (if one;
    the message does not repeat its name: :meth:`describe` adds it)."""

    message: str
    tensor: str | None = None
    code: str = "layout"

    def describe(self) -> str:
        return self.message if self.tensor is None else f"tensor {self.tensor!r}: {self.message}"


def check_layout(header: GGUFHeader) -> Iterator[GGUFProblem]:
    """Every problem in the layout ``header`` describes, in file order."""
    if header.alignment_problem:
        yield GGUFProblem(header.alignment_problem, code="invalid_alignment")
    for key, offset in header.duplicate_keys:
        yield GGUFProblem(f"duplicate metadata key {key!r} at offset {offset}", code="duplicate_key")
    if header.tensors and header.data_offset > header.file_size:
        yield GGUFProblem(
            f"the data section would start at offset {header.data_offset}, past the end of the "
            f"{header.file_size}-byte file",
            code="truncated",
        )
    seen: set[str] = set()
    spans: list[tuple[int, int, str]] = []
    data_size = header.file_size - header.data_offset
    for t in header.tensors:
        if t.name in seen:
            yield GGUFProblem("the name is used by an earlier tensor too", t.name, "duplicate_tensor")
        seen.add(t.name)
        gt = t.ggml_type
        if gt is None:
            yield GGUFProblem(f"unknown GGML type {t.type_id}", t.name, "unknown_type")
            continue
        row = t.dims[0] if t.dims else 1
        if row % gt.block_elements:
            yield GGUFProblem(
                f"first dimension {row} is not a multiple of {gt.name}'s block size "
                f"{gt.block_elements}",
                t.name,
                "block_size",
            )
            continue
        if t.offset % header.alignment:
            yield GGUFProblem(
                f"data offset {t.offset} is not a multiple of the alignment {header.alignment}",
                t.name,
                "misaligned",
            )
        nbytes = t.nbytes or 0
        if t.offset + nbytes > data_size:
            yield GGUFProblem(
                f"data [{t.offset}, {t.offset + nbytes}) runs past the end of the data "
                f"section ({max(data_size, 0)} bytes)",
                t.name,
                "out_of_bounds",
            )
        elif nbytes:
            spans.append((t.offset, t.offset + nbytes, t.name))
    spans.sort()
    end, last = -1, ""
    for b0, e0, n0 in spans:
        if b0 < end:
            yield GGUFProblem(f"data [{b0}, {e0}) overlaps tensor {last!r}, which ends at {end}", n0, "overlap")
        if e0 > end:
            end, last = e0, n0


def require_valid(header: GGUFHeader, *, unknown_types: bool = False) -> None:
    """Raise the first layout problem as a GGUFError (naming the tensor), if there is one.

    ``unknown_types`` lets tensors of GGML types this table does not list through (their size
    is unknown, so reading them raises GGUFUnsupported); every other rule still holds, so the
    header of a file from a newer llama.cpp can be shown and identified.
    """
    for problem in check_layout(header):
        if unknown_types and problem.code == "unknown_type":
            continue
        raise GGUFError(problem.describe(), code=problem.code, tensor=problem.tensor)


@dataclass
class GGUFValidation:
    """What :func:`validate_gguf` found: the header when it parsed, and every problem."""

    header: GGUFHeader | None
    problems: list[GGUFProblem] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.problems


def validate_gguf(read: Reader, size: int) -> GGUFValidation:
    """Check a GGUF file of ``size`` bytes read through ``read(offset, n)``: only its header is read."""
    try:
        header = parse_gguf_header(read, size)
    except GGUFError as e:
        # The message names the tensor, if it concerns one, and the offset where parsing stopped.
        return GGUFValidation(None, [GGUFProblem(str(e), None, getattr(e, "code", "header"))])
    return GGUFValidation(header, list(check_layout(header)))


__all__ = ["GGUFProblem", "GGUFValidation", "check_layout", "require_valid", "validate_gguf"]
