"""The layout rules of a parsed GGUF header, every broken one listed.

:func:`check_layout` yields each problem (``validate`` shows them all); :func:`require_valid`
raises the first one, which is what opening a file for reading does, so a tensor is never read
from a range that lies outside the file or over another tensor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from ..errors import GGUFError
from .header import GGUFHeader


@dataclass(frozen=True)
class GGUFProblem:
    """One broken rule; ``tensor`` names the tensor it concerns, when it concerns one."""

    message: str
    tensor: str | None = None


def check_layout(header: GGUFHeader) -> Iterator[GGUFProblem]:
    """Every problem in the layout ``header`` describes, in file order."""
    if header.alignment_problem:
        yield GGUFProblem(header.alignment_problem)
    if header.tensors and header.data_offset > header.file_size:
        yield GGUFProblem(
            f"the data section would start at offset {header.data_offset}, past the end of the "
            f"{header.file_size}-byte file"
        )
    seen: set[str] = set()
    spans: list[tuple[int, int, str]] = []
    data_size = header.file_size - header.data_offset
    for t in header.tensors:
        if t.name in seen:
            yield GGUFProblem(f"duplicate tensor name {t.name!r}", t.name)
        seen.add(t.name)
        gt = t.ggml_type
        if gt is None:
            yield GGUFProblem(f"tensor {t.name!r} has unknown GGML type {t.type_id}", t.name)
            continue
        row = t.dims[0] if t.dims else 1
        if row % gt.block_elements:
            yield GGUFProblem(
                f"tensor {t.name!r}: first dimension {row} is not a multiple of {gt.name}'s block size "
                f"{gt.block_elements}",
                t.name,
            )
            continue
        if t.offset % header.alignment:
            yield GGUFProblem(
                f"tensor {t.name!r}: data offset {t.offset} is not a multiple of the alignment {header.alignment}",
                t.name,
            )
        nbytes = t.nbytes or 0
        if t.offset + nbytes > data_size:
            yield GGUFProblem(
                f"tensor {t.name!r}: data [{t.offset}, {t.offset + nbytes}) runs past the end of the data "
                f"section ({max(data_size, 0)} bytes)",
                t.name,
            )
        elif nbytes:
            spans.append((t.offset, t.offset + nbytes, t.name))
    spans.sort()
    for (b0, e0, n0), (b1, _e1, n1) in pairwise(spans):
        if b1 < e0:
            yield GGUFProblem(f"tensors {n0!r} [{b0}, {e0}) and {n1!r} (from {b1}) overlap", n1)


def require_valid(header: GGUFHeader) -> None:
    """Raise the first layout problem as a GGUFError (naming the tensor), if there is one."""
    for problem in check_layout(header):
        raise GGUFError(problem.message, tensor=problem.tensor)


__all__ = ["GGUFProblem", "check_layout", "require_valid"]
