"""A header error carries two wordings: upstream safetensors 0.8.0's message first (what the drop-in
API must say: checked against upstream itself), then in its detail, and alone in ``plain`` (what the
command line prints), the problem in a user's words with thousands separators."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import pytest

import pysafetensors
from pysafetensors import errors

st = pytest.importorskip("safetensors")


def _gguf() -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 0)


def _good() -> bytes:
    header = b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + bytes(16)


GOOD = _good()

CASES = {
    "text": (b"# Example README\nhello world\n", errors.HeaderTooLarge,
             'not a safetensors file (it begins with the text "# Exampl", not a header length)'),
    "text_tab": (b"\tname\tvalue\n1\t2\n", errors.HeaderTooLarge,
                 'not a safetensors file (it begins with the text "\\tname\\tva", not a header length)'),
    "gguf": (_gguf(), errors.HeaderTooLarge, ("not a safetensors file (it begins with GGUF's magic: a GGUF file, "
             "which pysafetensors inspect, diff and convert read)")),
    "pickle": (pickle.dumps({"w": list(range(40))}, protocol=2), errors.HeaderTooLarge,
               ("not a safetensors file (it begins like a pickle, as older PyTorch files do: pysafetensors convert "
               "reads those)")),
    "empty": (b"", errors.HeaderTooSmall, "not a safetensors file (it is empty)"),
    "short": (b"\x01\x02\x03", errors.HeaderTooSmall,
              "not a safetensors file (it has 3 bytes, fewer than the 8 of a header length)"),
    "cut_header": (GOOD[:40], errors.InvalidHeaderLength,
                   (f"truncated: the header alone needs {len(GOOD) - 16:,} bytes (its length prefix declares "
                   f"{len(GOOD) - 24:,}; the file has 40)")),
    "cut_data": (GOOD[:-6], errors.IncompleteBuffer,
                 f"truncated: 6 bytes of tensor data missing (expected {len(GOOD):,} bytes, the file has {len(GOOD) - 6:,})"),
    "trailing": (GOOD + bytes(1001), errors.IncompleteBuffer,
                 f"1,001 bytes after the last tensor (expected {len(GOOD):,} bytes, the file has {len(GOOD) + 1001:,})"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_upstream_words_first_then_the_plain_ones(case: str, tmp_path: Path) -> None:
    data, cls, plain = CASES[case]
    path = tmp_path / "f.safetensors"
    path.write_bytes(data)
    with pytest.raises(cls) as ours:
        pysafetensors.safe_open(path, "np")
    with pytest.raises(st.SafetensorError) as up:
        st.safe_open(str(path), "np")
    message = str(ours.value)
    assert message.startswith(str(up.value)), (message, str(up.value))  # the drop-in API's words first
    assert ours.value.plain == plain
    # The detail (in upstream's parentheses) says the same, with no parentheses of its own.
    detail = message[len(str(up.value)):]
    assert detail.startswith(" (") and detail.endswith(")") and detail.count("(") == 1, detail
    assert plain.split(" (")[0] in detail


def test_a_large_declared_header_in_a_file_that_holds_it_is_over_the_limit(tmp_path: Path) -> None:
    # Not a text file: a safetensors-like file whose header is longer than upstream's cap.
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", 100_000_008) + b"{")
        f.truncate(8 + 100_000_008)
    with pytest.raises(errors.HeaderTooLarge) as ours:
        pysafetensors.safe_open(path, "np")
    assert ours.value.plain == "header too large: 100,000,008 bytes (the limit safetensors readers accept is 100,000,000)"
