"""Split GGUF sets (``model-00001-of-00003.gguf``), read as one file.

llama.cpp's ``gguf-split`` (and ``convert_hf_to_gguf.py --split-max-*``) cut a model into files
named ``<prefix>-%05d-of-%05d.gguf`` (its ``llama_split_path``), each a GGUF of its own whose
metadata says where it belongs: ``split.no`` (u16, from 0), ``split.count`` (u16) and
``split.tensors.count`` (i32, the tensors of the whole set).  The first file holds all the
model's metadata, the others only those three keys; each file holds some of the tensors.

:func:`open_gguf` opens any file of a set as the whole set: a :class:`~.reader.GGUFFile`
whose header is the one ``gguf-split --merge`` would write (the first file's metadata with
``split.count`` 0, every file's tensors in order) and whose source presents the first file's
header followed by each file's tensor data (each started on the alignment), so every tool reads
a set exactly as it reads one file.  Each file's layout is checked on its own, and the set is
checked as a whole: every file present, numbered in order, of one count, tensor names unique,
as many tensors as ``split.tensors.count`` says.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import GGUFError, SafetensorError
from ..io.locate import sibling
from ..io.protocols import ByteSource, capabilities
from .check import GGUFProblem, GGUFValidation, check_layout, validate_gguf
from .header import GGUFField, GGUFHeader
from .reader import GGUFFile, source_reader
from .types import ValueType

#: u16: which file of the set this is, from 0
SPLIT_NO = "split.no"
#: u16: how many files the set has (0 in the file ``gguf-split --merge`` writes)
SPLIT_COUNT = "split.count"
#: i32: how many tensors the whole set holds
SPLIT_TENSORS = "split.tensors.count"
_NAME = re.compile(r"(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf")

#: opens another file of the set by its file name (a sibling of the file given)
PartOpener = Callable[[str], ByteSource]


def split_count(header: GGUFHeader) -> int:
    """How many files the set has (``split.count``); 1 for a file that is not part of one."""
    count = header.value(SPLIT_COUNT)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 1 else 1


def part_names(name: str, count: int) -> list[str]:
    """The file names of a set of ``count`` files, from the name of any of them (llama.cpp's
    ``<prefix>-%05d-of-%05d.gguf``)."""
    base = os.path.basename(name)
    m = _NAME.fullmatch(base)
    if m is None or int(m.group("count")) != count:
        raise GGUFError(f"{name} is one of a split set of {count} files (split.count), but its name is not "
                        f"<prefix>-NNNNN-of-{count:05d}.gguf, so the other files cannot be found",
                        code="split_name", count=count, input_name=name)
    return [f"{m.group('prefix')}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


class SplitSource:
    """The bytes of a split set as one file: the first file's header, then each file's tensor
    data from its own data offset, each started on ``alignment`` (zeros fill the gap)."""

    parallel_safe = False

    def __init__(self, parts: list[GGUFFile], name: str, alignment: int) -> None:
        self.parts = parts
        self.name = name
        first = parts[0].header
        self.regions: list[tuple[int, int, GGUFFile, int]] = []  # (start, length, part, offset in the part)
        end = 0
        for i, part in enumerate(parts):
            h = part.header
            start = 0 if i == 0 else -(-end // alignment) * alignment
            offset = 0 if i == 0 else h.data_offset
            length = (first.file_size if i == 0 else h.file_size - h.data_offset)
            self.regions.append((start, max(length, 0), part, offset))
            end = start + max(length, 0)
        self.size = end

    def data_base(self, index: int) -> int:
        """Where file ``index``'s data section starts, relative to the set's data section."""
        first = self.regions[0][2].header.data_offset
        return 0 if index == 0 else self.regions[index][0] - first

    def read_into(self, offset: int, buffer: memoryview) -> None:
        n, done = len(buffer), 0
        for start, length, part, inner in self.regions:
            if done >= n:
                break
            pos = offset + done
            if pos >= start + length:
                continue
            if pos < start:  # alignment padding before this file's data
                gap = min(start - pos, n - done)
                buffer[done : done + gap] = bytes(gap)
                done += gap
                continue
            take = min(start + length - pos, n - done)
            part.source.read_into(inner + pos - start, buffer[done : done + take])
            done += take
        if done < n:
            raise GGUFError(f"{self.name}: read of {n} bytes at {offset} runs past the end of the split set",
                            code="truncated", offset=offset)

    def close(self) -> None:
        for part in self.parts:
            part.close()


class SplitViewSource(SplitSource):
    """A :class:`SplitSource` over files that hand out zero-copy views (mapped files)."""

    readonly = True

    def view(self, offset: int, length: int) -> memoryview:
        for start, size, part, inner in self.regions:
            if start <= offset and offset + length <= start + size:
                return part.source.view(inner + offset - start, length)  # type: ignore[attr-defined, no-any-return]
        out = bytearray(length)  # across files or padding (never a tensor's bytes)
        self.read_into(offset, memoryview(out))
        return memoryview(out)


def _check_part(part: GGUFFile, index: int, count: int, name: str) -> None:
    no, cnt = part.header.value(SPLIT_NO), part.header.value(SPLIT_COUNT)
    if no != index or cnt != count:
        raise GGUFError(f"{name}: split.no {no!r} and split.count {cnt!r}, but it is file {index + 1} of {count} "
                        "by its name", code="split_mismatch", file=name)


def merged_header(parts: list[GGUFFile], source: SplitSource) -> GGUFHeader:
    """The header ``gguf-split --merge`` writes: the first file's metadata, ``split.count`` 0, and
    every file's tensors, their offsets into the set's data section."""
    first = parts[0].header
    fields = dict(first.fields)
    old = fields.get(SPLIT_COUNT)
    if old is not None:
        fields[SPLIT_COUNT] = GGUFField(SPLIT_COUNT, ValueType.UINT16, 0, old.offset)
    tensors = []
    for i, part in enumerate(parts):
        base = source.data_base(i)
        tensors += [dataclasses.replace(t, offset=t.offset + base) for t in part.header.tensors]
    return dataclasses.replace(first, fields=fields, tensors=tuple(tensors), file_size=source.size)


def open_gguf(source: ByteSource, *, validate: bool = True, unknown_types: bool = False,
              open_part: PartOpener | None = None) -> GGUFFile:
    """``source`` as a :class:`~.reader.GGUFFile`; when it is one file of a split set, the whole
    set (the other files opened with ``open_part``, by name)."""
    file = GGUFFile(source, validate=validate, unknown_types=unknown_types)
    count = split_count(file.header)
    if count == 1:
        return file
    opened: list[GGUFFile] = []
    try:
        if open_part is None:
            raise GGUFError(f"{file.name} is one of a split set of {count} files; the others cannot be opened "
                            "from this input (a stream): give the path of one of the files", code="split_stream",
                            count=count, input_name=file.name)
        names = part_names(file.name, count)
        given = os.path.basename(file.name)
        for i, name in enumerate(names):
            if name == given:
                part = file
            else:
                try:
                    part = GGUFFile(open_part(name), validate=validate, unknown_types=unknown_types)
                except (OSError, SafetensorError) as e:
                    raise GGUFError(f"split set {names[0]}: file {i + 1} of {count}, {name}: {e}",
                                    code="split_part", file=name) from None
            opened.append(part)
            _check_part(part, i, count, name)
        views = all(capabilities(p.source).view for p in opened)
        joined = (SplitViewSource if views else SplitSource)(opened, file.name, opened[0].header.alignment)
        header = merged_header(opened, joined)
        declared = opened[0].header.value(SPLIT_TENSORS)
        if isinstance(declared, int) and declared != len(header.tensors):
            raise GGUFError(f"split set {names[0]}: split.tensors.count says {declared} tensors, its {count} files "
                            f"hold {len(header.tensors)}", code="split_tensors")
        owner = {t.name: i for i, p in enumerate(opened) for t in p.header.tensors}
        return GGUFFile(joined, validate=validate, unknown_types=unknown_types, header=header,
                        parts=[p.name for p in opened], owner=owner)
    except BaseException:
        for p in opened or [file]:
            p.close()
        if file not in opened:
            file.close()
        raise


@dataclass
class SplitCheck:
    """Every file of a split set checked (``validate``): the files, their total size, and each
    problem with the file it is in (None: the set as a whole)."""

    files: list[str]
    size: int = 0
    tensors: int = 0
    problems: list[tuple[str | None, GGUFProblem]] = field(default_factory=list)


def check_split_set(name: str, header: GGUFHeader, size: int, open_part: PartOpener | None) -> SplitCheck:
    """Check the set ``name`` (already parsed: ``header``, ``size`` bytes) is one of: every file's
    header and layout (:func:`~.check.validate_gguf`), and the set's own rules."""
    count = split_count(header)
    try:
        names = part_names(name, count)
    except GGUFError as e:
        return SplitCheck([os.path.basename(name)], size, len(header.tensors), [(None, GGUFProblem(str(e), code="split_name"))])
    out = SplitCheck(names)
    given = os.path.basename(name)
    seen: dict[str, str] = {}
    first_declared: Any = None
    for i, part in enumerate(names):
        if part == given:
            found: GGUFValidation = GGUFValidation(header, list(check_layout(header)))
            out.size += size
        elif open_part is None:
            out.problems.append((part, GGUFProblem("cannot be opened from this input (a stream)", code="split_part")))
            continue
        else:
            try:
                source = open_part(part)
            except (OSError, SafetensorError) as e:
                out.problems.append((part, GGUFProblem(f"file {i + 1} of {count} cannot be opened: {e}",
                                                       code="missing_split")))
                continue
            try:
                found = validate_gguf(source_reader(source), source.size)
                out.size += source.size
            finally:
                source.close()
        out.problems += [(part, p) for p in found.problems]
        h = found.header
        if h is None:
            continue
        no, cnt = h.value(SPLIT_NO), h.value(SPLIT_COUNT)
        if no != i or cnt != count:
            out.problems.append((part, GGUFProblem(f"split.no {no!r} and split.count {cnt!r}, but it is file "
                                                   f"{i + 1} of {count} by its name", code="split_mismatch")))
        if i == 0:
            first_declared = h.value(SPLIT_TENSORS)
        for t in h.tensors:
            if t.name in seen:
                out.problems.append((part, GGUFProblem(f"also in {seen[t.name]}", t.name, "duplicate_tensor")))
            seen.setdefault(t.name, part)
    out.tensors = len(seen)
    if isinstance(first_declared, int) and first_declared != len(seen) and not out.problems:
        out.problems.append((None, GGUFProblem(f"split.tensors.count says {first_declared} tensors, the files "
                                               f"hold {len(seen)}", code="split_tensors")))
    return out


__all__ = ["SPLIT_COUNT", "SPLIT_NO", "SPLIT_TENSORS", "SplitCheck", "SplitSource", "SplitViewSource", "check_split_set",
           "merged_header", "open_gguf", "part_names", "sibling", "split_count"]
