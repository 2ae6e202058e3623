"""The writer's batched writes, C order for any layout, and alignment: byte-identical to upstream."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest
from _helpers import sample_arrays

from pysafetensors import writer as writer_mod
from pysafetensors.numpy import load_file as np_load_file
from pysafetensors.numpy import save as np_save
from pysafetensors.numpy import save_file as np_save_file

upstream_np = pytest.importorskip("safetensors.numpy")


@pytest.mark.parametrize("batch_bytes,batch_count", [(1 << 24, 512), (64, 3), (1, 1)])
def test_batched_writev_paths_match_upstream(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, batch_bytes: int, batch_count: int) -> None:
    monkeypatch.setattr(writer_mod, "_BATCH_BYTES", batch_bytes)
    monkeypatch.setattr(writer_mod, "_BATCH_COUNT", batch_count)
    for name, tensors in sample_arrays().items():
        ours = os.path.join(tmp_path, f"{name}.ours")
        np_save_file(tensors, ours, metadata={"k": "v"})
        ref = upstream_np.save(tensors, metadata={"k": "v"})
        with open(ours, "rb") as fh:
            assert fh.read() == ref, name
        assert np_save(tensors, metadata={"k": "v"}) == ref


def test_non_contiguous_arrays_are_written_in_c_order(tmp_path: Any) -> None:
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    tensors = {"f": np.asfortranarray(base), "s": base[:, ::2], "t": base.T}
    path = os.path.join(tmp_path, "nc.safetensors")
    np_save_file(tensors, path)
    ref = upstream_np.save({k: np.ascontiguousarray(v) for k, v in tensors.items()})
    with open(path, "rb") as fh:
        assert fh.read() == ref
    assert base.flags.c_contiguous and tensors["f"].flags.f_contiguous  # inputs untouched


@pytest.mark.parametrize("alignment", [16, 64, 4096])
def test_alignment_files_are_readable_by_both(tmp_path: Any, alignment: int) -> None:
    tensors = {"a": np.arange(10, dtype=np.float32), "b": np.ones((3, 3), np.float64)}
    path = os.path.join(tmp_path, "al.safetensors")
    np_save_file(tensors, path, metadata={"m": "x"}, alignment=alignment)
    with open(path, "rb") as fh:
        data = fh.read()
    n = int.from_bytes(data[:8], "little")
    assert (8 + n) % alignment == 0
    assert json.loads(data[8 : 8 + n])["__metadata__"] == {"m": "x"}
    up = upstream_np.load_file(path)
    ours = np_load_file(path)
    for k, v in tensors.items():
        np.testing.assert_array_equal(up[k], v)
        np.testing.assert_array_equal(ours[k], v)
    assert np_save(tensors, metadata={"m": "x"}, alignment=alignment) == data


def test_default_alignment_is_byte_identical() -> None:
    tensors = {"a": np.arange(3, dtype=np.uint8)}
    assert np_save(tensors) == np_save(tensors, alignment=8) == upstream_np.save(tensors)


def test_bad_alignment_is_rejected(tmp_path: Any) -> None:
    from pysafetensors.errors import SerializeError

    with pytest.raises(SerializeError):
        np_save({"a": np.zeros(2)}, alignment=12)
