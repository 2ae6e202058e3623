"""tools.summary: the tensor columns are the rows, field for field, and a summary built from the
columns is ``summarize``'s."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.cli.main import main as cli_main
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.summary import TensorRow, summarize, summarize_columns, tensor_columns, tensor_rows


@pytest.fixture
def sharded(tmp_path: Path) -> Path:
    from pysafetensors.numpy import save_file

    path = tmp_path / "m.safetensors"
    save_file({"a.w": np.zeros((2, 3), np.float32), "a.b": np.zeros(3, np.float16), "c": np.zeros((), np.int64),
               "d.e.f": np.zeros((4, 0), np.uint8), "big": np.zeros((40, 40), np.float32)},
              str(path), metadata={"format": "np"})
    out = tmp_path / "shards"
    assert cli_main(["shard", str(path), str(out), "--max-shard-size", "4KB", "--quiet"]) == 0
    return out / "model.safetensors.index.json"


@pytest.mark.parametrize("patterns", [None, ["a.*", "c"]])
def test_columns_are_the_rows(sharded: Path, patterns: list[str] | None) -> None:
    from fnmatch import fnmatchcase

    with open_checkpoint(sharded) as ckpt:
        assert ckpt.sharded and len(ckpt.file_names) >= 2
        # The rows as TensorInfo gives them, field by field.
        expected = [TensorRow(t.name, t.dtype.code, list(t.shape), [t.begin, t.end], t.nbytes, t.nelements,
                              ckpt.file_of(t.name))
                    for t in ckpt.tensors if not patterns or any(fnmatchcase(t.name, p) for p in patterns)]
        assert tensor_rows(ckpt, patterns) == expected
        cols = tensor_columns(ckpt, patterns)
        assert cols.rows() == expected
        assert cols.file == [r.file for r in expected] and cols.parameters == [r.parameters for r in expected]
        full = summarize(ckpt, patterns, tree=True)
        part, same_cols = summarize_columns(ckpt, patterns)
        assert same_cols == cols
        assert part.tensors == [] and part.tree is None and part.repeated_blocks is None
        assert full.repeated_blocks is not None
        assert dataclasses.replace(part, tensors=full.tensors, tree=full.tree,
                                   repeated_blocks=full.repeated_blocks) == full
        assert full.parameter_count == sum(r.parameters for r in expected)


def test_an_unsharded_file_has_no_file_column(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "one.safetensors"
    save_file({"x": np.ones((2, 2), np.float32)}, str(path))
    with open_checkpoint(path) as ckpt:
        cols = tensor_columns(ckpt)
        assert cols.file is None
        assert cols.rows() == [TensorRow("x", "F32", [2, 2], [0, 16], 16, 4, None)]
