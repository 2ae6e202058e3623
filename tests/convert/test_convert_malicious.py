"""Malicious and broken inputs are refused, and nothing in them ever runs."""

from __future__ import annotations

import os
import pickle
import subprocess
from collections import OrderedDict

import pytest

from pysafetensors.convert import convert_file
from pysafetensors.errors import CorruptCheckpoint, UnsafePickle, UnsupportedCheckpoint

from .convert_helpers import entry, outcome, replace_entry, torch_pickle

torch = pytest.importorskip("torch")


class Payload:
    """Unpickling this runs ``func(*args)`` (what a hostile checkpoint would carry)."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def touch_command(marker) -> str:
    return f"touch {marker}"


def payloads(marker):
    """(label, object whose unpickling would create ``marker``, the global our error names)."""
    code = f"open({str(marker)!r}, 'w').close()"
    return [
        ("os.system", Payload(os.system, touch_command(marker)), "posix.system"),
        ("subprocess.Popen", Payload(subprocess.Popen, ["touch", str(marker)]), "subprocess.Popen"),
        ("builtins.eval", Payload(eval, code), "builtins.eval"),
        ("builtins.exec", Payload(exec, code), "builtins.exec"),
        # a global from an arbitrary module, called with a nested reduce as its argument
        ("nested", Payload(os.system, Payload(str, touch_command(marker))), "posix.system"),
    ]


PAYLOAD_IDS = ["os.system", "subprocess.Popen", "builtins.eval", "builtins.exec", "nested"]


@pytest.mark.parametrize("index", range(len(PAYLOAD_IDS)), ids=PAYLOAD_IDS)
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_code_execution_payloads_are_refused(tmp_path, index, legacy):
    marker = tmp_path / "pwned"
    _label, payload, global_name = payloads(marker)[index]
    src = tmp_path / "evil.pt"
    torch.save({"weight": torch.ones(2), "evil": payload}, src, _use_new_zipfile_serialization=not legacy)
    assert not marker.exists()
    with pytest.raises(UnsafePickle) as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert global_name in str(info.value) and info.value.global_name == global_name
    assert isinstance(info.value.position, int) and f"byte {info.value.position}" in str(info.value)
    assert not marker.exists()
    assert not (tmp_path / "out.safetensors").exists()


def test_the_payload_is_live(tmp_path):
    """Control: the same file run by a trusting loader does create the marker."""
    marker = tmp_path / "pwned"
    src = tmp_path / "evil.pt"
    torch.save({"evil": Payload(os.system, touch_command(marker))}, src)
    with pytest.raises(UnsafePickle):
        convert_file(src, tmp_path / "out.safetensors")
    assert not marker.exists()
    torch.load(src, weights_only=False)
    assert marker.exists()


class Custom:
    def __init__(self):
        self.x = 1


def _zip_with_pickle(tmp_path, data_pkl: bytes, name="forged.pt") -> str:
    base = tmp_path / "base.pt"
    torch.save({"w": torch.arange(4, dtype=torch.float32)}, base)  # storage "0": 4 floats
    out = tmp_path / name
    replace_entry(str(base), str(out), "/data.pkl", data_pkl)
    return str(out)


class FakeStorage:
    pass


class FakeTensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


def forged(tmp_path, offset, size, stride, numel=4, stype=None):
    storage = FakeStorage()
    data = torch_pickle({"w": FakeTensor(storage, offset, size, stride)},
                        {id(storage): (stype or torch.FloatStorage, "0", numel)})
    return _zip_with_pickle(tmp_path, data)


def test_forged_record_that_is_valid_converts(tmp_path):
    src = forged(tmp_path, 1, (3,), (1,))
    report = convert_file(src, tmp_path / "ok.safetensors")
    assert report.tensors == 1
    assert torch.equal(torch.load(src, weights_only=True)["w"], torch.tensor([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("offset,size,stride,numel", [
    (4, (1,), (1,), 4),          # offset past the end
    (0, (5,), (1,), 4),          # runs past the end
    (0, (2, 2), (3, 1), 4),      # strided past the end
    (10**15, (1,), (1,), 4),     # absurd offset
    (-1, (1,), (1,), 4),         # negative offset
    (0, (2,), (-1,), 4),         # negative stride
    (0, (1,), (1,), 1000),       # storage larger than its archive entry
], ids=["offset", "size", "stride", "huge", "negative", "negative-stride", "numel"])
def test_out_of_range_storage_is_refused(tmp_path, offset, size, stride, numel):
    src = forged(tmp_path, offset, size, stride, numel)
    with pytest.raises(CorruptCheckpoint, match=r"byte \d+"):
        convert_file(src, tmp_path / "out.safetensors")
    assert not (tmp_path / "out.safetensors").exists()


def _str(text: bytes) -> bytes:
    return b"X" + len(text).to_bytes(4, "little") + text


def raw_pickles(marker):
    cmd = touch_command(marker).encode()
    return {
        # getattr(__import__('os'), 'system')(cmd): reduces nested three deep
        "getattr-import": b"\x80\x02cbuiltins\ngetattr\ncbuiltins\n__import__\n(" + _str(b"os") + b"tR"
        + _str(b"system") + b"\x86R(" + _str(cmd) + b"tR.",
        # protocol 0 INST: builds an instance by name
        "inst": b"(S'" + cmd + b"'\nios\nsystem\n.",
        # OBJ with a class from the stack
        "obj": b"(cos\nsystem\nS'" + cmd + b"'\no.",
        # an extension-registry code (EXT1)
        "ext": b"\x80\x02\x82\x01.",
        # REDUCE on something that is not an allowlisted global: an OrderedDict instance
        "reduce-instance": b"\x80\x02ccollections\nOrderedDict\n)R)R.",
        # BUILD (__setstate__) on a tensor stand-in from the allowlist
        "build-on-size": b"\x80\x02ctorch\nSize\n)R}b.",
        # APPEND to a non-list (would look up .append on the object)
        "append-to-set": b"\x80\x02cbuiltins\nset\n)RK\x01a.",
        # an arbitrary class, by its module path
        "custom-class": pickle.dumps(Custom(), protocol=2),
        # STACK_GLOBAL form (protocol 4) of os.system
        "stack-global": pickle.dumps(Payload(os.system, touch_command(marker)), protocol=4),
        # a torch global that is not on the allowlist
        "torch-load": b"\x80\x02ctorch\nload\nX\x01\x00\x00\x00xR.",
    }


@pytest.mark.parametrize("case", list(raw_pickles("m")), ids=list(raw_pickles("m")))
def test_forbidden_opcodes_and_globals(tmp_path, case):
    marker = tmp_path / "pwned"
    src = _zip_with_pickle(tmp_path, raw_pickles(marker)[case])
    with pytest.raises(UnsafePickle) as info:
        convert_file(src, tmp_path / "out.safetensors")
    assert "byte" in str(info.value)
    assert not marker.exists()


def test_pickled_module_objects_are_refused(tmp_path):
    for legacy in (False, True):
        src = tmp_path / f"module{legacy}.pt"
        torch.save(torch.nn.Linear(2, 2), src, _use_new_zipfile_serialization=not legacy)
        with pytest.raises(UnsafePickle, match="Linear|nn.Module"):
            convert_file(src, tmp_path / "out.safetensors")


def test_quantized_and_sparse_are_refused_clearly(tmp_path):
    q = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    torch.save({"q": q}, tmp_path / "q.pt")
    with pytest.raises(UnsupportedCheckpoint, match="_rebuild_qtensor.*quantized"):
        convert_file(tmp_path / "q.pt", tmp_path / "out.safetensors")
    torch.save({"s": torch.eye(3).to_sparse()}, tmp_path / "s.pt")
    with pytest.raises(UnsupportedCheckpoint, match="sparse"):
        convert_file(tmp_path / "s.pt", tmp_path / "out.safetensors")


def test_torchscript_archive_is_refused(tmp_path):
    scripted = torch.jit.script(torch.nn.Linear(2, 2))
    torch.jit.save(scripted, tmp_path / "ts.pt")
    with pytest.raises(UnsupportedCheckpoint, match="TorchScript"):
        convert_file(tmp_path / "ts.pt", tmp_path / "out.safetensors")


def test_truncated_zip(tmp_path):
    src = tmp_path / "full.pt"
    torch.save({"w": torch.randn(64, 64)}, src)
    data = src.read_bytes()
    for cut in (len(data) // 2, len(data) - 30, 100):
        bad = tmp_path / "cut.pt"
        bad.write_bytes(data[:cut])
        with pytest.raises(CorruptCheckpoint, match="truncated"):
            convert_file(bad, tmp_path / "out.safetensors")


def test_truncated_pickle_in_zip(tmp_path):
    base = tmp_path / "base.pt"
    torch.save({"w": torch.ones(3), "v": torch.zeros(2)}, base)
    pkl = entry(str(base), "/data.pkl")
    src = tmp_path / "cut.pt"
    replace_entry(str(base), str(src), "/data.pkl", pkl[: len(pkl) // 2])
    with pytest.raises(CorruptCheckpoint, match=r"truncated pickle at byte \d+"):
        convert_file(src, tmp_path / "out.safetensors")


def test_missing_storage_entry(tmp_path):
    base = tmp_path / "base.pt"
    torch.save({"w": torch.ones(3)}, base)
    src = tmp_path / "nostorage.pt"
    replace_entry(str(base), str(src), "/data/0", None)
    with pytest.raises(CorruptCheckpoint, match="no archive entry"):
        convert_file(src, tmp_path / "out.safetensors")


def test_truncated_legacy_file(tmp_path):
    src = tmp_path / "legacy.pt"
    torch.save({"w": torch.randn(100), "v": torch.randn(10)}, src, _use_new_zipfile_serialization=False)
    data = src.read_bytes()
    for cut in (len(data) - 8, len(data) - 500, 40, 3):
        bad = tmp_path / "cut.pt"
        bad.write_bytes(data[:cut])
        with pytest.raises(CorruptCheckpoint, match="truncated|magic"):
            convert_file(bad, tmp_path / "out.safetensors")


def test_not_a_checkpoint(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"hello world, not a checkpoint")
    with pytest.raises(CorruptCheckpoint, match="not a PyTorch checkpoint"):
        convert_file(tmp_path / "x.pt", tmp_path / "out.safetensors")
    (tmp_path / "empty.pt").write_bytes(b"")
    with pytest.raises(CorruptCheckpoint, match="empty"):
        convert_file(tmp_path / "empty.pt", tmp_path / "out.safetensors")


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_mutated_checkpoints_fail_only_with_safetensor_errors(tmp_path, legacy):
    """Random byte flips in the pickle: converted or refused with a SafetensorError, never
    another exception, and never code execution (no global outside the allowlist resolves)."""
    import random


    sd = {"a": torch.randn(2, 3), "b": torch.arange(4)[1:3], "n": {"x": torch.ones(2, dtype=torch.bfloat16)},
          "e": 3, "f8": torch.zeros(3, dtype=torch.float8_e4m3fn)}
    src = tmp_path / "f.pt"
    torch.save(sd, src, _use_new_zipfile_serialization=not legacy)
    original = src.read_bytes()
    pkl = entry(str(src), "/data.pkl") if not legacy else b""
    rng = random.Random(7)
    bad = tmp_path / "m.pt"
    outcomes = set()
    for _ in range(150):
        if legacy:
            data = bytearray(original)
            limit = min(len(data), 700)  # the pickles, not the raw storage bytes
        else:
            data = bytearray(pkl)
            limit = len(data)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(limit)] = rng.randrange(256)
        if legacy:
            bad.write_bytes(bytes(data))
        else:
            replace_entry(str(src), str(bad), "/data.pkl", bytes(data))
        outcomes.add(outcome(bad, tmp_path / "m.safetensors"))
    assert "CorruptCheckpoint" in outcomes


def test_expansion_bomb_is_refused_before_writing(tmp_path):
    # one float viewed with stride 0 as 2**40 elements: 4 TB from a few hundred bytes
    src = forged(tmp_path, 0, (2**40,), (0,), numel=1)
    with pytest.raises(CorruptCheckpoint, match="expand"):
        convert_file(src, tmp_path / "bomb.safetensors", verify=False)
    assert not (tmp_path / "bomb.safetensors").exists()
