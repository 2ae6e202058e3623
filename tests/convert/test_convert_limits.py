"""A small hostile file cannot make conversion do unbounded work or allocate on demand.

Each case is a few hundred bytes to a megabyte that asks for 2**40 steps or gigabytes of memory;
the converter must refuse it quickly with a ConversionLimitExceeded naming the bound, and
(where memory was asked for) without allocating anything near what was asked.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.convert import convert_file
from pysafetensors.convert.limits import ALLOCATION_ALLOWANCE
from pysafetensors.errors import ConversionLimitExceeded, CorruptCheckpoint

from .convert_helpers import (
    assert_same_tensors,
    deflated_zeros,
    entry,
    f32,
    flatten_torch,
    read_safetensors,
    replace_entry,
    rezip,
    stored,
    torch_pickle,
    write_zip,
)

torch = pytest.importorskip("torch")

SRC = str(Path(__file__).resolve().parents[2] / "src")
# Well under every request below (1 GiB and more), and above what converting a small file needs.
SMALL_PEAK = ALLOCATION_ALLOWANCE // 2


class Payload:
    """Unpickles as ``func(*args)``; pickling it calls nothing."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def save(obj, path, legacy):
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return str(path)


def peak_while(fn):
    """Run ``fn`` under tracemalloc; (its exception, peak traced bytes)."""
    tracemalloc.start()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - returned for the test to judge
        return e, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return None, 0


# --- item 1: unbounded work --------------------------------------------------------------------


def shared_bomb(leaf, levels=40):
    """``d = {"a": d, "b": d}`` forty times: 2**40 paths in a few hundred pickled bytes."""
    d = leaf
    for _ in range(levels):
        d = {"a": d, "b": d}
    return d


@pytest.mark.timeout(60)
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("leaf", ["int", "tensor"])
def test_shared_reference_bomb_is_refused_quickly(tmp_path, legacy, leaf):
    value = 1 if leaf == "int" else torch.ones(2)
    src = save({"w": torch.ones(2), "bomb": shared_bomb(value)}, tmp_path / "bomb.pt", legacy)
    assert os.path.getsize(src) < 4096
    with pytest.raises(ConversionLimitExceeded, match="shared") as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert info.value.limit == "flatten entries" and info.value.requested > info.value.allowed
    assert "bomb.pt" in str(info.value)
    assert not (tmp_path / "out.safetensors").exists()
    # --key around the bomb still converts the rest
    convert_file(src, tmp_path / "w.safetensors", key="w")
    assert_same_tensors(str(tmp_path / "w.safetensors"), {"w": torch.ones(2)})


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_ordinary_sharing_still_converts(tmp_path, legacy):
    """A state dict saved under two names (model and EMA copy) is shared, not a bomb."""
    sd = {f"layer{i}.weight": torch.randn(3, 2) for i in range(50)}
    config = {"lr": 0.1, "betas": [0.9, 0.99]}
    src = save({"model": sd, "ema": sd, "cfg": config, "cfg2": config}, tmp_path / "s.pt", legacy)
    report = convert_file(src, tmp_path / "s.safetensors")
    expected = flatten_torch(torch.load(src, weights_only=True))
    assert report.tensors == 50 and len(report.removed) == 50  # each ema.* tied to model.*
    assert_same_tensors(str(tmp_path / "s.safetensors"), expected, removed=report.removed)


def _zip_with_pickle(tmp_path, data_pkl: bytes) -> str:
    base = tmp_path / "base.pt"
    torch.save({"w": torch.arange(4, dtype=torch.float32)}, base)
    out = tmp_path / "forged.pt"
    replace_entry(str(base), str(out), "/data.pkl", data_pkl)
    return str(out)


def _tuple_dag_pickle(levels: int, container: str) -> bytes:
    """A pickle whose dict key / set element is ``t = (t, t)`` built ``levels`` times, each
    level a memo reference to the one below (a few bytes per level)."""
    t = bytearray(b")q\x000")  # EMPTY_TUPLE, BINPUT 0, POP
    for i in range(levels):
        t += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1]) + b"0"  # (t, t) as i+1
    t += b"h" + bytes([levels])
    if container == "dict":
        return b"\x80\x02}" + t + b"K\x01s."  # {t: 1}
    return b"\x80\x02cbuiltins\nset\n" + t + b"\x85\x85R."  # set((t,))


def convert_in_child(src: str, dst: str) -> str:
    """convert_file in a child process, killed after 60 s; its outcome as one line.

    The hash of a tuple and the repr of a list run inside C, holding the GIL, where neither
    pytest-timeout's signal nor its thread can interrupt them: only a separate process keeps a
    hang bounded (subprocess.TimeoutExpired fails the test)."""
    script = textwrap.dedent("""
        import sys
        from pysafetensors.convert import convert_file
        try:
            convert_file(sys.argv[1], sys.argv[2])
            print("converted")
        except Exception as e:
            print(type(e).__name__, getattr(e, "limit", None), "|", str(e)[:2000])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", script, src, dst], capture_output=True, text=True, env=env,
                          timeout=60, check=True)
    return proc.stdout.strip()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("container", ["dict", "set"])
def test_a_key_whose_hash_takes_forever_is_refused(tmp_path, container):
    """Tuples do not cache their hash: a 40-level shared tuple hashes 2**40 leaves."""
    src = _zip_with_pickle(tmp_path, _tuple_dag_pickle(40, container))
    outcome = convert_in_child(src, str(tmp_path / "out.safetensors"))
    assert outcome.startswith("ConversionLimitExceeded key size |"), outcome
    assert "nested parts" in outcome


class _DagList:
    """A list of 2**40 paths that pickles small (memo) and is never printed here."""

    @staticmethod
    def build(levels=40):
        node: list = []
        for _ in range(levels):
            node = [node, node]
        return node


@pytest.mark.timeout(90)
@pytest.mark.parametrize("container", ["list", "OrderedDict"])
def test_error_messages_do_not_print_a_shared_graph(tmp_path, container):
    """A bad argument's repr in an error message is bounded (a full repr would never end)."""
    from collections import OrderedDict

    graph = _DagList.build() if container == "list" else OrderedDict(a=_DagList.build())
    data = pickle.dumps({"w": Payload(torch.Size, graph)}, protocol=2)
    src = _zip_with_pickle(tmp_path, data)
    outcome = convert_in_child(src, str(tmp_path / "out.safetensors"))
    assert outcome.startswith("CorruptCheckpoint None |") and "torch.Size" in outcome, outcome
    assert len(outcome) < 1000


# --- item 2: allocation on demand --------------------------------------------------------------


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_bytearray_of_four_gigabytes_is_refused_before_allocating(tmp_path, legacy):
    src = save({"w": torch.ones(2), "x": Payload(bytearray, 4_000_000_000)}, tmp_path / "ba.pt", legacy)
    assert os.path.getsize(src) < 2048
    error, peak = peak_while(lambda: convert_file(src, tmp_path / "out.safetensors"))
    assert isinstance(error, ConversionLimitExceeded), error
    assert error.limit == "allocation budget" and error.requested == 4_000_000_000
    assert "bytearray(4,000,000,000)" in str(error)
    assert peak < SMALL_PEAK
    assert not (tmp_path / "out.safetensors").exists()


def test_small_bytearrays_still_load(tmp_path):
    src = save({"w": torch.ones(2), "x": Payload(bytearray, 1000), "y": bytearray(b"abc")}, tmp_path / "ok.pt", False)
    report = convert_file(src, tmp_path / "ok.safetensors")
    assert report.tensors == 1 and sorted(report.skipped) == ["x", "y"]


def test_forged_bytearray8_length_is_not_allocated(tmp_path):
    """Protocol 5's BYTEARRAY8 allocates its declared length before reading it in pickle.py."""
    data = b"\x80\x05\x96" + struct.pack("<Q", 4_000_000_000) + b"abc."
    src = _zip_with_pickle(tmp_path, data)
    error, peak = peak_while(lambda: convert_file(src, tmp_path / "out.safetensors"))
    assert isinstance(error, CorruptCheckpoint) and "BYTEARRAY8" in str(error), error
    assert peak < SMALL_PEAK


def _bomb_archive(path, storage: tuple[bytes, int, int], pickle_member=None) -> int:
    """A torch zip checkpoint by hand: data.pkl names one FloatStorage '0' of the inflated size."""
    stream, size, crc = storage
    placeholder = object()
    tensor = Payload(torch._utils._rebuild_tensor_v2, placeholder, 0, (size // 4,), (1,), False, {})
    pkl = torch_pickle({"w": tensor}, {id(placeholder): (torch.FloatStorage, "0", size // 4)})
    members = [pickle_member or stored("archive/data.pkl", pkl), stored("archive/byteorder", b"little"),
               ("archive/data/0", stream, 8, size, crc), stored("archive/version", b"3\n")]
    return write_zip(path, members)


@pytest.mark.timeout(120)
def test_deflated_storage_of_one_gib_is_not_inflated(tmp_path, writer_calls):
    """1 MB on disk that inflates to 1 GiB: the size the zip declares is checked against the
    bytes on disk (times the fixed factor) before anything is inflated or written."""
    src = tmp_path / "deflated.pt"
    size = _bomb_archive(src, deflated_zeros(b"", 1 << 30))
    assert size < 2 << 20
    error, peak = peak_while(lambda: convert_file(src, tmp_path / "out.safetensors"))
    assert isinstance(error, ConversionLimitExceeded), error
    assert error.requested == 1 << 30 and "archive/data/0" in str(error)
    assert peak < SMALL_PEAK
    assert writer_calls == []  # nor was the 1 GiB output preallocated


@pytest.mark.timeout(120)
def test_deflated_pickle_of_256_mib_is_not_inflated(tmp_path):
    prefix = b"\x80\x02X" + struct.pack("<I", 256 << 20)  # BINUNICODE of 256 MiB of NULs
    stream, size, crc = deflated_zeros(prefix, 256 << 20, b".")
    src = tmp_path / "pkl.pt"
    _bomb_archive(src, (b"", 0, 0), pickle_member=("archive/data.pkl", stream, 8, size, crc))
    error, peak = peak_while(lambda: convert_file(src, tmp_path / "out.safetensors"))
    assert isinstance(error, ConversionLimitExceeded) and "data.pkl" in str(error), error
    assert peak < SMALL_PEAK


@pytest.mark.timeout(120)
def test_deflated_npz_member_is_not_inflated(tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (64 << 20,)})
    stream, size, crc = deflated_zeros(buf.getvalue(), 256 << 20)
    src = tmp_path / "bomb.npz"
    write_zip(src, [("a.npy", stream, 8, size, crc)])
    error, peak = peak_while(lambda: convert_file(src, tmp_path / "out.safetensors"))
    assert isinstance(error, ConversionLimitExceeded) and "a.npy" in str(error), error
    assert peak < SMALL_PEAK


def test_compressed_checkpoints_within_the_budget_still_convert(tmp_path):
    """A re-zipped checkpoint of ordinary tensors inflates far less than the factor allows."""
    sd = {"w": torch.randn(256, 256), "z": torch.zeros(1000)}
    src = save(sd, tmp_path / "w.pt", False)
    rezipped = rezip(src, tmp_path / "deflated.pt")
    convert_file(str(rezipped), tmp_path / "w.safetensors")
    assert_same_tensors(str(tmp_path / "w.safetensors"), sd)


def test_a_stored_entry_larger_than_the_file_is_truncated_not_written(tmp_path, writer_calls):
    """A stored member whose declared size runs past the end of the file: 'truncated', before
    the output (sized from the declaration) is preallocated."""
    src = tmp_path / "short.pt"
    placeholder = object()
    tensor = Payload(torch._utils._rebuild_tensor_v2, placeholder, 0, (1 << 28,), (1,), False, {})
    pkl = torch_pickle({"w": tensor}, {id(placeholder): (torch.FloatStorage, "0", 1 << 28)})
    name, payload, method, _size, crc = stored("archive/data/0", f32([1.0, 2.0]))
    write_zip(src, [stored("archive/data.pkl", pkl), (name, payload, method, 1 << 30, crc)])
    with pytest.raises(CorruptCheckpoint, match="truncated") as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert "archive/data/0" in str(info.value)
    assert writer_calls == []  # refused before the output file was even opened


def test_memoised_numpy_buffer_cannot_multiply_the_output(tmp_path):
    """One pickled buffer reshaped many ways (protocol 5 _frombuffer with a memo reference):
    each use is charged, so 10,000 uses of 256 KiB are refused, not written as 2.5 GB."""
    buf = bytearray(256 << 10)  # 32768 float64s
    shapes = [(32768 >> k, 1 << k) for k in range(16)] * 625  # 10,000 views, 16 distinct shapes

    class View:
        def __init__(self, shape):
            self.shape = shape

        def __reduce__(self):
            return np._core.numeric._frombuffer, (buf, np.dtype("f8"), self.shape, "C")

    src = tmp_path / "views.pt"
    torch.save({"v": [View(s) for s in shapes]}, src, pickle_protocol=5)
    assert os.path.getsize(src) < 1 << 20
    error, _ = peak_while(lambda: convert_file(src, tmp_path / "out.safetensors"))
    assert isinstance(error, ConversionLimitExceeded), error
    assert not (tmp_path / "out.safetensors").exists()


def test_memoised_numpy_array_is_written_once(tmp_path):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = save({"a": arr, "b": arr}, tmp_path / "tied.pt", False)
    report = convert_file(src, tmp_path / "tied.safetensors")
    assert report.removed == {"b": "a"}
    got, meta = read_safetensors(str(tmp_path / "tied.safetensors"))
    assert got == {"a": ("F32", (3, 4), arr.tobytes())} and meta["b"] == "a"


def test_the_bomb_pickles_are_what_they_claim(tmp_path):
    """Control: the shared-reference file really describes 2**40 paths to a trusting loader,
    and the hand-built 1 GiB storage really inflates to 1 GiB."""
    src = save({"bomb": shared_bomb(1)}, tmp_path / "b.pt", False)
    node = torch.load(src, weights_only=True)["bomb"]
    depth = 0
    while isinstance(node, dict):
        assert node["a"] is node["b"]
        node, depth = node["a"], depth + 1
    assert depth == 40
    stream, size, crc = deflated_zeros(b"head", 8 << 20, b"tail")
    write_zip(tmp_path / "z.zip", [("z", stream, 8, size, crc)])
    data = entry(str(tmp_path / "z.zip"), "z")  # zipfile inflates it and checks the CRC
    assert data == b"head" + bytes(8 << 20) + b"tail" and size == len(data)
