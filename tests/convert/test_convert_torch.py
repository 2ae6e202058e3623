"""Checkpoints written by real torch.save convert to exactly what torch.load(weights_only=True) returns."""

from __future__ import annotations

import os
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.convert import convert_file
from pysafetensors.errors import ConversionError, UnsupportedDtype, VerificationFailed

from .convert_helpers import assert_same_tensors, flatten_torch, read_safetensors, rezip, torch_facts

torch = pytest.importorskip("torch")

ALL_DTYPES = [
    "bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64",
    "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float4_e2m1fn_x2",
]
# dtypes the legacy format writes with a typed storage class (the rest use UntypedStorage,
# which torch's own legacy loader cannot read back).
LEGACY_TYPED = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                "float32", "float64", "complex64"}


def random_tensor(dtype_name: str, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """Arbitrary bit patterns (NaNs included) of any dtype: bytes viewed as that dtype."""
    dtype = getattr(torch, dtype_name)
    n = 1
    for d in shape:
        n *= d
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (n * dtype.itemsize,), dtype=torch.uint8, generator=gen)
    if dtype == torch.bool:
        raw = raw % 2
    return raw.view(dtype).reshape(shape)


def save(obj, path, legacy=False):
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    return str(path)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_every_dtype(tmp_path, legacy):
    sd = {name: random_tensor(name, (3, 4), seed=i) for i, name in enumerate(ALL_DTYPES)}
    src = save(sd, tmp_path / "all.pt", legacy)
    report = convert_file(src, tmp_path / "all.safetensors")
    assert report.verified and report.tensors == len(ALL_DTYPES)
    assert report.source_kind == ("torch-legacy" if legacy else "torch-zip")
    if not legacy:
        expected = torch.load(src, weights_only=True)
    else:
        loaded = torch.load(save({k: sd[k] for k in LEGACY_TYPED}, tmp_path / "typed.pt", True), weights_only=True)
        expected = dict(sd)
        assert all(torch.equal(loaded[k].view(torch.uint8), sd[k].view(torch.uint8)) for k in LEGACY_TYPED)
    assert_same_tensors(str(tmp_path / "all.safetensors"), flatten_torch(expected))
    _, meta = read_safetensors(str(tmp_path / "all.safetensors"))
    assert meta == {"format": "pt"}


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_views_noncontiguous_zero_dim_and_empty(tmp_path, legacy):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    sd = {
        "base": base,
        "row": base[1],
        "col": base[:, 2],
        "transposed": base.t(),
        "strided": base[::2, ::3],
        "expanded": torch.arange(3.0).expand(4, 3),  # stride 0
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.empty(0, 5),
        "empty_view": base[2:2],
        "offset_scalar": base[3, 4],
    }
    src = save(sd, tmp_path / "v.pt", legacy)
    # Views expand into copies, so the output is far larger than the storages: a finding.
    with pytest.raises(VerificationFailed) as info:
        convert_file(src, tmp_path / "v.safetensors")
    report = info.value.report
    assert any("more than the source" in f for f in report.findings)
    assert os.path.exists(tmp_path / "v.safetensors")  # correct, just larger: kept
    expected = flatten_torch(torch.load(src, weights_only=True))
    assert_same_tensors(str(tmp_path / "v.safetensors"), expected)
    # --no-verify writes the same file without complaint
    report = convert_file(src, tmp_path / "nv.safetensors", verify=False)
    assert not report.verified and not report.findings
    assert read_safetensors(str(tmp_path / "nv.safetensors")) == read_safetensors(str(tmp_path / "v.safetensors"))


def test_disjoint_views_of_one_storage_pass_the_size_check(tmp_path):
    big = torch.arange(100, dtype=torch.float32)
    sd = {"first": big[:50], "second": big[50:]}
    report = convert_file(save(sd, tmp_path / "s.pt"), tmp_path / "s.safetensors")
    assert report.verified and report.tensor_bytes == report.source_bytes == 400
    assert_same_tensors(str(tmp_path / "s.safetensors"), sd)


class Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(5, 3)
        self.head = torch.nn.Linear(3, 5, bias=False)
        self.head.weight = self.embed.weight
        self.norm = torch.nn.LayerNorm(3)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_tied_weights_kept_once_and_recorded(tmp_path, legacy):
    model = Tied()
    src = save(model.state_dict(), tmp_path / "tied.pt", legacy)
    report = convert_file(src, tmp_path / "tied.safetensors")
    assert report.removed == {"head.weight": "embed.weight"}
    got, meta = read_safetensors(str(tmp_path / "tied.safetensors"))
    assert meta == {"format": "pt", "head.weight": "embed.weight"}
    assert "head.weight" not in got
    assert_same_tensors(str(tmp_path / "tied.safetensors"), dict(torch.load(src, weights_only=True)),
                        removed={"head.weight": "embed.weight"})


def test_nested_training_checkpoint_flattened_or_selected(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    ckpt = {"epoch": 3, "state_dict": model.state_dict(), "optimizer": opt.state_dict(),
            "config": {"lr": 1e-3, "name": "x", "betas": (0.9, 0.99), "tags": {"a", "b"}, "blob": b"\x00\xff"}}
    src = save(ckpt, tmp_path / "ckpt.pt")
    expected_all = flatten_torch(torch.load(src, weights_only=True))
    report = convert_file(src, tmp_path / "all.safetensors")
    assert_same_tensors(str(tmp_path / "all.safetensors"), expected_all)
    assert "optimizer.state.0.exp_avg" in expected_all and "epoch" in report.skipped
    report = convert_file(src, tmp_path / "sd.safetensors", key="state_dict")
    assert_same_tensors(str(tmp_path / "sd.safetensors"), dict(model.state_dict()))
    report = convert_file(src, tmp_path / "one.safetensors", key="state_dict.0.weight")
    assert_same_tensors(str(tmp_path / "one.safetensors"), {"state_dict.0.weight": model[0].weight})
    with pytest.raises(ConversionError, match="no entry 'nope'"):
        convert_file(src, tmp_path / "bad.safetensors", key="state_dict.nope")


def test_keys_containing_dots_and_int_keys(tmp_path):
    sd = {"a.b": {"c": torch.ones(2)}, 7: torch.zeros(1), "lst": [torch.ones(1), (torch.full((2,), 3.0),)]}
    src = save(sd, tmp_path / "d.pt")
    convert_file(src, tmp_path / "d.safetensors")
    assert_same_tensors(str(tmp_path / "d.safetensors"), flatten_torch(torch.load(src, weights_only=True)))
    convert_file(src, tmp_path / "k.safetensors", key="a.b")
    assert_same_tensors(str(tmp_path / "k.safetensors"), {"c": torch.ones(2)})


def test_parameters_conj_neg_and_tensor_attributes(tmp_path):
    p = torch.nn.Parameter(torch.randn(3))
    p.note = "parameter with state"  # -> _rebuild_parameter_with_state
    t = torch.randn(2)
    t.tag = "x"  # -> _rebuild_from_type_v2
    c = torch.randn(3, dtype=torch.complex64)
    sd = {"p": p, "t": t, "conj": c.conj(), "neg": torch._neg_view(torch.randn(3)),
          "plain_param": torch.nn.Parameter(torch.ones(2))}
    src = save(sd, tmp_path / "p.pt")
    convert_file(src, tmp_path / "p.safetensors")
    loaded = torch.load(src, weights_only=True)
    assert loaded["conj"].is_conj()  # the checkpoint really carries the conj bit
    assert_same_tensors(str(tmp_path / "p.safetensors"), dict(loaded))


def test_ordered_dict_root_and_bare_tensor(tmp_path):
    od = OrderedDict([("z", torch.ones(1)), ("a", torch.zeros(2))])
    convert_file(save(od, tmp_path / "od.pt"), tmp_path / "od.safetensors")
    assert_same_tensors(str(tmp_path / "od.safetensors"), dict(od))
    t = torch.arange(6).reshape(2, 3)
    convert_file(save(t, tmp_path / "t.pt"), tmp_path / "t.safetensors")
    assert_same_tensors(str(tmp_path / "t.safetensors"), {"tensor": t})


def test_unconvertible_dtype_only_fails_when_selected(tmp_path):
    ckpt = {"good": {"w": torch.ones(2)}, "bad": {"c": torch.ones(2, dtype=torch.complex128)}}
    src = save(ckpt, tmp_path / "c.pt")
    with pytest.raises(UnsupportedDtype, match="complex128"):
        convert_file(src, tmp_path / "c.safetensors")
    convert_file(src, tmp_path / "g.safetensors", key="good")
    assert_same_tensors(str(tmp_path / "g.safetensors"), {"w": torch.ones(2)})


def test_big_endian_archive(tmp_path):
    sd = {"f": torch.randn(5), "c": torch.randn(3, dtype=torch.complex64), "h": torch.randn(2).half(),
          "b": torch.tensor([1, 0, 1], dtype=torch.bool)}
    src = save(sd, tmp_path / "le.pt")
    # Rewrite as a big-endian host would have written it: storage keys follow insertion order.
    swap = {"0": 4, "1": 4, "2": 2, "3": 1}
    be = tmp_path / "be.pt"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(be, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            key = info.filename.rsplit("/", 1)[-1]
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename and swap[key] > 1:
                data = np.frombuffer(data, f"<u{swap[key]}").byteswap().tobytes()
            zout.writestr(info.filename, data)
    report = convert_file(str(be), tmp_path / "be.safetensors")
    assert report.verified
    assert_same_tensors(str(tmp_path / "be.safetensors"), sd)


def test_compressed_storage_entries(tmp_path):
    sd = {"w": torch.randn(4, 4), "v": torch.arange(5)}
    src = save(sd, tmp_path / "w.pt")
    rezipped = rezip(src, tmp_path / "deflated.pt")
    convert_file(str(rezipped), tmp_path / "w.safetensors")
    assert_same_tensors(str(tmp_path / "w.safetensors"), sd)


def test_user_metadata_and_refusing_to_overwrite_source(tmp_path):
    src = save({"w": torch.ones(2)}, tmp_path / "m.pt")
    report = convert_file(src, tmp_path / "m.safetensors", metadata={"source": "unit test"})
    assert report.metadata == {"format": "pt", "source": "unit test"}
    assert read_safetensors(str(tmp_path / "m.safetensors"))[1] == report.metadata
    with pytest.raises(ConversionError, match="overwrite the source"):
        convert_file(src, src)
    assert torch_facts(torch.load(src, weights_only=True)["w"])[0] == "F32"  # untouched


def test_verification_catches_a_corrupted_write(tmp_path, monkeypatch):
    from pysafetensors.convert import api

    real_open_writer = api.open_writer

    class CorruptingWriter:
        """The real incremental writer, then one flipped data byte once the file is in place."""

        def __init__(self, path, *args, **kwargs):
            self.path = Path(path)
            self.inner = real_open_writer(path, *args, **kwargs)

        def write(self, name, data):
            self.inner.write(name, data)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.__exit__(*exc)
            data = bytearray(self.path.read_bytes())
            data[-1] ^= 0xFF  # flip the last data byte
            self.path.write_bytes(bytes(data))

    monkeypatch.setattr(api, "open_writer", CorruptingWriter)
    src = save({"w": torch.randn(8)}, tmp_path / "w.pt")
    with pytest.raises(VerificationFailed, match="differ") as info:
        convert_file(src, tmp_path / "w.safetensors")
    assert info.value.report.findings == ["w: written bytes differ from the source"]
    assert not (tmp_path / "w.safetensors").exists()  # a mismatching file is not left behind


@pytest.mark.parametrize("protocol", [1, 4, 5])
def test_other_pickle_protocols(tmp_path, protocol):
    sd = {"w": torch.randn(3, 3), "big": torch.arange(70000, dtype=torch.int32), "meta": {"k": "v" * 70000}}
    for legacy in (False, True):
        src = str(tmp_path / f"p{legacy}.pt")
        torch.save(sd, src, pickle_protocol=protocol, _use_new_zipfile_serialization=not legacy)
        convert_file(src, tmp_path / "p.safetensors")
        assert_same_tensors(str(tmp_path / "p.safetensors"), {"w": sd["w"], "big": sd["big"]})


def _legacy_file(path, view, size):
    """A legacy checkpoint by hand: one float storage of 6 elements, seen through a storage view."""
    import io
    import pickle
    import struct

    class Placeholder:
        pass

    storage = Placeholder()

    class T:
        def __reduce__(self):
            return torch._utils._rebuild_tensor_v2, (storage, 0, (size,), (1,), False, OrderedDict())

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if o is storage:
                return ("storage", torch.FloatStorage, "0", "cpu", 6, view)
            return None

    buf = io.BytesIO()
    for header in (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True}):
        pickle.dump(header, buf, protocol=2)
    P(buf, protocol=2).dump({"w": T()})
    pickle.dump(["0"], buf, protocol=2)
    buf.write(struct.pack("<q", 6) + np.arange(6, dtype="<f4").tobytes())
    path.write_bytes(buf.getvalue())
    return str(path)


def test_legacy_storage_views(tmp_path):
    src = _legacy_file(tmp_path / "view.pt", ("view-key", 2, 3), 3)
    convert_file(src, tmp_path / "view.safetensors")
    assert_same_tensors(str(tmp_path / "view.safetensors"), {"w": torch.tensor([2.0, 3.0, 4.0])})
    with pytest.raises(ConversionError, match="outside storage"):
        convert_file(_legacy_file(tmp_path / "bad.pt", ("view-key", 4, 3), 3), tmp_path / "bad.safetensors")
    with pytest.raises(ConversionError, match="reaches element"):
        convert_file(_legacy_file(tmp_path / "bad2.pt", ("view-key", 2, 3), 4), tmp_path / "bad.safetensors")
