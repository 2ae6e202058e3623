"""convert reads a pipe (``/dev/stdin``, a FIFO): copied once to a temporary file, bounded by the
cap on streamed inputs, then converted like the file itself; a stream over the cap is refused
with a message naming it and the cap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _helpers import pipe_of

from pysafetensors.convert import convert_file
from pysafetensors.errors import InputTooLarge
from pysafetensors.tools.convert import convert_checkpoint

from .convert_helpers import read_safetensors

SRC = Path(__file__).resolve().parents[2] / "src"
ARRAYS = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(5, np.int64)}




def _inputs(d: Path) -> dict[str, Path]:
    files = {"npy": d / "a.npy", "npz": d / "m.npz"}
    np.save(files["npy"], ARRAYS["w"])
    np.savez(files["npz"], **ARRAYS)
    try:
        import torch
    except ImportError:
        return files
    state = {k: torch.from_numpy(v) for k, v in ARRAYS.items()}
    files["torch-zip"], files["torch-legacy"] = d / "zip.pt", d / "legacy.pt"
    torch.save(state, files["torch-zip"])
    torch.save(state, files["torch-legacy"], _use_new_zipfile_serialization=False)
    return files


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a pipe through /proc/self/fd")
def test_every_kind_converts_from_a_pipe(tmp_path: Path) -> None:
    for kind, src in _inputs(tmp_path).items():
        direct, piped = tmp_path / f"{kind}.safetensors", tmp_path / f"{kind}-piped.safetensors"
        convert_file(src, direct)
        with pipe_of(src.read_bytes()) as path:
            report = convert_file(path, piped)
        assert report.source_kind == kind and report.verified
        assert piped.read_bytes() == direct.read_bytes(), kind


def _cli(*args: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "pysafetensors", *args], input=stdin, capture_output=True, env=env,
                          timeout=120, check=False)


def test_cli_converts_dev_stdin(tmp_path: Path) -> None:
    src = _inputs(tmp_path)["npz"]
    p = _cli("convert", "/dev/stdin", str(tmp_path / "out.safetensors"), stdin=src.read_bytes())
    assert p.returncode == 0, p.stderr
    assert b"/dev/stdin (npz)" in p.stdout and b"verified" in p.stdout
    tensors, _ = read_safetensors(str(tmp_path / "out.safetensors"))
    assert {k: (dtype, shape) for k, (dtype, shape, _) in tensors.items()} == {"w": ("F32", (3, 4)), "b": ("I64", (5,))}
    assert tensors["w"][2] == ARRAYS["w"].tobytes()
    # Nothing on the pipe, or not a checkpoint: one clear line naming the input.
    for stdin, what in ((b"", b"a FIFO, not a regular file, and it gave no bytes"),
                        (b"hello, world", b"not a PyTorch checkpoint")):
        p = _cli("convert", "/dev/stdin", str(tmp_path / "bad.safetensors"), stdin=stdin)
        assert p.returncode == 2 and p.stderr.count(b"\n") == 1 and b"stdin" in p.stderr and what in p.stderr, p.stderr


def test_gguf_converts_from_a_pipe(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    src = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(src), "llama")
    w.add_tensor("t.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = _cli("convert", "/dev/stdin", str(tmp_path / "g.safetensors"), stdin=src.read_bytes())
    assert p.returncode == 0, p.stderr
    assert b"/dev/stdin (GGUF v3" in p.stdout
    tensors, _ = read_safetensors(str(tmp_path / "g.safetensors"))
    assert tensors["t.weight"][2] == np.arange(32, dtype=np.float32).tobytes()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a pipe through /proc/self/fd")
def test_a_stream_over_the_cap_is_refused(tmp_path: Path) -> None:
    from pysafetensors.io.spool import spool

    data = os.urandom(300_000)
    with pipe_of(data) as path, pytest.raises(InputTooLarge, match="longer than the 100,000-byte cap") as e:
        spool(path, whole=True, max_input_size=100_000, directory=str(tmp_path))
    assert path in str(e.value) and "--max-input-size" in str(e.value) and e.value.limit == 100_000
    assert list(tmp_path.iterdir()) == []  # the partial copy is gone (anonymous)
    with pipe_of(data) as path, spool(path, whole=True, max_input_size=300_000, directory=str(tmp_path)) as copy:
        assert copy.read() == data  # exactly the cap fits


def test_convert_of_an_endless_device_stops_at_the_cap(tmp_path: Path) -> None:
    out = tmp_path / "out.safetensors"
    with pytest.raises(InputTooLarge, match="/dev/zero.*1,000,000-byte cap"):
        convert_checkpoint("/dev/zero", out, max_input_size=1_000_000)
    assert list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(InputTooLarge):
        convert_file("/dev/zero", out, max_input_size=1_000_000)
    assert list(tmp_path.iterdir()) == []
