"""io.locate: every kind of input resolved in one place (file, directory, index, stream), the
format told by magic, and the one stream policy with its cap (io.spool)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from _helpers import pipe_of

from pysafetensors.errors import InputTooLarge, SourceError
from pysafetensors.io.locate import backend_chooser, locate, sniff
from pysafetensors.io.sources import MemorySource
from pysafetensors.io.spool import spool
from pysafetensors.numpy import save, save_file

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a pipe through /proc/self/fd")




def test_sniff_tells_gguf_by_magic_only() -> None:
    assert sniff(MemorySource(b"GGUF\x03\x00\x00\x00")) == "gguf"
    assert sniff(MemorySource(b"GGU")) == "safetensors"
    assert sniff(MemorySource(save({"a": np.ones(1, np.float32)}))) == "safetensors"


def test_a_file_a_directory_and_an_index(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.mkdir()
    save_file({"a": np.ones(2, np.float32)}, one / "m.safetensors")
    found = locate(one)
    try:
        assert found.location == str(one / "m.safetensors") and found.format == "safetensors" and not found.index
    finally:
        found.close()
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"a": "one/m.safetensors"}}))
    found = locate(index)
    assert found.index and found.source is None and found.format is None
    with pytest.raises(ValueError, match="index"):
        found.take_source()


def test_the_backend_is_chosen_once_for_every_file(tmp_path: Path) -> None:
    assert backend_chooser("pread")(str(tmp_path)) == "pread"
    assert backend_chooser(None)(str(tmp_path)) in ("mmap", "pread")
    assert backend_chooser(None, remote=True)("https://h/x.safetensors") is None


def test_a_stream_is_copied_up_to_its_header_and_one_byte(tmp_path: Path) -> None:
    data = save({"a": np.arange(4, dtype=np.float32)})
    with pipe_of(data + b"XYZ" * 1000) as path:
        found = locate(path)
        source = found.take_source()
    try:
        assert found.stream and found.format == "safetensors" and found.sibling_opener() is None
        assert source.size == len(data) + 1  # the trailing byte shows the file is longer than declared
        buf = bytearray(len(data))
        source.read_into(0, memoryview(buf))
        assert bytes(buf) == data
    finally:
        source.close()


def test_a_header_declaring_more_than_the_cap_is_refused_before_the_data(tmp_path: Path) -> None:
    data = save({"a": np.zeros(10_000, dtype=np.float32)})
    with pipe_of(data) as path, pytest.raises(InputTooLarge, match="declares .* more than the 1,000-byte"):
        locate(path, max_input_size=1_000)


def test_a_stream_shorter_than_a_length_prefix_names_what_it_is(tmp_path: Path) -> None:
    with pipe_of(b"") as path, pytest.raises(SourceError, match="a FIFO, not a regular file, and it gave no bytes") as e:
        locate(path)
    assert e.value.code == "header_too_small" and e.value.size == 0
    with pipe_of(b"") as path, pytest.raises(SourceError, match="no checkpoint to convert"):
        spool(path, whole=True, wanted="checkpoint to convert")
