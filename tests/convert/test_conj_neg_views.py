"""Conjugate and negative-bit torch views are saved (and converted) with the values they show.

torch keeps ``x.conj()`` and ``torch._neg_view(x)`` as views of the un-negated memory plus a
lazy bit.  Upstream safetensors 0.8.0 writes that raw memory, so its file silently holds the
wrong values (asserted below, to document the difference); torch itself refuses to view such
a tensor as bytes, which used to surface here as a raw RuntimeError.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
upstream = pytest.importorskip("safetensors.torch")

import pysafetensors.torch as ours
from pysafetensors.convert import convert_file

from .convert_helpers import assert_same_tensors


def views():
    x = torch.tensor([1 + 2j, 3 - 4j, -0.5 + 0j], dtype=torch.complex64)
    y = torch.tensor([[5 + 6j, -7 + 8j]], dtype=torch.complex64)
    return {
        "conj": x.conj(),
        "conj_of_literal": torch.tensor([1j, 2 + 3j]).conj(),
        "neg": torch._neg_view(torch.tensor([1.0, -2.0, 0.0])),
        "neg_int": torch._neg_view(torch.tensor([[1, -2], [3, 4]], dtype=torch.int32)),
        "conj_and_neg": torch._neg_view(y.conj()),
    }


def resolved(t):
    return t.resolve_conj().resolve_neg()


def raw_memory(t):
    """The values in the memory behind a view: what it shows, with its bits undone."""
    r = resolved(t)
    if t.is_neg():
        r = -r
    if t.is_conj():
        r = r.conj().resolve_conj()
    return r


@pytest.mark.parametrize("name", list(views()))
def test_save_file_writes_the_values_the_view_shows(tmp_path, name):
    t = views()[name]
    assert t.is_conj() or t.is_neg()
    ours.save_file({"t": t}, tmp_path / "ours.safetensors")
    loaded = ours.load_file(tmp_path / "ours.safetensors")["t"]
    assert not loaded.is_conj() and not loaded.is_neg()
    assert torch.equal(loaded, resolved(t))
    assert t.is_conj() or t.is_neg()  # the caller's tensor keeps its bits
    # the bytes API too
    assert torch.equal(ours.load(ours.save({"t": t}))["t"], resolved(t))
    # upstream's file holds the un-negated memory, read back as the wrong values
    upstream.save_file({"t": t}, str(tmp_path / "upstream.safetensors"))
    theirs = upstream.load_file(str(tmp_path / "upstream.safetensors"))["t"]
    assert not torch.equal(theirs, resolved(t))
    assert torch.equal(theirs, raw_memory(t))


def test_save_many_views_and_plain_tensors_together(tmp_path):
    tensors = {**views(), "plain": torch.arange(4.0)}
    ours.save_file(tensors, tmp_path / "all.safetensors")
    loaded = ours.load_file(tmp_path / "all.safetensors")
    assert set(loaded) == set(tensors)
    for name, t in tensors.items():
        assert torch.equal(loaded[name], resolved(t)), name


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_convert_checkpoint_holding_conj_and_neg_views(tmp_path, legacy):
    sd = dict(views())
    sd["imag_of_conj"] = torch.tensor([1 + 1j, 2 + 5j]).conj().imag  # a strided negative view
    src = tmp_path / "views.pt"
    torch.save(sd, src, _use_new_zipfile_serialization=not legacy)
    loaded = torch.load(src, weights_only=True)
    assert loaded["conj"].is_conj() and loaded["conj_and_neg"].is_neg()  # the bits are in the file
    convert_file(src, tmp_path / "views.safetensors", verify=False)
    assert_same_tensors(str(tmp_path / "views.safetensors"), {k: resolved(v) for k, v in loaded.items()})
    got = ours.load_file(tmp_path / "views.safetensors")
    for name, t in loaded.items():
        assert torch.equal(got[name], resolved(t)), name
