"""A lone surrogate in a tensor name or a metadata key or value (security round 3, item 9b).

Python strings can hold ``"\\ud800"``; UTF-8, and so a safetensors header, cannot.  Upstream
raises a bare ``UnicodeEncodeError``; every writer here refuses with ``UnencodableText`` (an
``InvalidMetadata``, also a ``UnicodeError``) naming the entry, before anything is written: the
old file stays as it was and no temp file is left behind."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pysafetensors
import pysafetensors.numpy as pnp
from pysafetensors.cli.main import main
from pysafetensors.errors import InvalidMetadata, SafetensorError, UnencodableText

upstream_np = pytest.importorskip("safetensors.numpy")
torch = pytest.importorskip("torch")
import pysafetensors.torch as ptt

ARRAY = np.arange(6, dtype=np.float32)
CASES: dict[str, tuple[dict[str, Any], dict[str, str] | None, str, str]] = {
    # tensors, metadata, the attribute naming the entry, its value
    "name": ({"ok\ud800": ARRAY}, None, "tensor", "ok\ud800"),
    "name, negative stride": ({"w": ARRAY, "\udc00": ARRAY.reshape(2, 3)[::-1]}, None, "tensor", "\udc00"),
    "metadata key": ({"w": ARRAY}, {"format": "pt", "\udfffk": "v"}, "key", "\udfffk"),
    "metadata value": ({"w": ARRAY}, {"k": "v\ud800"}, "key", "k"),
}


def _writers(tmp: Path) -> dict[str, Callable[[dict[str, Any], dict[str, str] | None], Any]]:
    target = tmp / "out.safetensors"

    def spec(tensors: dict[str, Any]) -> dict[str, Any]:
        return {k: {"dtype": "F32", "shape": list(v.shape), "data": np.ascontiguousarray(v).tobytes()}
                for k, v in tensors.items()}

    def incremental(tensors: dict[str, Any], meta: dict[str, str] | None) -> None:
        with pysafetensors.open_writer(target, {k: ("F32", v.shape) for k, v in tensors.items()}, meta) as w:
            for k, v in tensors.items():
                w.write(k, v)

    return {
        "numpy.save": lambda t, m: pnp.save(t, metadata=m),
        "numpy.save_file": lambda t, m: pnp.save_file(t, target, metadata=m),
        "torch.save_file": lambda t, m: ptt.save_file({k: torch.from_numpy(v.copy()) for k, v in t.items()}, target,
                                                      metadata=m),
        "serialize": lambda t, m: pysafetensors.serialize(spec(t), metadata=m),
        "serialize_file": lambda t, m: pysafetensors.serialize_file(spec(t), target, metadata=m),
        "open_writer": incremental,
        "numpy.save_sharded": lambda t, m: pnp.save_sharded({**t, "pad": np.zeros(64, np.float32)}, tmp / "sharded",
                                                            metadata=m, max_shard_size=100),
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_writer_refuses_a_lone_surrogate_naming_the_entry(case: str, tmp_path: Path) -> None:
    tensors, metadata, attribute, entry = CASES[case]
    with pytest.raises(UnicodeEncodeError):  # upstream: a bare UnicodeEncodeError
        upstream_np.save(tensors, metadata=metadata)
    old = tmp_path / "out.safetensors"
    pnp.save_file({"old": np.ones(2, np.float32)}, old)
    before = old.read_bytes()
    (tmp_path / "sharded").mkdir()
    for writer, write in _writers(tmp_path).items():
        with pytest.raises(UnencodableText) as info:
            write(tensors, metadata)
        e = info.value
        assert isinstance(e, (SafetensorError, InvalidMetadata, UnicodeError, ValueError)), writer
        assert getattr(e, attribute) == entry, (writer, e.__dict__)
        assert repr(entry) in str(e) and "lone surrogate" in str(e), (writer, str(e))
        assert old.read_bytes() == before, writer
        assert sorted(os.listdir(tmp_path)) == ["out.safetensors", "sharded"], (writer, os.listdir(tmp_path))
        assert os.listdir(tmp_path / "sharded") == [], writer


def test_the_metadata_command_refuses_an_argument_that_is_not_utf8(tmp_path: Path) -> None:
    """A command-line argument that is not UTF-8 reaches Python with a lone surrogate (PEP 383)."""
    path = tmp_path / "m.safetensors"
    pnp.save_file({"w": ARRAY}, path, metadata={"k": "v"})
    before = path.read_bytes()
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = main(["metadata", str(path), "set", os.fsdecode(b"k=\xff")])
    assert code == 2 and "lone surrogate" in err.getvalue() and "metadata value of 'k'" in err.getvalue(), err.getvalue()
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue()
    assert path.read_bytes() == before
