"""_adapters/torch.py called directly: the dtype table both ways and the bytes a write item gives
(C order, conjugate/negative views resolved), compared with upstream safetensors.torch."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import require

from pysafetensors.errors import SerializeError
from pysafetensors.format.dtypes import all_dtypes

torch = require("torch")
upstream = require("safetensors.torch")
adapter = require("pysafetensors._adapters.torch")


@pytest.mark.parametrize("dtype", [d for d in all_dtypes() if d.torch and hasattr(torch, d.torch)], ids=lambda d: d.code)
def test_the_table_reads_back_both_ways(dtype: object) -> None:
    tdt = adapter.torch_dtype(dtype)
    assert adapter.format_dtype(tdt) == dtype
    assert adapter.format_dtype(np.float32) is None  # not a torch dtype


def _upstream_bytes(t: object) -> bytes:
    blob = upstream.save({"t": t})
    (n,) = np.frombuffer(blob[:8], "<u8")
    return blob[8 + int(n):]


@pytest.mark.parametrize("make", [
    lambda: torch.arange(12, dtype=torch.float32).reshape(3, 4).T,           # transposed
    lambda: torch.arange(20, dtype=torch.int16)[::3],                         # strided
    lambda: torch.arange(6, dtype=torch.bfloat16).reshape(2, 3),              # bf16
    lambda: torch.tensor(2.5, dtype=torch.float64),                           # 0-d
    lambda: torch.zeros((0, 3), dtype=torch.float16),                         # empty
], ids=["transposed", "strided", "bf16", "0-d", "empty"])
def test_write_item_bytes_are_upstreams(make: object) -> None:
    t = make()  # type: ignore[operator]
    item = adapter.to_write_item("t", t)
    assert item.shape == tuple(t.shape) and item.dtype == adapter.dtype_of(t)
    assert bytes(item.get_bytes()) == _upstream_bytes(t.contiguous())


def test_conjugate_and_negative_views_write_the_values_they_show() -> None:
    z = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    conj = z.conj()
    assert conj.is_conj()
    assert bytes(adapter.to_write_item("c", conj).get_bytes()) == conj.resolve_conj().numpy().tobytes()
    assert z.numpy().tolist() == [1 + 2j, 3 - 4j]  # the caller's tensor is untouched


def test_what_torch_cannot_save_is_refused_naming_the_tensor() -> None:
    with pytest.raises(SerializeError, match="tensor 'x': expected torch.Tensor, got ndarray"):
        adapter.to_write_item("x", np.zeros(2))


def test_open_writer_takes_a_strided_tensor(tmp_path: object) -> None:
    """The incremental writer takes any tensor (save_file refuses non-contiguous ones, as upstream)."""
    from pysafetensors import open_writer

    t = torch.arange(20, dtype=torch.int16)[::3]
    path = f"{tmp_path}/w.safetensors"
    with open_writer(path, {"t": ("I16", (7,))}) as w:
        w.write("t", t)
    assert torch.equal(upstream.load_file(path)["t"], t)
