"""Opening a file reads and allocates in proportion to its header, never past the cap."""

from __future__ import annotations

import json
import struct
import sys
import tracemalloc
from typing import Any

import pytest

from pysafetensors import SafetensorError, safe_open
from pysafetensors.errors import (
    HeaderTooLarge,
    InvalidHeaderJson,
    InvalidHeaderLength,
    ValidationOverflow,
)
from pysafetensors.format import HEADER_CAP, parse_header
from pysafetensors.reader import SafeFile


class CountingSource:
    """A ByteSource of ``size`` bytes whose first bytes are ``prefix`` (zeros after); records reads."""

    def __init__(self, prefix: bytes, size: int | None = None) -> None:
        self.prefix = prefix
        self.size = len(prefix) if size is None else size
        self.name = "<counting>"
        self.reads: list[tuple[int, int]] = []

    def read_into(self, offset: int, buffer: memoryview) -> None:
        self.reads.append((offset, len(buffer)))
        assert offset + len(buffer) <= self.size, "read past the end of the source"
        chunk = self.prefix[offset : offset + len(buffer)]
        buffer[: len(chunk)] = chunk
        buffer[len(chunk) :] = bytes(len(buffer) - len(chunk))

    def close(self) -> None:
        pass

    @property
    def bytes_read(self) -> int:
        return sum(n for _, n in self.reads)


def valid_file(tensors: int = 3) -> bytes:
    header = {f"t{i}": {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]} for i in range(tensors)}
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + bytes(8 * tensors)


def test_open_reads_only_the_prefix_and_the_header() -> None:
    data = valid_file()
    n = int.from_bytes(data[:8], "little")
    src = CountingSource(data)
    SafeFile(src)
    assert src.reads == [(0, 8), (8, n)]  # no tensor bytes are read to open a file


@pytest.mark.parametrize(
    ("declared", "size", "error"),
    [
        (HEADER_CAP, 64, InvalidHeaderLength),  # declares the cap, file is tiny
        (HEADER_CAP + 1, 10**12, HeaderTooLarge),  # over the cap, file (claims to be) huge
        (2**64 - 1, 10**12, HeaderTooLarge),
        (2**63, 64, HeaderTooLarge),
    ],
)
def test_bad_lengths_are_rejected_after_reading_8_bytes(declared: int, size: int, error: type) -> None:
    src = CountingSource(struct.pack("<Q", declared) + b"{}", size=size)
    with pytest.raises(error):
        SafeFile(src)
    assert src.reads == [(0, 8)]


def test_header_of_exactly_the_cap_is_read_once_and_no_more() -> None:
    """A (sparse) file whose header is the full 100 MB: exactly 8 + N bytes are read."""
    src = CountingSource(struct.pack("<Q", HEADER_CAP) + b"{" + b" " * 10, size=8 + HEADER_CAP)
    with pytest.raises(InvalidHeaderJson):
        SafeFile(src)
    assert src.reads == [(0, 8), (8, HEADER_CAP)]


def _peak(fn: Any) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_declaring_a_100mb_header_in_a_tiny_file_allocates_almost_nothing(tmp_path: Any) -> None:
    path = tmp_path / "liar.safetensors"
    path.write_bytes(struct.pack("<Q", HEADER_CAP) + b'{"a":1}')

    def attempt() -> None:
        for backend in ("mmap", "pread"):
            with pytest.raises(InvalidHeaderLength):
                safe_open(path, framework="np", backend=backend)
        with pytest.raises(InvalidHeaderLength):
            safe_open(path.read_bytes(), framework="np")

    attempt()  # warm up: first-use imports and caches are not the file's doing
    assert _peak(attempt) < 256 * 1024


def test_parse_memory_is_proportional_to_the_header() -> None:
    """Peak memory while opening a ~1 MB header stays within a fixed multiple of its size."""
    data = valid_file(tensors=10_000)
    n = int.from_bytes(data[:8], "little")

    def opened() -> None:
        with safe_open(data, framework="np") as f:
            assert len(f.keys()) == 10_000

    opened()
    peak = _peak(opened)
    assert peak < 60 * n, f"peak {peak} bytes for a {n}-byte header"


@pytest.mark.parametrize(
    "shape",
    [[2**32, 2**32, 16], [2**63, 2], [2**64 - 1, 2], [2**21] * 4, [2**62, 4]],
)
def test_shapes_whose_size_overflows_are_rejected(shape: list[int]) -> None:
    header = json.dumps({"t": {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}).encode()
    data = struct.pack("<Q", len(header)) + header + b"\0" * 4
    with pytest.raises(ValidationOverflow):
        safe_open(data, framework="np")


def test_deep_nesting_is_rejected_without_recursion_error() -> None:
    """1,000,000 nested arrays under a tensor (Python's json would hit RecursionError, serde its
    128 limit); at the top level the array is refused before it is read, as upstream does."""
    deep = b"[" * 1_000_000 + b"]" * 1_000_000
    h = b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":' + deep + b"}}"
    with pytest.raises(InvalidHeaderJson, match="recursion limit"):
        safe_open(struct.pack("<Q", len(h)) + h + b"\0", framework="np")
    h = b'{"a":' + deep + b"}"  # an entry that is an array of arrays: refused at its first item
    with pytest.raises(InvalidHeaderJson):
        safe_open(struct.pack("<Q", len(h)) + h, framework="np")
    h = b"[" * 1_000_000 + b"]" * 1_000_000
    with pytest.raises(InvalidHeaderJson, match="invalid type: sequence, expected struct HashMetadata"):
        safe_open(struct.pack("<Q", len(h)) + h, framework="np")


def test_huge_element_count_in_a_zero_size_tensor_slices_without_work() -> None:
    header = json.dumps({"t": {"dtype": "U8", "shape": [2**40, 0, 2**20], "data_offsets": [0, 0]}}).encode()
    data = struct.pack("<Q", len(header)) + header
    with safe_open(data, framework="np") as f:
        out = f.get_slice("t")[:5, :, ::2]
        assert out.shape == (5, 0, 2**19)


def test_errors_carry_context() -> None:
    with pytest.raises(SafetensorError) as info:
        safe_open(struct.pack("<Q", HEADER_CAP + 1) + b"{}", framework="np")
    assert "100,000,001" in str(info.value) and "header too large" in str(info.value)


# --- crafted headers: wrong shapes are refused before they are built, and the parser's work
# --- does not grow with the number of JSON values (no Python call per value)

_N = 300_000  # values per crafted array (about 1 MB of header)
_T = '"dtype":"U8","shape":[1],"data_offsets":[0,1]'


def _array(item: str) -> str:
    return "[" + ",".join([item] * _N) + "]"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (_array("{}"), "invalid type: sequence, expected struct HashMetadata"),
        (_array("1.5"), "invalid type: sequence, expected struct HashMetadata"),
        ('{"a":' + _array("1.5") + "}", "invalid type: floating point `1.5`, expected string or map"),
        ('{"a":' + _array("[]") + "}", "invalid type: sequence, expected string or map"),
        ('{"__metadata__":' + _array("{}") + "}", "invalid type: sequence, expected a map"),
    ],
    ids=["top-level-objects", "top-level-floats", "entry-of-floats", "entry-of-arrays", "metadata-array"],
)
def test_wrong_shapes_are_refused_before_they_are_built(text: str, reason: str) -> None:
    """A header that is an array, or a tensor entry / metadata that is an array the format
    cannot take, is refused from its first item: peak memory stays a small multiple of the
    header itself (building the array took 10-30x, and seconds)."""
    h = text.encode()
    with pytest.raises(InvalidHeaderJson) as info:
        parse_header(h, len(h) + 8)
    assert info.value.reason == f"invalid JSON in header: {reason}"  # type: ignore[attr-defined]
    peak = _peak(lambda: pytest.raises(InvalidHeaderJson, parse_header, h, len(h) + 8))
    assert peak < 4 * len(h), f"peak {peak} bytes for a {len(h)}-byte header"


@pytest.mark.parametrize(
    "text",
    [
        '{"a":{' + _T + ',"x":' + _array("{}") + "}}",
        '{"a":{' + _T + ',"x":' + _array("1.5") + "}}",
        '{"a":{' + _T + ',"x":' + _array("[]") + "}}",
        '{"a":{' + _T + ',"x":' + _array('"s"') + "}}",
        '{"a":{' + _T + ',"x":[-0,' + ",".join(["1"] * _N) + "]}}",
        '{"a":{' + _T + ',"x":[1e250,' + ",".join(["2.5e-3"] * _N) + "]}}",
        '{"a":' + _array("{}") + "}",
    ],
    ids=["ignored-objects", "ignored-floats", "ignored-arrays", "ignored-strings", "ignored-ints-and-minus-zero",
         "ignored-big-and-small-floats", "entry-of-objects"],
)
def test_parser_work_does_not_grow_with_the_number_of_values(text: str) -> None:
    """Arrays in ignored fields (upstream accepts them) are read by json's C scanner: the
    Python functions called while parsing stay a handful, however many values there are
    (a hook per value made a 100 MB header take 20-40 s).  Counted, not timed."""
    h = text.encode()
    size = len(h) + 8 + (1 if '"x"' in text else 0)
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        try:
            parse_header(h, size)
        except InvalidHeaderJson:
            pass
    finally:
        sys.setprofile(None)
    assert calls < 200, calls


def _mapped_rss_kib(path: str) -> int:
    """Resident KiB of this process's mappings of ``path`` (its /proc/self/smaps entries)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            first = line.split(maxsplit=1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's first line: "start-end perms ... path"
                inside = line.rstrip("\n").endswith(" " + path)
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_a_large_header_is_not_resident_twice(tmp_path: Any) -> None:
    # The header is parsed from a copy; the mapped pages it was copied from are released, so a
    # crafted 100 MB header costs its copy, not the copy and the map (SECURITY.md's figures).
    from pysafetensors.io.sources import MmapSource
    from pysafetensors.reader import read_header_bytes

    header = b'{"__metadata__":{"k":"' + b"x" * (20 << 20) + b'"}}'
    header += b" " * (-len(header) % 8)
    path = str(tmp_path / "big-header.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    source = MmapSource(path)
    try:
        assert bytes(read_header_bytes(source)) == header
        assert _mapped_rss_kib(path) <= 64  # at most the pages at the two ends stay mapped
        assert bytes(source.view(8, 16)) == header[:16]  # released pages map again when touched
    finally:
        source.close()
    with safe_open(path, "np") as f:
        assert f.metadata() == {"k": "x" * (20 << 20)}
