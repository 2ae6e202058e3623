"""The torch face against upstream: save/load, every dtype, tied weights, errors, devices (slicing:
test_torch_slicing.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
stt = pytest.importorskip("safetensors.torch")
st = pytest.importorskip("safetensors")

import pysafetensors.torch as ptt
from pysafetensors import SafetensorError, safe_open
from pysafetensors.errors import NotAMapping

ALL_DTYPES = [
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.uint16, torch.float16, torch.bfloat16, torch.int32,
    torch.uint32, torch.float32, torch.complex64, torch.float64, torch.int64, torch.uint64, torch.float8_e5m2,
    torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float4_e2m1fn_x2,
]
UPSTREAM_CANNOT_LOAD = {torch.float8_e8m0fnu, torch.float4_e2m1fn_x2}


def _make(dtype: Any, shape: tuple[int, ...]) -> Any:
    n = 1
    for d in shape:
        n *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = (torch.arange(n * itemsize) * 29 % 251).to(torch.uint8)
    if dtype == torch.bool:
        return (torch.arange(n) % 2 == 0).reshape(shape)
    if dtype in (torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        raw[raw == 0x80] = 0  # the NaN pattern: NaN != NaN would break equality checks
    return raw.view(dtype).reshape(shape)


def _bytes(t: Any) -> bytes:
    return bytes(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())


def _same(a: Any, b: Any) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and _bytes(a) == _bytes(b)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_every_dtype_matches_upstream(dtype: Any, backend: str, tmp_path: Path) -> None:
    tensors = {"m": _make(dtype, (3, 4)), "v": _make(dtype, (5,)), "s": _make(dtype, ()), "e": _make(dtype, (0, 2))}
    if dtype == torch.float4_e2m1fn_x2:
        # a 0-d float4_e2m1fn_x2 has no F4 file shape: both libraries refuse it
        scalar = tensors.pop("s")
        ours_err, up_err = _both(lambda m: m.save({"s": scalar}))
        assert isinstance(ours_err, SafetensorError)
        assert "byte boundary" in str(up_err) and "byte boundary" in str(ours_err)
    ours = ptt.save(tensors, metadata={"format": "pt"})
    assert ours == stt.save(tensors, metadata={"format": "pt"})
    path = tmp_path / "t.safetensors"
    ptt.save_file(tensors, path, metadata={"format": "pt"})
    assert path.read_bytes() == ours
    back = ptt.load_file(path, backend=backend)
    assert list(back) == [n for n, _ in st.deserialize(ours)] or set(back) == set(tensors)
    for k, t in tensors.items():
        assert _same(back[k], t), k
    for k, t in ptt.load(ours).items():
        assert _same(t, tensors[k])
    if dtype not in UPSTREAM_CANNOT_LOAD:
        up = stt.load_file(str(path))
        for k, t in tensors.items():
            assert _same(up[k], t)


def test_mmap_tensors_are_zero_copy(tmp_path: Path) -> None:
    path = tmp_path / "z.safetensors"
    ptt.save_file({"a": torch.arange(64, dtype=torch.float32), "b": torch.ones(8, dtype=torch.int64)}, path)
    with safe_open(path, "pt") as f:
        a1, a2, b = f.get_tensor("a"), f.get_tensor("a"), f.get_tensor("b")
        assert a1.data_ptr() == a2.data_ptr()  # both view the one map, no copies
        # I64 "b" is written first (64 bytes), then "a": the tensors sit where the file has them
        assert a1.data_ptr() - b.data_ptr() == 64
    with safe_open(path, "pt", backend="pread") as f:
        assert f.get_tensor("a").data_ptr() != f.get_tensor("a").data_ptr()


def test_mmap_tensors_share_the_map_and_writes_do_not_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    ptt.save_file({"a": torch.arange(10, dtype=torch.float32)}, path)
    before = path.read_bytes()
    t = ptt.load_file(path)["a"]
    t2 = ptt.load_file(path, backend="pread")["a"]
    t += 1
    t2 += 1
    assert path.read_bytes() == before
    assert ptt.load_file(path)["a"].tolist() == list(range(10))
    loaded = ptt.load(before)["a"]
    loaded += 1  # bytes input is immutable: the tensor must own a copy
    assert before == path.read_bytes()


# --- errors: same types and messages as upstream --------------------------------------------------


def _both(call: Any) -> tuple[BaseException, BaseException]:
    errs = []
    for mod in (ptt, stt):
        with pytest.raises(Exception) as e:
            call(mod)
        errs.append(e.value)
    return errs[0], errs[1]


def _views(base: Any, a: slice, c: slice) -> dict[str, Any]:
    return {"a": base[a], "c": base[c]}


@pytest.mark.parametrize(
    "tensors",
    [
        pytest.param(lambda: {"a": [1, 2]}, id="non-tensor"),
        pytest.param(lambda: {"a": torch.zeros(4, 4).to_sparse()}, id="sparse"),
        pytest.param(lambda: {"a": torch.zeros(4, 4).t()}, id="non-contiguous"),
        pytest.param(lambda: _views(torch.zeros(4), slice(None), slice(None)), id="shared"),
        pytest.param(lambda: _views(torch.zeros(4), slice(0, 2), slice(1, None)), id="overlapping"),
    ],
)
def test_save_errors_match_upstream(tensors: Any, tmp_path: Path) -> None:
    ours, up = _both(lambda m: m.save(tensors()))
    assert type(ours) is type(up) and str(ours) == str(up)
    ours, up = _both(lambda m: m.save_file(tensors(), str(tmp_path / "x.safetensors")))
    assert type(ours) is type(up) and str(ours) == str(up)


def test_not_a_dict_is_the_error_every_face_raises(tmp_path: Path) -> None:
    # Upstream's torch face raises ValueError, its numpy face TypeError: ours is one error, both.
    ours, up = _both(lambda m: m.save([torch.zeros(1)]))
    assert isinstance(ours, NotAMapping) and isinstance(ours, type(up)) and isinstance(ours, TypeError)
    with pytest.raises(NotAMapping, match="got list"):
        ptt.save_file([torch.zeros(1)], str(tmp_path / "x.safetensors"))  # type: ignore[arg-type]


def test_disjoint_views_of_one_storage_are_not_shared() -> None:
    b = torch.arange(4, dtype=torch.float32)
    tensors = {"a": b[:2], "c": b[2:]}
    assert ptt.save(tensors) == stt.save(tensors)


# --- shared-tensor helpers -------------------------------------------------------------------------


def _examples() -> list[dict[str, Any]]:
    base = torch.zeros(10)
    w = torch.ones(3, 4)
    return [
        {"a": base, "b": base, "c": torch.zeros(2)},
        {"a": base[:5], "b": base[5:]},
        {"a": base[:6], "b": base[4:], "c": base},
        {"x": w, "y": w.view(4, 3), "z": w.t()},
        {"m": torch.empty(0), "n": torch.empty(0)},
        {"p": base[:6], "q": base[4:]},  # overlapping, neither covers the storage: upstream refuses
        {"r": torch.arange(6.0).reshape(2, 3)[:, 1], "s": torch.arange(6.0)},
        {"meta": torch.empty(3, device="meta"), "meta2": torch.empty(3, device="meta")},
    ]


@pytest.mark.parametrize("i", range(len(_examples())))
def test_shared_helpers_agree_with_upstream(i: int) -> None:
    ex = _examples()[i]
    for name in ex:
        assert ptt.storage_ptr(ex[name]) == stt.storage_ptr(ex[name])
        assert ptt.storage_size(ex[name]) == stt.storage_size(ex[name])
    try:
        up = sorted(sorted(g) for g in stt._find_shared_tensors(ex))
    except Exception as e:  # noqa: BLE001 - upstream fails on some views; we must fail the same way
        with pytest.raises(type(e)) as mine:
            ptt._find_shared_tensors(ex)
        assert str(mine.value) == str(e)
        return
    assert sorted(sorted(g) for g in ptt._find_shared_tensors(ex)) == up
    for kwargs in ({}, {"preferred_names": ["b", "y"]}, {"discard_names": ["a", "x"]}):
        try:
            expected: Any = dict(stt._remove_duplicate_names(ex, **kwargs))
        except Exception as e:  # noqa: BLE001 - compare whatever upstream raises
            with pytest.raises(type(e)) as mine:
                ptt._remove_duplicate_names(ex, **kwargs)
            assert str(mine.value) == str(e)
            continue
        assert dict(ptt._remove_duplicate_names(ex, **kwargs)) == expected


class Tied(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(6, 4)
        self.proj = torch.nn.Linear(4, 4)
        self.lm_head = torch.nn.Linear(4, 6, bias=False)
        self.lm_head.weight = self.embed.weight
        torch.manual_seed(0)
        for p in self.parameters():
            torch.nn.init.normal_(p)


class Untied(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(6, 4)
        self.proj = torch.nn.Linear(4, 4)
        self.lm_head = torch.nn.Linear(4, 6, bias=False)


def test_save_model_tied_weights_matches_upstream(tmp_path: Path) -> None:
    model = Tied()
    ptt.save_model(model, str(tmp_path / "ours.safetensors"), metadata={"format": "pt"})
    stt.save_model(model, str(tmp_path / "up.safetensors"), metadata={"format": "pt"})
    # upstream orders metadata randomly: compare the parsed headers, then everything else
    ours_items = st.deserialize((tmp_path / "ours.safetensors").read_bytes())
    up_items = st.deserialize((tmp_path / "up.safetensors").read_bytes())
    assert sorted(ours_items) == sorted(up_items)
    with st.safe_open(str(tmp_path / "up.safetensors"), "pt") as g:
        up_meta = g.metadata()
    with safe_open(tmp_path / "ours.safetensors", "pt") as f:
        assert f.metadata() == {"format": "pt", "lm_head.weight": "embed.weight"} == up_meta
        assert list(f.metadata()) == ["format", "lm_head.weight"]  # given order, then the dropped names
        assert "lm_head.weight" not in f.keys()  # noqa: SIM118 - safe_open is not iterable
    ptt.save_model(model, str(tmp_path / "nometa.safetensors"))
    stt.save_model(model, str(tmp_path / "nometa_up.safetensors"))
    assert (tmp_path / "nometa.safetensors").read_bytes() == (tmp_path / "nometa_up.safetensors").read_bytes()


def test_load_model_tied_weights_matches_upstream(tmp_path: Path) -> None:
    src = Tied()
    path = str(tmp_path / "m.safetensors")
    stt.save_model(src, path)
    ours_model, up_model = Tied(), Tied()
    for p in list(ours_model.parameters()) + list(up_model.parameters()):
        torch.nn.init.zeros_(p)
    ours = ptt.load_model(ours_model, path)
    up = stt.load_model(up_model, path)
    assert (sorted(ours[0]), sorted(ours[1])) == (sorted(up[0]), sorted(up[1])) == ([], [])
    assert (type(ours[0]), type(ours[1])) == (type(up[0]), type(up[1]))
    for (n1, p1), (n2, p2) in zip(ours_model.state_dict().items(), src.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    assert ours_model.lm_head.weight.data_ptr() == ours_model.embed.weight.data_ptr()


def test_load_model_strict_errors_match_upstream(tmp_path: Path) -> None:
    path = str(tmp_path / "m.safetensors")
    stt.save_model(Tied(), path)
    # A model whose lm_head is NOT tied: the file lacks lm_head.weight.
    ours_err, up_err = _both(lambda m: m.load_model(Untied(), path))
    assert type(ours_err) is type(up_err) and str(ours_err) == str(up_err)
    ours = ptt.load_model(Untied(), path, strict=False)
    up = stt.load_model(Untied(), path, strict=False)
    assert (sorted(ours[0]), sorted(ours[1])) == (sorted(up[0]), sorted(up[1]))
    # extra tensors in the file
    extra = str(tmp_path / "extra.safetensors")
    stt.save_file({**{k: v.contiguous() for k, v in Untied().state_dict().items()}, "ghost": torch.zeros(1)}, extra)
    ours_err, up_err = _both(lambda m: m.load_model(Untied(), extra))
    assert type(ours_err) is type(up_err) and str(ours_err) == str(up_err)
    ours = ptt.load_model(Untied(), extra, strict=False)
    up = stt.load_model(Untied(), extra, strict=False)
    assert (sorted(ours[0]), sorted(ours[1])) == (sorted(up[0]), sorted(up[1]))


def test_save_model_non_contiguous(tmp_path: Path) -> None:
    class T(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("w", torch.arange(12.0).reshape(3, 4).t())

    ptt.save_model(T(), str(tmp_path / "a.safetensors"))
    stt.save_model(T(), str(tmp_path / "b.safetensors"))
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()
    ours, up = _both(lambda m: m.save_model(T(), str(tmp_path / "c.safetensors"), force_contiguous=False))
    assert type(ours) is type(up) and str(ours) == str(up)


def test_load_file_device_argument(tmp_path: Path) -> None:
    path = tmp_path / "d.safetensors"
    ptt.save_file({"a": torch.ones(2)}, path)
    assert ptt.load_file(path, device="cpu")["a"].device.type == "cpu"
    ours, up = _both(lambda m: m.load_file(str(path), device="foo"))
    assert str(ours) == str(up)


_ACCEL = ["cuda", "cuda:7", 0, "mps", "xpu", "npu", "npu:1", "mlu", "musa", "hpu", "xla"]


@pytest.mark.parametrize("device", _ACCEL, ids=repr)
def test_a_device_this_machine_lacks_is_a_clear_error(tmp_path: Any, device: Any) -> None:
    """Opening with it works, as upstream (keys and metadata need no device); moving a tensor
    there is an InvalidDevice naming the device, where torch itself raised AssertionError
    ("Torch not compiled with CUDA enabled"), RuntimeError or ModuleNotFoundError."""
    import torch

    from pysafetensors import safe_open
    from pysafetensors._adapters.torch import _device_count
    from pysafetensors._device import parse_device
    from pysafetensors.errors import InvalidDevice
    from pysafetensors.torch import load_file, save_file

    dev = parse_device(device)
    if (dev.index or 0) < _device_count(dev.kind):
        pytest.skip(f"this machine has {dev}")
    path = tmp_path / "d.safetensors"
    save_file({"a": torch.ones(3)}, path)
    shown = str(device) if isinstance(device, int) else str(dev)
    with safe_open(path, "pt", device=device) as f:
        assert f.keys() == ["a"]
        with pytest.raises(InvalidDevice, match=rf"Device {shown} is not available for framework pytorch"):
            f.get_tensor("a")
        with pytest.raises(InvalidDevice, match="not available"):
            f.get_slice("a")[:1]
        with pytest.raises(InvalidDevice, match="not available"):
            f.get_tensors()
    with pytest.raises(InvalidDevice, match=f"{dev.kind}"):
        load_file(path, device=device)
