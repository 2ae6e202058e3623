"""The broken/valid corpus: each broken file raises its specific class, and upstream agrees."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors import errors
from pysafetensors.errors import HeaderError, SafetensorError

_spec = importlib.util.spec_from_file_location("corpus_cases", Path(__file__).parents[1] / "corpus" / "cases.py")
assert _spec and _spec.loader
cases: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)

st = pytest.importorskip("safetensors")
snp = pytest.importorskip("safetensors.numpy")

_DETAIL_REASONS = ("invalid JSON in header: ", "invalid UTF-8 in header: ")


def _upstream_prefix(message: str) -> str:
    """Upstream's message up to its first detail (serde's own text differs from json's)."""
    for reason in _DETAIL_REASONS:
        if reason in message:
            return message[: message.index(reason) + len(reason)]
    return message


@pytest.mark.parametrize("name", sorted(cases.BROKEN))
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_broken_file_safe_open(name: str, backend: str, tmp_path: Path) -> None:
    data, cls_name = cases.BROKEN[name]
    cls = getattr(errors, cls_name)
    path = tmp_path / "f.safetensors"
    path.write_bytes(data)
    with pytest.raises(cls) as ours:
        pysafetensors.safe_open(path, "np", backend=backend)
    assert isinstance(ours.value, HeaderError)
    with pytest.raises(st.SafetensorError) as up:
        st.safe_open(str(path), "np")
    expected = _upstream_prefix(str(up.value))
    assert expected.startswith("Error while deserializing header: ")
    assert str(ours.value).startswith(expected), (str(ours.value), str(up.value))


@pytest.mark.parametrize("name", sorted(cases.BROKEN))
def test_broken_bytes_load(name: str) -> None:
    data, cls_name = cases.BROKEN[name]
    with pytest.raises(getattr(errors, cls_name)) as ours:
        pnp.load(data)
    with pytest.raises(st.SafetensorError) as up:
        snp.load(data)
    expected = _upstream_prefix(str(up.value))
    assert expected.startswith("Error while deserializing: ")
    assert str(ours.value).startswith(expected), (str(ours.value), str(up.value))
    with pytest.raises(getattr(errors, cls_name)):
        pysafetensors.deserialize(data)


def test_every_header_error_class_is_covered() -> None:
    used = {cls for _, cls in cases.BROKEN.values()}
    header_classes = {c.__name__ for c in vars(errors).values()
                      if isinstance(c, type) and issubclass(c, HeaderError) and c is not HeaderError}
    assert header_classes <= used


@pytest.mark.parametrize("name", sorted(cases.ACCEPTED))
def test_accepted_edge_cases_match_upstream(name: str, tmp_path: Path) -> None:
    data = cases.ACCEPTED[name]
    path = tmp_path / "f.safetensors"
    path.write_bytes(data)
    with st.safe_open(str(path), "np") as f:
        up_keys, up_meta = f.offset_keys(), f.metadata()
        up = {k: (f.get_tensor(k) if not name.startswith(("f4", "f6")) else None) for k in f.keys()}  # noqa: SIM118 - safe_open is not iterable
    for backend in ("mmap", "pread"):
        with pysafetensors.safe_open(path, "np", backend=backend) as g:
            assert g.offset_keys() == up_keys
            assert g.keys() == sorted(up_keys)
            assert g.metadata() == up_meta
            for k, v in up.items():
                ours = g.get_tensor(k)
                if v is not None:
                    assert ours.dtype == v.dtype and ours.shape == v.shape
                    assert ours.tobytes() == v.tobytes()


def test_reading_a_header_allocates_no_more_than_the_file(tmp_path: Path) -> None:
    import tracemalloc

    # A prefix claiming 99 MB on a 20-byte file fails on the length check, before any allocation.
    data = (99_000_000).to_bytes(8, "little") + b"{}" + b" " * 10
    path = tmp_path / "liar.safetensors"
    path.write_bytes(data)
    for backend in ("mmap", "pread"):
        tracemalloc.start()
        try:
            with pytest.raises(errors.InvalidHeaderLength, match="declares 99,000,000; the file has 20"):
                pysafetensors.safe_open(path, "np", backend=backend)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 1_000_000
    with pytest.raises(errors.InvalidHeaderLength, match="declares 99,000,000; the file has 20"):
        pnp.load(data)


def test_errors_are_safetensor_errors() -> None:
    for data, _ in cases.BROKEN.values():
        with pytest.raises(SafetensorError):
            pysafetensors.deserialize(data)


def test_corpus_writer(tmp_path: Path) -> None:
    cases.main(str(tmp_path))
    broken = sorted(p.stem for p in (tmp_path / "broken").iterdir())
    valid = sorted(p.stem for p in (tmp_path / "valid").iterdir())
    assert broken == sorted(cases.BROKEN) and valid == sorted(cases.ACCEPTED)
    for name in valid:
        with pysafetensors.safe_open(tmp_path / "valid" / f"{name}.safetensors", "np") as f:
            f.get_tensors()


@pytest.mark.parametrize("name", sorted(n for n in cases.ACCEPTED if not n.startswith(("f4", "f6"))))
def test_accepted_edge_cases_torch(name: str, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    stt = pytest.importorskip("safetensors.torch")
    import pysafetensors.torch as ptt

    path = tmp_path / "f.safetensors"
    path.write_bytes(cases.ACCEPTED[name])
    up = stt.load_file(str(path))
    for backend in ("mmap", "pread"):
        ours = ptt.load_file(path, backend=backend)
        assert ours.keys() == up.keys()
        for k, v in up.items():
            assert ours[k].dtype == v.dtype and ours[k].shape == v.shape and torch.equal(ours[k], v)
