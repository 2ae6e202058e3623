"""Crafted GGUF metadata (security round 3, items 1 and 2): arrays of arrays and very many keys.

An array of N empty arrays takes 12 bytes per item in the file; held as a Python object per item
it cost some 40 times that, and every command took seconds per megabyte.  Now an array of arrays
is kept as its bytes plus an offset per item (items parsed again when read), the arrays inside
arrays of a file are capped at MAX_NESTED_ARRAYS and its keys at MAX_METADATA_KEYS, both refused
with a GGUFError naming the counts.  The files are generated here, small; the benchmark
(benchmarks/gguf_metadata.py) measures bigger ones.
"""

from __future__ import annotations

import json
import random
import struct
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from gguf_helpers import cli_json, run_cli

from pysafetensors.errors import GGUFError
from pysafetensors.gguf import GGUFArray, parse_gguf_bytes, parse_gguf_header
from pysafetensors.gguf.convert import gguf_metadata
from pysafetensors.gguf.header import MAX_METADATA_KEYS, MAX_NESTED_ARRAYS, GGUFArrays, plain_value
from pysafetensors.gguf.identity import gguf_identity
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.summary import summarize

ARRAY, INT32, UINT32, STRING, UINT8 = 9, 5, 4, 8, 0


def _s(text: bytes, version: int = 3) -> bytes:
    return struct.pack("<Q" if version >= 2 else "<I", len(text)) + text


def gguf_file(n_kv: int, body: bytes, version: int = 3) -> bytes:
    """A GGUF file: ``body`` (``n_kv`` key/value pairs) and one F32 tensor of 4 values."""
    head = b"GGUF" + struct.pack("<IQQ" if version >= 2 else "<III", version, 1, n_kv) + body
    head += _s(b"w", version) + struct.pack("<I", 1) + struct.pack("<Q" if version >= 2 else "<I", 4)
    head += struct.pack("<IQ", 0, 0)
    head += bytes(-len(head) % 32)
    return head + struct.pack("<4f", 1, 2, 3, 4)


def nested_empty(n: int) -> bytes:
    """One key holding an array of ``n`` empty int32 arrays: 12 bytes an item."""
    return gguf_file(1, _s(b"x.nested") + struct.pack("<IIQ", ARRAY, ARRAY, n) + struct.pack("<IQ", INT32, 0) * n)


def many_keys(n: int) -> bytes:
    """``n`` distinct keys, each a uint32."""
    return gguf_file(n, b"".join(_s(b"k%07d" % i) + struct.pack("<II", UINT32, i) for i in range(n)))


def _peak(fn: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak


# --- arrays of arrays: compact --------------------------------------------------------------


def test_an_array_of_empty_arrays_costs_about_its_bytes() -> None:
    """60,000 empty arrays (720 kB): parsing holds their bytes and an offset each, not a
    GGUFArray per item (which took some 40 times the file)."""
    data = nested_empty(60_000)
    header, peak = _peak(lambda: parse_gguf_bytes(data))
    assert peak < 3 * len(data) + (256 << 10), f"peak {peak:,} bytes for a {len(data):,}-byte file"
    value = header.value("x.nested")
    assert isinstance(value.items, GGUFArrays) and len(value) == 60_000
    assert value.items[0] == GGUFArray(value.items[0].item_type, []) and len(value.items[-1]) == 0
    assert header.fields["x.nested"].type_name == "array[array[int32]]"


def test_the_summary_keeps_an_array_of_arrays_compact(tmp_path: Path) -> None:
    """inspect's summary (and the viewer's) holds the array as it was parsed, not a list per item."""
    data = nested_empty(60_000)
    path = tmp_path / "nested.gguf"
    path.write_bytes(data)
    with open_checkpoint(path, gguf=True) as ckpt:
        summary, peak = _peak(lambda: summarize(ckpt))
    assert peak < len(data) // 2, f"summary peak {peak:,} bytes for a {len(data):,}-byte file"
    entry = summary.gguf_metadata["x.nested"]
    assert entry.count == 60_000 and entry.value[:2] == [[], []]


@pytest.mark.parametrize("command", ["inspect", "inspect --json", "id", "validate", "stats", "diff", "convert"])
@pytest.mark.slow
def test_every_command_on_an_array_of_arrays_stays_near_the_file_size(command: str, tmp_path: Path) -> None:
    """Each command on 60,000 empty arrays (720 kB) holds a few times the file, not 40 times."""
    data = nested_empty(60_000)
    path = tmp_path / "nested.gguf"
    path.write_bytes(data)
    argv: list[Any] = command.split() + [path]
    if command == "diff":
        argv.append(path)
    if command == "convert":
        argv.append(tmp_path / "out.safetensors")
    (code, out, err), peak = _peak(lambda: run_cli(*argv))
    assert code == 0, err
    assert peak < 8 * len(data) + (4 << 20), f"{command}: peak {peak:,} bytes for a {len(data):,}-byte file"
    if command == "inspect --json":
        assert json.loads(out)["gguf_metadata"]["x.nested"]["value"] == [[]] * 60_000


def _encode(vtype: int, value: Any, version: int) -> bytes:
    """A GGUF value as the format describes it (independent of the parser under test)."""
    if vtype == STRING:
        return _s(value.encode(), version)
    if vtype == ARRAY:
        item_type, items = value
        count = struct.pack("<Q" if version >= 2 else "<I", len(items))
        return struct.pack("<I", item_type) + count + b"".join(_encode(item_type, v, version) for v in items)
    return struct.pack({UINT8: "<B", INT32: "<i", UINT32: "<I"}[vtype], value)


def _random_array(rng: random.Random, depth: int) -> tuple[tuple[int, list[Any]], Any]:
    """(the encodable (item type, items), the plain value) of a random array nested ``depth`` more."""
    item_type = rng.choice([UINT8, INT32, STRING] + ([ARRAY] * 2 if depth else []))
    n = rng.choice([0, 1, 2, 3, 40, 900])
    if item_type == ARRAY:
        pairs = [_random_array(rng, depth - 1) for _ in range(min(n, 5))]
        return (ARRAY, [p[0] for p in pairs]), [p[1] for p in pairs]
    if item_type == STRING:
        items = ["".join(rng.choice("ab é中\n") for _ in range(rng.randrange(4))) for _ in range(n)]
    elif item_type == UINT8:
        items = [rng.randrange(256) for _ in range(n)]
    else:
        items = [rng.randrange(-(2**31), 2**31) for _ in range(n)]
    return (item_type, items), items


@pytest.mark.parametrize("version", [1, 3])
@pytest.mark.parametrize("seed", range(6))
def test_arrays_of_arrays_read_back_exactly(seed: int, version: int) -> None:
    """Random nested arrays (numbers, strings, arrays, to 4 deep), big enough to cross the
    parser's read windows, read back as written, item by item and whole, with a reader that
    hands out odd-sized pieces."""
    rng = random.Random(seed)
    encodable, plain = [], []
    for _ in range(40):
        e, p = _random_array(rng, 3)
        encodable.append(e)
        plain.append(p)
    for big in ([(INT32, list(range(-30_000, 30_000)))], [(STRING, ["xy" * (i % 7) for i in range(30_000)])]):
        encodable += big
        plain += [items for _, items in big]
    body = _s(b"x.nested", version) + struct.pack("<I", ARRAY) + _encode(ARRAY, (ARRAY, encodable), version)
    data = gguf_file(1, body, version)
    assert len(data) > 4 * 64 * 1024  # the parser's first read is 64 KiB
    header = parse_gguf_header(lambda off, n: data[off : off + n], len(data))
    field = header.fields["x.nested"]
    assert field.plain() == plain
    assert [a.item_type for a in field.value.items] == [e[0] for e in encodable]
    assert [plain_value(field.value.items[i]) for i in range(-1, -len(plain) - 1, -1)] == plain[::-1]
    # The header's other fields and its tensor follow the nested array exactly.
    assert [t.name for t in header.tensors] == ["w"] and header.tensors[0].dims == (4,)


def test_nested_array_problems_are_still_found() -> None:
    """A bad item deep in an array of arrays stops parsing as it did: an unknown type, a string
    that is not UTF-8, a length past the end."""
    def file(inner: bytes) -> bytes:
        return gguf_file(1, _s(b"x") + struct.pack("<IIQ", ARRAY, ARRAY, 2) + struct.pack("<IQ", INT32, 0) + inner)

    cases = {
        "unknown_value_type": struct.pack("<IQ", 13, 1) + bytes(8),
        "invalid_utf8": struct.pack("<IQ", STRING, 1) + _s(b"\xff"),
        "array_too_long": struct.pack("<IQ", INT32, 2**40),
    }
    for code, inner in cases.items():
        with pytest.raises(GGUFError) as info:
            parse_gguf_bytes(file(inner))
        assert info.value.code == code, (code, str(info.value))  # type: ignore[attr-defined]


# --- the caps ---------------------------------------------------------------------------------


def test_too_many_arrays_inside_arrays_is_refused_naming_the_counts() -> None:
    data = nested_empty(MAX_NESTED_ARRAYS + 1)
    with pytest.raises(GGUFError) as info:
        parse_gguf_bytes(data)
    assert info.value.code == "too_many_arrays"  # type: ignore[attr-defined]
    assert "'x.nested'" in str(info.value) and f"{MAX_NESTED_ARRAYS + 1:,}" in str(info.value)
    assert f"{MAX_NESTED_ARRAYS:,}" in str(info.value)
    assert len(parse_gguf_bytes(nested_empty(MAX_NESTED_ARRAYS)).value("x.nested")) == MAX_NESTED_ARRAYS


def test_the_cap_counts_arrays_at_every_depth_and_in_every_key() -> None:
    """300 arrays of 300 arrays are 90,300 arrays inside arrays; two keys of 40,000 are 80,000."""
    inner = struct.pack("<IQ", ARRAY, 300) + struct.pack("<IQ", UINT8, 0) * 300
    deep = gguf_file(1, _s(b"deep") + struct.pack("<IIQ", ARRAY, ARRAY, 300) + inner * 300)
    wide = b"".join(_s(k) + struct.pack("<IIQ", ARRAY, ARRAY, 40_000) + struct.pack("<IQ", UINT8, 0) * 40_000
                    for k in (b"a", b"b"))
    for data in (deep, gguf_file(2, wide)):
        with pytest.raises(GGUFError) as info:
            parse_gguf_bytes(data)
        assert info.value.code == "too_many_arrays"  # type: ignore[attr-defined]


def test_too_many_keys_is_refused_before_any_is_read() -> None:
    data = many_keys(MAX_METADATA_KEYS + 1)
    with pytest.raises(GGUFError) as info:
        parse_gguf_bytes(data)
    assert info.value.code == "too_many_keys"  # type: ignore[attr-defined]
    assert f"{MAX_METADATA_KEYS + 1:,}" in str(info.value) and f"{MAX_METADATA_KEYS:,}" in str(info.value)


def test_as_many_keys_as_the_cap_are_read() -> None:
    header = parse_gguf_bytes(many_keys(MAX_METADATA_KEYS))
    assert len(header.fields) == MAX_METADATA_KEYS and header.value("k0065535") == 65535


@pytest.mark.parametrize("case", ["arrays", "keys"])
def test_every_command_refuses_a_file_over_a_cap_in_one_line(case: str, tmp_path: Path) -> None:
    data = nested_empty(MAX_NESTED_ARRAYS + 1) if case == "arrays" else many_keys(MAX_METADATA_KEYS + 1)
    fragment = f"{MAX_NESTED_ARRAYS + 1:,}" if case == "arrays" else f"{MAX_METADATA_KEYS + 1:,}"
    path = tmp_path / "capped.gguf"
    path.write_bytes(data)
    for command in ("inspect", "id", "stats", "diff", "convert"):
        extra = [path] if command == "diff" else [tmp_path / "out.safetensors"] if command == "convert" else []
        code, out, err = run_cli(command, path, *extra)
        assert code == 2 and out == "", (command, err)
        assert err.startswith("pysafetensors: error: ") and fragment in err and "internal error" not in err, err
    code, doc = cli_json("validate", path)
    assert code == 1 and not doc["valid"] and fragment in json.dumps(doc)
    assert not (tmp_path / "out.safetensors").exists()


def test_the_id_and_converted_metadata_of_nested_arrays_are_unchanged() -> None:
    """The ID and convert's gguf.* text of an array of arrays read through the compact form are
    the ones the plain lists give (the same canonical text)."""
    data = gguf_file(1, _s(b"x") + struct.pack("<IIQ", ARRAY, ARRAY, 3)
                     + struct.pack("<IQ", INT32, 2) + struct.pack("<2i", 1, -2)
                     + struct.pack("<IQ", STRING, 1) + _s(b"a\"b")
                     + struct.pack("<IQ", ARRAY, 1) + struct.pack("<IQ", UINT8, 1) + b"\x07")
    header = parse_gguf_bytes(data)
    assert header.fields["x"].plain() == [[1, -2], ["a\"b"], [[7]]]
    assert json.loads(gguf_metadata(header)["gguf.x"]) == [[1, -2], ["a\"b"], [[7]]]
    assert gguf_identity(header).short.startswith("wi:gguf:3:")


@pytest.mark.slow
def test_inspect_json_renders_a_numeric_array_a_chunk_at_a_time(tmp_path: Path) -> None:
    """``inspect --json`` of a 2 MB uint8 array: its text (about 5 bytes an item) a few times over,
    not a Python object per item and an indented line each (which took some 440 times the file);
    the values, NaN and the infinities (as JSON's strings) exact."""
    n = 2_000_000
    floats = struct.pack("<4f", float("nan"), 1.5, float("-inf"), 0.1)
    data = gguf_file(2, _s(b"x.u8") + struct.pack("<IIQ", ARRAY, UINT8, n) + bytes(range(200)) * (n // 200)
                     + _s(b"x.f32") + struct.pack("<IIQ", ARRAY, 6, 4) + floats)
    path = tmp_path / "numbers.gguf"
    path.write_bytes(data)
    (code, out, err), peak = _peak(lambda: run_cli("inspect", "--json", path))
    assert code == 0, err
    assert peak < 25 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"
    meta = json.loads(out)["gguf_metadata"]
    assert meta["x.u8"]["value"] == list(range(200)) * (n // 200) and meta["x.u8"]["count"] == n
    assert meta["x.f32"]["value"] == ["nan", 1.5, "-inf", struct.unpack("<f", struct.pack("<f", 0.1))[0]]
