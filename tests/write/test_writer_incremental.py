"""The incremental writer: declare first, write in any order / threads, atomic publish."""

from __future__ import annotations

import os
import random
import threading
from typing import Any

import numpy as np
import pytest

import pysafetensors
from pysafetensors import SafetensorsWriter, open_writer
from pysafetensors.errors import IncompleteWrite, SafetensorError, SerializeError, TensorNotFound
from pysafetensors.numpy import load_file, save_file

upstream_np = pytest.importorskip("safetensors.numpy")


def _tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "z.weight": rng.standard_normal((40, 30)).astype(np.float32),
        "a.bias": rng.standard_normal((30,)).astype(np.float16),
        "ids": np.arange(25, dtype=np.int64),
        "mask": rng.integers(0, 2, (4, 4)).astype(bool),
        "empty": np.zeros((0,), np.float32),
        "scalar": np.array(3.5, np.float64),
    }


def _specs(tensors: dict[str, np.ndarray]) -> dict[str, tuple[Any, tuple[int, ...]]]:
    return {k: (v.dtype, v.shape) for k, v in tensors.items()}


def _temp_files(directory: str) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(".tmp")]


def test_out_of_order_writes_are_byte_identical_to_save(tmp_path: Any) -> None:
    tensors = _tensors()
    path = os.path.join(tmp_path, "inc.safetensors")
    names = list(tensors)
    random.Random(0).shuffle(names)
    with open_writer(path, _specs(tensors), metadata={"format": "np"}) as w:
        for name in names:
            w.write(name, tensors[name])
    with open(path, "rb") as fh:
        got = fh.read()
    assert got == upstream_np.save(tensors, metadata={"format": "np"})
    ref = os.path.join(tmp_path, "ref.safetensors")
    save_file(tensors, ref, metadata={"format": "np"})
    with open(ref, "rb") as fh:
        assert fh.read() == got


def test_multithreaded_chunked_writes(tmp_path: Any) -> None:
    big = np.arange(50_000, dtype=np.int32)
    other = np.linspace(0, 1, 777).astype(np.float64)
    path = os.path.join(tmp_path, "mt.safetensors")
    w = SafetensorsWriter(path, {"big": ("I32", big.shape), "other": ("float64", other.shape)})
    raw = big.view(np.uint8)
    chunks = [(off, raw[off : off + 4000]) for off in range(0, raw.size, 4000)]
    random.Random(1).shuffle(chunks)

    def worker(part: list[tuple[int, np.ndarray]]) -> None:
        for off, chunk in part:
            w.write_chunk("big", off, chunk)

    threads = [threading.Thread(target=worker, args=(chunks[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    w.write("other", other)
    for t in threads:
        t.join()
    assert w.missing() == []
    w.close()
    loaded = load_file(path)
    np.testing.assert_array_equal(loaded["big"], big)
    np.testing.assert_array_equal(loaded["other"], other)
    with open(path, "rb") as fh:
        assert fh.read() == upstream_np.save({"big": big, "other": other})


def test_torch_tensors_and_dtypes(tmp_path: Any) -> None:
    torch = pytest.importorskip("torch")
    from pysafetensors.torch import load_file as torch_load
    from pysafetensors.torch import save as torch_save

    tensors = {"b": torch.randn(5, 3).to(torch.bfloat16), "t": torch.arange(12).reshape(3, 4).T}
    path = os.path.join(tmp_path, "t.safetensors")
    with open_writer(path, {k: (v.dtype, tuple(v.shape)) for k, v in tensors.items()}) as w:
        w.write("t", tensors["t"])  # non-contiguous: written in logical order
        w.write("b", tensors["b"])
    loaded = torch_load(path)
    assert torch.equal(loaded["b"], tensors["b"]) and torch.equal(loaded["t"], tensors["t"])
    with open(path, "rb") as fh:
        assert fh.read() == torch_save({k: v.contiguous() for k, v in tensors.items()})


def test_missing_tensor_raises_and_leaves_no_file(tmp_path: Any) -> None:
    tensors = _tensors()
    path = os.path.join(tmp_path, "m.safetensors")
    w = open_writer(path, _specs(tensors))
    w.write("ids", tensors["ids"])
    w.write_chunk("z.weight", 0, tensors["z.weight"].reshape(-1).view(np.uint8)[:100])  # only partly written
    with pytest.raises(IncompleteWrite) as info:
        w.close()
    msg = str(info.value)
    assert "'z.weight'" in msg and "'a.bias'" in msg and "'ids'" not in msg
    assert isinstance(info.value, SafetensorError)
    assert not os.path.exists(path) and _temp_files(os.fspath(tmp_path)) == []


def test_exception_inside_with_keeps_the_old_file(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "old.safetensors")
    save_file({"keep": np.ones(3, np.float32)}, path)
    with open(path, "rb") as fh:
        before = fh.read()
    with pytest.raises(RuntimeError), open_writer(path, {"new": ("F32", (2,))}) as w:
        w.write("new", np.zeros(2, np.float32))
        raise RuntimeError("converter failed")
    with open(path, "rb") as fh:
        assert fh.read() == before
    assert _temp_files(os.fspath(tmp_path)) == []


def test_wrong_sizes_and_names_are_errors(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "e.safetensors")
    with open_writer(path, {"a": ("F32", (4,))}) as w:
        with pytest.raises(SerializeError, match=r"declared F32 \[4\] but the data written has shape \[3\]"):
            w.write("a", np.zeros(3, np.float32))
        with pytest.raises(SerializeError, match="needs 16"):
            w.write("a", bytes(12))
        with pytest.raises(TensorNotFound):
            w.write("nope", np.zeros(4, np.float32))
        with pytest.raises(SerializeError, match="outside"):
            w.write_chunk("a", 12, np.zeros(2, np.float32))
        with pytest.raises(SerializeError, match="big-endian"):
            w.write("a", memoryview(np.zeros(4, ">f4")))  # a raw buffer: no dtype object to swap by
        w.write("a", np.arange(4, dtype=">f4"))  # a numpy array is swapped, as save_file does
    np.testing.assert_array_equal(load_file(path)["a"], np.arange(4, dtype=np.float32))


def test_bad_declarations(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "d.safetensors")
    with pytest.raises(SafetensorError):
        open_writer(path, {"a": ("F99", (1,))})
    with pytest.raises(SerializeError):
        open_writer(path, {"a": ("F32",)})  # type: ignore[dict-item]
    assert _temp_files(os.fspath(tmp_path)) == []


def test_aligned_incremental_file(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "al.safetensors")
    data = np.arange(100, dtype=np.float32)
    with open_writer(path, {"x": ("F32", (100,))}, alignment=4096) as w:
        assert w.data_start % 4096 == 0
        assert w.offset_of("x") == (w.data_start, 400)
        w.write("x", data)
    np.testing.assert_array_equal(upstream_np.load_file(path)["x"], data)
    np.testing.assert_array_equal(load_file(path)["x"], data)


def test_exported() -> None:
    assert "SafetensorsWriter" in pysafetensors.__all__ and "open_writer" in pysafetensors.__all__


# --- what is written must match what was declared ----------------------------------------------


def test_data_of_another_dtype_is_refused_even_with_the_same_byte_length(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "k.safetensors")
    with open_writer(path, {"a": ("F32", (4,)), "b": ("I32", (2, 2))}) as w:
        with pytest.raises(SerializeError, match=r"'a' is declared F32 \[4\] but the data written is F64"):
            w.write("a", np.zeros(2, np.float64))  # 16 bytes, like the F32 [4] slot
        with pytest.raises(SerializeError, match="declared F32"):
            w.write_chunk("a", 0, np.zeros(1, np.float64))
        with pytest.raises(SerializeError, match="data written is F32"):
            w.write("b", np.zeros((2, 2), np.float32))
        with pytest.raises(SerializeError, match=r"has shape \[4\]"):
            w.write("b", np.zeros(4, np.int32))  # same dtype and size, other shape
        with pytest.raises(SerializeError, match="data written is F64"):
            w.write("a", memoryview(np.zeros(2, np.float64)))  # a typed buffer carries its format
        # Raw bytes are taken as bytes: length checked, dtype not.
        w.write("a", np.arange(4, dtype=np.float32).view(np.uint8))
        w.write_chunk("b", 0, np.arange(2, dtype=np.int32))  # a typed chunk of the right dtype
        w.write_chunk("b", 8, bytes(np.arange(2, 4, dtype=np.int32)))
    loaded = load_file(path)
    np.testing.assert_array_equal(loaded["a"], np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(loaded["b"], np.arange(4, dtype=np.int32).reshape(2, 2))


def test_torch_data_is_checked_too(tmp_path: Any) -> None:
    torch = pytest.importorskip("torch")
    path = os.path.join(tmp_path, "t.safetensors")
    with open_writer(path, {"a": (torch.float32, (2, 2))}) as w:
        with pytest.raises(SerializeError, match="data written is F64"):
            w.write("a", torch.zeros(2, dtype=torch.float64))
        with pytest.raises(SerializeError, match=r"has shape \[4\]"):
            w.write("a", torch.zeros(4))
        w.write("a", torch.ones(2, 2))
    assert load_file(path)["a"].tolist() == [[1, 1], [1, 1]]


@pytest.mark.parametrize("shape", [(1.5,), ("2",), (True,), "12", (2.0,), None])
def test_loose_shapes_are_refused(tmp_path: Any, shape: Any) -> None:
    from pysafetensors.errors import InvalidShape

    with pytest.raises(InvalidShape, match="'a'"):
        open_writer(os.path.join(tmp_path, "s.safetensors"), {"a": ("F32", shape)})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("dtype", "shape"), [("U8", (2**63,)), ("U8", (2**64,)), ("F64", (2**61,)), ("F32", (2**62, 4))])
def test_declared_sizes_past_a_file_offset_are_clear_errors(tmp_path: Any, dtype: str, shape: tuple[int, ...]) -> None:
    with pytest.raises(SerializeError, match="largest file offset") as e:
        open_writer(os.path.join(tmp_path, "h.safetensors"), {"huge": (dtype, shape)})
    assert str(list(shape)) in str(e.value)
    assert os.listdir(tmp_path) == []


def test_a_huge_alignment_is_a_clear_error(tmp_path: Any) -> None:
    with pytest.raises(SerializeError, match="alignment 1099511627776 is too large"):
        open_writer(os.path.join(tmp_path, "a.safetensors"), {"x": ("F32", (1,))}, alignment=2**40)
    assert os.listdir(tmp_path) == []


def test_numpy_scalar_types_and_ml_dtypes_as_declared_dtypes(tmp_path: Any) -> None:
    import ml_dtypes

    path = os.path.join(tmp_path, "d.safetensors")
    x = np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(2, 3)
    with open_writer(path, {"x": (ml_dtypes.bfloat16, (2, 3)), "y": (np.int16, (1,))}) as w:
        w.write("x", x)
        w.write("y", np.array([7], np.int16))
    np.testing.assert_array_equal(load_file(path)["x"], x)
    from pysafetensors.errors import UnknownDtype

    with pytest.raises(UnknownDtype, match="not understood"):
        open_writer(path, {"x": (object(), (1,))})
