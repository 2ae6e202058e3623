"""Dtypes and shapes through an index: a shard's header is read without mapping it, and every
verdict (a missing shard, a tensor its shard lacks, a name in two shards, a shard from another
save, a broken shard) is the one a read of the same tensor gives."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors import safe_open
from pysafetensors.format.index import CHECKPOINT_ID_KEY
from pysafetensors.io.sources import MmapSource
from pysafetensors.numpy import save_file, save_sharded
from pysafetensors.sharded import OPEN_SHARDS

S1, S2, S3 = (f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3))


def _write_index(directory: Path, weight_map: dict[str, str], metadata: dict[str, str] | None = None) -> Path:
    path = directory / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": metadata or {}, "weight_map": weight_map}))
    return path


def _a(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


def _verdict(index: Path, name: str, how: str) -> tuple[Any, ...]:
    """What asking for ``name`` in a fresh handle gives: its dtype and shape, or the error's type
    and message, with the warnings raised on the way."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with safe_open(index, "np") as f:
                if how == "describe":
                    s = f.get_slice(name)
                    result: tuple[Any, ...] = ("ok", s.get_dtype(), s.get_shape())
                else:
                    t = f.get_tensor(name)
                    result = ("ok", {np.dtype("float32"): "F32"}[t.dtype], list(t.shape))
        except Exception as e:  # noqa: BLE001 - the verdict is what is compared
            result = (type(e).__name__, str(e))
    return (*result, [(w.category.__name__, str(w.message)) for w in caught])


def _checkpoints(tmp_path: Path) -> dict[str, tuple[Path, list[str]]]:
    """Broken checkpoints, each with the names to ask for."""
    out: dict[str, tuple[Path, list[str]]] = {}

    def make(label: str, shards: dict[str, dict[str, np.ndarray] | bytes | None], weight_map: dict[str, str],
             names: list[str], metadata: dict[str, str] | None = None) -> None:
        d = tmp_path / label
        d.mkdir()
        for shard, content in shards.items():
            if isinstance(content, bytes):
                (d / shard).write_bytes(content)
            elif content is None:
                (d / shard).mkdir()  # a directory where a shard should be
            else:
                save_file(content, d / shard, metadata=metadata)
        out[label] = (_write_index(d, weight_map, metadata), names)

    both = {"a": S1, "b": S1, "c": S2}
    make("missing shard", {S1: {"a": _a(2), "b": _a(3)}}, both, ["a", "c"])
    make("tensor its shard lacks", {S1: {"a": _a(2)}, S2: {"c": _a(4)}}, both, ["a", "b", "c"])
    make("name in two shards", {S1: {"a": _a(2), "b": _a(3), "c": _a(9)}, S2: {"c": _a(4)}}, both, ["a", "c", "b"])
    make("unmapped tensor", {S1: {"a": _a(2), "b": _a(3), "z": _a(1)}, S2: {"c": _a(4)}}, both, ["b", "z", "c"])
    make("broken header", {S1: {"a": _a(2), "b": _a(3)}, S2: b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      "},
         both, ["c", "a"])
    make("truncated shard", {S1: {"a": _a(2), "b": _a(3)}, S2: b"\x01\x00"}, both, ["c"])
    make("directory shard", {S1: {"a": _a(2), "b": _a(3)}, S2: None}, both, ["c"])
    make("shard of another save", {S1: {"a": _a(2), "b": _a(3)}, S2: {"c": _a(4)}}, both, ["a", "c"],
         metadata={CHECKPOINT_ID_KEY: "one"})
    # The index carries another save's id than the shards do.
    _write_index(tmp_path / "shard of another save", both, {CHECKPOINT_ID_KEY: "two"})
    make("unknown name", {S1: {"a": _a(2), "b": _a(3)}, S2: {"c": _a(4)}}, both, ["nope", "a"])
    return out


def test_every_verdict_of_a_header_read_is_the_one_a_read_gives(tmp_path: Path) -> None:
    for label, (index, names) in _checkpoints(tmp_path).items():
        for name in names:
            described = _verdict(index, name, "describe")
            read = _verdict(index, name, "read")
            assert described == read, (label, name)
        # Asked one after another in one handle too: the shard checked first keeps its verdict.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with safe_open(index, "np") as f:
                for name in names:
                    try:
                        f.get_slice(name).get_shape()
                    except Exception as e:  # noqa: BLE001
                        got: tuple[Any, ...] = (type(e).__name__, str(e))
                    else:
                        got = ("ok",)
                    assert got == _verdict(index, name, "read")[: len(got)], (label, name)


def test_the_verdicts_name_what_is_wrong(tmp_path: Path) -> None:
    cases = _checkpoints(tmp_path)
    assert _verdict(cases["missing shard"][0], "c", "describe")[0] == "FileNotFoundError"
    lacks = _verdict(cases["tensor its shard lacks"][0], "b", "describe")
    assert lacks[0] == "InvalidIndex" and "'b'" in lacks[1]
    two = _verdict(cases["name in two shards"][0], "c", "describe")
    assert two[:3] == ("ok", "F32", [4])  # the shard the index names, not the other
    assert _verdict(cases["name in two shards"][0], "a", "describe")[3][0][0] == "UnmappedTensorWarning"
    assert _verdict(cases["unmapped tensor"][0], "z", "describe")[0] == "TensorNotFound"
    assert _verdict(cases["broken header"][0], "c", "describe")[0] == "InvalidHeaderJson"
    assert _verdict(cases["truncated shard"][0], "c", "describe")[0] == "HeaderTooSmall"
    assert _verdict(cases["directory shard"][0], "c", "describe")[0] == "DirectoryNotFile"
    assert _verdict(cases["shard of another save"][0], "a", "describe")[0] == "CheckpointMismatch"


def test_describing_every_tensor_maps_no_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arrays = {f"layer.{i}.weight": _a(100 + i).reshape(-1, 1) for i in range(8)}
    index = save_sharded(arrays, tmp_path, max_shard_size=500)  # one shard per tensor
    mapped: list[str] = []
    real = MmapSource.__init__

    def init(self: MmapSource, path: Any, name: str | None = None) -> None:
        mapped.append(os.path.basename(os.fspath(path)))
        real(self, path, name)

    monkeypatch.setattr(MmapSource, "__init__", init)
    with safe_open(index, "np") as f:
        for k in f.keys():  # noqa: SIM118  (safe_open is not a mapping)
            assert f.get_slice(k).get_shape() == list(arrays[k].shape)
        assert mapped == [] and f._file._recent == f._file._shards == {}
        # Reading maps the shards then, at most OPEN_SHARDS of them at once.
        for k in f.keys():  # noqa: SIM118
            np.testing.assert_array_equal(f.get_tensor(k), arrays[k])
            assert len(f._file._recent) <= OPEN_SHARDS
        assert len(mapped) == len(arrays)
        assert f.get_slice("layer.0.weight").get_shape() == [100, 1]  # its header still answers
    with pytest.raises(Exception, match="closed"):
        f.get_slice("layer.0.weight")


def test_a_shard_opened_again_reuses_its_parse_only_when_its_header_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pysafetensors import sharded

    arrays = {f"layer.{i}.weight": _a(100 + i).reshape(-1, 1) for i in range(4)}
    index = save_sharded(arrays, tmp_path, max_shard_size=500)  # one shard per tensor
    parsed: list[int] = []
    real = sharded.parse_header
    monkeypatch.setattr(sharded, "parse_header", lambda raw, size: parsed.append(size) or real(raw, size))
    with safe_open(index, "np") as f:
        for k in f.keys():  # noqa: SIM118  (safe_open is not a mapping)
            f.get_slice(k).get_shape()  # each header read alone
        for k in f.keys():  # noqa: SIM118
            np.testing.assert_array_equal(f.get_tensor(k), arrays[k])  # each shard opened: no parse again
        assert len(parsed) == len(arrays)
        # A shard rewritten meanwhile (another layout, same tensor) is parsed afresh and read right.
        first = "layer.0.weight"
        shard = f._file.index.weight_map[first]
        checkpoint_id = f._file.index.checkpoint_id
        for k in list(f.keys())[1:]:
            f.get_tensor(k)  # the first shard is closed to keep OPEN_SHARDS
        assert shard not in f._file._recent
        new = np.arange(100, dtype=np.float64).reshape(-1, 1)
        save_file({first: new}, tmp_path / shard, metadata={CHECKPOINT_ID_KEY: checkpoint_id})
        np.testing.assert_array_equal(f.get_tensor(first), new)
        assert len(parsed) == len(arrays) + 1
