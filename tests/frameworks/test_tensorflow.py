"""pysafetensors.tensorflow and safe_open(framework="tf"/"tensorflow")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from _fw_cases import ALL_CODES, Case, FrameworkSuite, _write, same, sample, upstream_equal

import pysafetensors.numpy as ps_numpy
from pysafetensors import safe_open

CASE = Case(
    face="tensorflow",
    names=("tf", "tensorflow"),
    upstream_name="tensorflow",
    supported=frozenset(c for c in ALL_CODES if not c.startswith("F6_") and c != "F8_E8M0"),
    from_np=lambda a: tf.convert_to_tensor(a),
    to_np=lambda t: t.numpy(),
    tensor_type=tf.Tensor,
)


class TestTensorflow(FrameworkSuite):
    case = CASE


def test_variables_save_their_value() -> None:
    v = tf.Variable(sample("F32", (3, 2)))
    loaded = CASE.module.load(CASE.module.save({"v": v}))
    assert same(loaded["v"].numpy(), sample("F32", (3, 2)))


@pytest.mark.parametrize("code", ["F32", "BF16", "I64"])
def test_shares_aligned_writable_buffers(tmp_path: Any, code: str) -> None:
    arr = sample(code, (64,))
    for pad in range(64):
        data = ps_numpy.save({"x": arr}, metadata={"pad": "p" * pad})
        start = 8 + int.from_bytes(data[:8], "little")
        if start % 64 == 0:
            break
    path = _write(tmp_path, data)
    with safe_open(path, "tf") as f:
        t = f.get_tensor("x")
        # Writing through a copy-on-write view of the map shows in the tensor: it is shared.
        view = np.frombuffer(f._file.source.view(start, arr.nbytes), arr.dtype)
        before = t.numpy().copy()
        view.flags.writeable = True
        view[0] = view[1]
        assert t.numpy()[0] == arr[1] and same(before, arr)
    with open(path, "rb") as fh:
        assert fh.read() == data  # the file itself never changes


def test_misaligned_buffers_are_copied_safely(tmp_path: Any) -> None:
    # Eigen aborts on misaligned buffers: they must be copied, and ops on them must work.
    arrays = {"a": sample("U8", (3,)), "b": sample("F32", (5, 7))}
    loaded = CASE.module.load_file(_write(tmp_path, ps_numpy.save(arrays)))
    assert same(tf.reduce_sum(loaded["b"][1:, 2:], axis=0).numpy(), arrays["b"][1:, 2:].sum(axis=0))


def test_equal_to_upstream_load(tmp_path: Any) -> None:
    upstream = pytest.importorskip("safetensors.tensorflow")
    compared = upstream_equal(CASE, tmp_path, upstream.load_file)
    assert {"F32", "BF16", "I64", "BOOL", "F64"} <= set(compared)


def test_sparse_tensors_are_a_clear_error() -> None:
    from pysafetensors.errors import SerializeError

    sparse = tf.sparse.SparseTensor(indices=[[0, 0]], values=[1.0], dense_shape=[2, 2])
    with pytest.raises(SerializeError, match="'s'"):
        CASE.module.save({"s": sparse})
