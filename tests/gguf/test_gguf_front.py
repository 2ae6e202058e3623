"""The checkpoint front with a GGUF behind it: what the tools (and so the CLI and the viewer)
read of a GGUF file, checked against gguf-py's own reader and dequantization."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from gguf_helpers import (
    EVERY_VALUE,
    Q,
    V,
    gguf,
    llama_gguf,
    llama_source,
    mixed_tensors,
    quants,
    reference_dequantized,
    write_gguf,
)

from pysafetensors._adapters.numpy import numpy_dtype
from pysafetensors.errors import GGUFUnsupported
from pysafetensors.tools import _chunks
from pysafetensors.tools.checkpoint import Checkpoint, GGUFCheckpoint, open_checkpoint, stream_tensors
from pysafetensors.tools.diff import GGUFDiffResult, diff_files, tensor_value_diff
from pysafetensors.tools.identity import identify
from pysafetensors.tools.stats import file_stats, tensor_stats
from pysafetensors.tools.summary import GGUFSummary, summarize
from pysafetensors.tools.values import heatmap, histogram


def permute_qk(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's own ``permute`` (HF layout -> GGUF layout), to make what a converter stores."""
    rows = weights.shape[0]
    rest = weights.shape[1:]
    return weights.reshape(n_head, 2, rows // n_head // 2, *rest).swapaxes(1, 2).reshape(weights.shape)


def unpermute_rows(p: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's permute moved row h*group + j*half + i to h*group + 2*i + j; put each back."""
    group = p.shape[0] // heads
    half = group // 2
    index = np.empty(p.shape[0], dtype=np.int64)
    for h in range(heads):
        for j in range(2):
            for i in range(half):
                index[h * group + j * half + i] = h * group + 2 * i + j
    return p[index]


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    arrays = {"tokenizer.ggml.tokens": ([f"tok{i}" for i in range(40)], V.STRING)}
    return write_gguf(tmp_path / "m.gguf", mixed_tensors(), kv=EVERY_VALUE, arrays=arrays)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 100 elements: never a whole row (256) or head, so every boundary case runs."""
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 100)


def test_open_checkpoint_needs_gguf_true(mixed: Path) -> None:
    with pytest.raises(GGUFUnsupported, match="is a GGUF file; this command works on safetensors"):
        open_checkpoint(mixed)
    with open_checkpoint(mixed, gguf=True) as ckpt:
        assert isinstance(ckpt, GGUFCheckpoint) and not isinstance(ckpt, Checkpoint)
        ref = gguf.GGUFReader(mixed)
        assert [t.name for t in ckpt.tensors] == [t.name for t in ref.tensors]
        for ours, theirs in zip(ckpt.tensors, ref.tensors):
            assert ours.type == theirs.tensor_type.name
            assert list(ours.dims) == theirs.shape.tolist()
            assert ours.shape == tuple(reversed(theirs.shape.tolist()))
            assert ours.nbytes == theirs.n_bytes
            assert ckpt.header.data_offset + ours.begin == theirs.data_offset
        assert ckpt.header_size == ref.data_offset
        assert ckpt.info("q4_k").dtype.code == "F32" and ckpt.info("bf16").dtype.code == "BF16"


def test_values_stream_in_chunks_equal_gguf_py(mixed: Path, small_chunks: None) -> None:
    """stats of every tensor, decoded 100 elements at a time, against numpy on gguf-py's arrays."""
    ref = reference_dequantized(mixed)
    with open_checkpoint(mixed, gguf=True) as ckpt:
        result = file_stats(ckpt)
        assert tensor_stats(ckpt, "q8_0") == next(s for s in result.tensors if s.name == "q8_0")
    for s in result.tensors:
        x = ref[s.name].astype(np.float64)
        assert s.dtype == {"ids": "I32", "scalar1d": "F32"}.get(s.name, s.name.upper())
        assert s.shape == list(x.shape) and s.elements == x.size
        assert s.min == x.min() and s.max == x.max()
        assert s.mean == pytest.approx(x.mean(), rel=1e-12, abs=1e-12)
        assert s.std == pytest.approx(x.std(), rel=1e-9)
        assert s.zeros == int(np.count_nonzero(x == 0))


def test_decoded_bytes_slices_match_the_whole(mixed: Path) -> None:
    ref = reference_dequantized(mixed)
    rng = random.Random(0)
    with open_checkpoint(mixed, gguf=True) as ckpt:
        for t in ckpt.tensors:
            data = ckpt.data(t.name)
            raw = ref[t.name].astype(numpy_dtype(t.dtype)).reshape(-1).view(np.uint8)
            assert len(data) == raw.size
            for _ in range(20):
                lo = rng.randrange(0, raw.size + 1)
                hi = rng.randrange(lo, raw.size + 1)
                assert bytes(data[lo:hi]) == raw[lo:hi].tobytes(), (t.name, lo, hi)


@pytest.mark.parametrize("quantize", [None, Q.Q8_0])
def test_q_k_rows_are_put_back_across_chunks(tmp_path: Path, quantize: object, small_chunks: None) -> None:
    """The q/k weights of a llama GGUF read with ``heads`` are the source's rows again (F32),
    or gguf-py's dequantization of the permuted source un-permuted (Q8_0), whatever the chunks."""
    source = llama_source(n_head=4, n_head_kv=2, dim=64)
    path = llama_gguf(tmp_path / "l.gguf", source, n_head=4, n_head_kv=2, quantize=quantize)
    with open_checkpoint(path, gguf=True) as ckpt:
        for gguf_name, hf, heads in (("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", 4),
                                     ("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", 2)):
            x = source[hf]
            if quantize is None:
                want = x
            else:  # what llama.cpp stores (permuted, quantized) read back by gguf-py, rows put back here
                stored = quants.quantize(permute_qk(x, heads), quantize)
                want = unpermute_rows(np.asarray(quants.dequantize(stored, quantize)), heads)
                assert np.abs(want - x).max() < np.abs(x).max() / 50  # x's layout again, up to Q8_0's error
            data = ckpt.data(gguf_name, heads)
            got = np.frombuffer(bytes(data[0 : len(data)]), np.float32).reshape(x.shape)
            np.testing.assert_array_equal(got, want)
            pieces = b"".join(bytes(data[i : i + 388]) for i in range(0, len(data), 388))
            assert pieces == got.tobytes()


def test_summary_of_a_gguf(mixed: Path) -> None:
    s = summarize(str(mixed), tree=True)
    assert isinstance(s, GGUFSummary)
    assert (s.format, s.gguf_version, s.alignment, s.metadata) == ("gguf", 3, 32, None)
    ref = gguf.GGUFReader(mixed)
    fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert list(s.gguf_metadata) == list(fields)
    for key, field in fields.items():
        entry = s.gguf_metadata[key]
        assert entry.type.split("[")[0] == gguf.GGUFValueType(int(field.types[0])).name.lower()
        assert entry.value == pytest.approx(field.contents()), key
    tokens = s.gguf_metadata["tokenizer.ggml.tokens"]
    assert (tokens.type, tokens.count, tokens.value[-1]) == ("array[string]", 40, "tok39")
    assert s.parameters_by_dtype["Q4_K"] == 2048 and s.bytes_by_dtype["Q4_K"] == 8 * 144
    assert s.tree is not None and s.tree.parameters == s.parameter_count
    assert {r.name: r.gguf_dims for r in s.tensors}["ids"] == [4, 3]  # type: ignore[attr-defined]


def test_identity_content_and_tensor_hashes(mixed: Path) -> None:
    import hashlib

    ident = identify(str(mixed), content=True, per_tensor=True, canonical=True)
    assert ident.id.startswith("wi:gguf:3:") and ident.canonical is not None
    assert hashlib.sha256(ident.canonical.encode()).hexdigest() == ident.structure_sha256
    ref = gguf.GGUFReader(mixed)
    data = mixed.read_bytes()
    assert ident.content_sha256 == "0x" + hashlib.sha256(data[ref.data_offset :]).hexdigest()
    want = {t.name: "0x" + hashlib.sha256(np.asarray(t.data).tobytes()).hexdigest() for t in ref.tensors}
    assert {t.name: t.content_sha256 for t in ident.tensors or []} == want


def test_values_tools_read_gguf(mixed: Path) -> None:
    """The viewer's histogram and heatmap take a GGUFCheckpoint like a Checkpoint."""
    ref = reference_dequantized(mixed)
    with open_checkpoint(mixed, gguf=True) as ckpt:
        h = histogram(ckpt, "q4_0", bins=16)
        counts, edges = np.histogram(ref["q4_0"].astype(np.float64), bins=16)
        assert h.counts == counts.tolist() and h.edges == pytest.approx(edges.tolist())
        m = heatmap(ckpt, "q8_0", max_cells=4)
        assert m.cells[0][0] == pytest.approx(ref["q8_0"][:2, :64].astype(np.float64).mean())


def test_diff_of_two_ggufs(tmp_path: Path) -> None:
    t = mixed_tensors()
    a = write_gguf(tmp_path / "a.gguf", t, kv={"k": (1, V.UINT32), "gone": ("x", V.STRING)})
    changed = dict(t)
    changed["f32"] = (t["f32"][0] + 1, None)
    del changed["ids"]
    b = write_gguf(tmp_path / "b.gguf", changed, kv={"k": (1, V.INT32), "new": (2.5, V.FLOAT64)})
    r = diff_files(str(a), str(b), values=True)
    assert isinstance(r, GGUFDiffResult) and r.formats == ["gguf", "gguf"] and not r.same
    assert [d.name for d in r.tensors_removed] == ["ids"]
    assert r.metadata_changed == {"k": {"a": "1 (uint32)", "b": "1 (int32)"}}
    assert r.metadata_added == {"new": "2.5"} and r.metadata_removed == {"gone": "x"}
    by_name = {v.name: v for v in r.values or []}
    x = t["f32"][0].astype(np.float64)
    assert by_name["f32"].differing == 8 * 256
    assert by_name["f32"].max_abs_diff == np.abs((t["f32"][0] + 1).astype(np.float64) - x).max()
    assert all(by_name[n].differing == 0 for n in ("f16", "bf16", "q8_0", "q4_0", "q4_k"))
    assert diff_files(str(a), str(a), values=True).same


def test_diff_gguf_against_its_source(tmp_path: Path, small_chunks: None) -> None:
    """Quantized with gguf-py from a safetensors checkpoint: names map back, shapes agree, and
    the values differ by exactly the quantization error (computed here independently)."""
    from pysafetensors.numpy import save_file

    source = llama_source(dim=64)
    st = tmp_path / "src.safetensors"
    save_file(source, st)
    g = llama_gguf(tmp_path / "q.gguf", source, quantize=Q.Q8_0)
    for a, b in ((g, st), (st, g)):
        r = diff_files(str(a), str(b), values=True)
        assert isinstance(r, GGUFDiffResult)
        assert not r.tensors_added and not r.tensors_removed and r.metadata_compared is False
        assert r.names_mapped == len(source) and r.unmapped == [] and r.architecture == "llama"
        assert r.unpermuted == ["model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.q_proj.weight"]
        assert {c.name for c in r.tensors_changed} == {n for n, x in source.items() if x.ndim == 2}
        for v in r.values or []:
            x = source[v.name]
            if x.ndim == 1:
                assert v.differing == 0, v.name
                continue
            heads = {"q_proj": 4, "k_proj": 2}.get(v.name.split(".")[-2])
            stored = permute_qk(x, heads) if heads else x
            back = np.asarray(quants.dequantize(quants.quantize(stored, Q.Q8_0), Q.Q8_0))
            if heads:
                back = unpermute_rows(back, heads)
            assert v.max_abs_diff == pytest.approx(float(np.abs(back.astype(np.float64) - x).max()), rel=1e-12)
            assert v.cosine_similarity is not None and v.cosine_similarity > 0.9999
        one = tensor_value_diff(*(open_checkpoint(p, gguf=True) for p in (a, b)),
                                "model.layers.0.self_attn.q_proj.weight")
        assert one == next(v for v in r.values or [] if v.name == one.name)


def test_f32_gguf_is_identical_to_its_source(tmp_path: Path, small_chunks: None) -> None:
    from pysafetensors.numpy import save_file

    source = llama_source()
    st = tmp_path / "src.safetensors"
    save_file(source, st)
    g = llama_gguf(tmp_path / "f.gguf", source)
    r = diff_files(str(g), str(st), values=True)
    assert r.same and r.tensors_same_structure == len(source) and r.verdict == "values equal"
    assert all(v.differing == 0 and v.compared for v in r.values or [])


def test_names_stay_when_the_other_side_uses_gguf_names(tmp_path: Path) -> None:
    """A safetensors file converted without --hf-names keeps GGUF names: compared as they are."""
    from pysafetensors.gguf import GGUFFile
    from pysafetensors.gguf.convert import convert_gguf
    from pysafetensors.io.sources import MmapSource

    g = llama_gguf(tmp_path / "f.gguf", llama_source())
    with GGUFFile(MmapSource(g)) as f:
        convert_gguf(f, tmp_path / "c.safetensors")
    r = diff_files(str(g), str(tmp_path / "c.safetensors"), values=True)
    assert isinstance(r, GGUFDiffResult)
    assert r.same and r.names_mapped == 0 and r.unpermuted == []


def test_a_gguf_stream_reads_small_tensors_together(mixed: Path) -> None:
    """Without views (a remote source), runs of small tensors come from one read."""
    from pysafetensors.gguf import GGUFFile
    from pysafetensors.io.sources import PreadSource

    reads: list[tuple[int, int]] = []

    class Counting(PreadSource):
        def read_into(self, offset: int, buffer: memoryview) -> None:
            reads.append((offset, len(buffer)))
            super().read_into(offset, buffer)

    f = GGUFFile(Counting(str(mixed)), unknown_types=True)
    ckpt = GGUFCheckpoint(str(mixed), f, mixed.name)
    assert not f.views
    reads.clear()
    ref = reference_dequantized(mixed)
    with ckpt:
        got = {t.name: np.frombuffer(bytes(d[0 : len(d)]), numpy_dtype(t.dtype)) for t, d in stream_tensors(ckpt, ckpt.file.names())}
    assert len(reads) == 1  # 21 KB of tensors, back to back
    for name, x in got.items():
        np.testing.assert_array_equal(x.astype(np.float64), ref[name].reshape(-1).astype(np.float64))


def test_bert_names_go_back_to_the_checkpoints(tmp_path: Path) -> None:
    """gguf-py's map offers every family's names for a llama.cpp name ('model.layers.0...' for
    blk.0.attn_q too); the one tagged with the file's architecture (``# bert``) is chosen."""
    from pysafetensors.gguf.names import hf_names
    from pysafetensors.numpy import save_file

    rng = np.random.default_rng(5)
    source = {
        "embeddings.word_embeddings.weight": rng.standard_normal((50, 32)).astype(np.float32),
        "embeddings.LayerNorm.weight": rng.standard_normal(32).astype(np.float32),
        "encoder.layer.0.attention.self.query.weight": rng.standard_normal((32, 32)).astype(np.float32),
        "encoder.layer.0.attention.self.query.bias": rng.standard_normal(32).astype(np.float32),
        "encoder.layer.0.intermediate.dense.weight": rng.standard_normal((64, 32)).astype(np.float32),
        "encoder.layer.0.output.LayerNorm.bias": rng.standard_normal(32).astype(np.float32),
        "pooler.dense.weight": rng.standard_normal((32, 32)).astype(np.float32),  # no llama.cpp name: left out
    }
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, 1)
    renamed = {tmap.get_name(k, try_suffixes=(".weight", ".bias")): k for k in source}
    tensors = {new: (source[old], None) for new, old in renamed.items() if new is not None}
    path = write_gguf(tmp_path / "bert.gguf", tensors, arch="bert")
    with open_checkpoint(path, gguf=True) as ckpt:
        assert isinstance(ckpt, GGUFCheckpoint)
        mapping = hf_names(ckpt.header)
    assert mapping.unmapped == [] and mapping.hf == {new: old for new, old in renamed.items() if new is not None}
    save_file(source, tmp_path / "bert.safetensors")
    r = diff_files(str(path), str(tmp_path / "bert.safetensors"), values=True)
    assert isinstance(r, GGUFDiffResult) and r.architecture == "bert"
    assert [d.name for d in r.tensors_added] == ["pooler.dense.weight"] and not r.tensors_removed
    assert r.same is False and all(v.differing == 0 for v in r.values or [])


def test_a_gguf_checkpoint_is_a_tensor_file(mixed: Path) -> None:
    """GGUF's checkpoint answers the TensorFile protocol; its metadata is typed (``gguf_metadata``),
    and asking it for safetensors raw tensors says how GGUF tensors are read."""
    from pysafetensors.errors import FileClosed, TensorNotFound
    from pysafetensors.reader import TensorFile

    ckpt = open_checkpoint(mixed, gguf=True)
    assert isinstance(ckpt, GGUFCheckpoint) and isinstance(ckpt, TensorFile)
    names = ckpt.names()
    assert names == [t.name for t in ckpt.tensors] and ckpt.sorted_names() == sorted(names)
    assert all(n in ckpt for n in names) and "nope" not in ckpt and ckpt.name == str(mixed)
    assert ckpt.metadata is None and ckpt.gguf_metadata is ckpt.header.fields and "general.architecture" in ckpt.gguf_metadata
    with pytest.raises(TensorNotFound, match=f"^{mixed} does not contain tensor nope"):
        ckpt.info("nope")
    for read in (lambda: ckpt.raw(names[0]), lambda: ckpt.raw_all()):
        with pytest.raises(GGUFUnsupported, match="GGUF tensors are read as values"):
            read()
    ckpt.close()
    with pytest.raises(FileClosed):
        ckpt.sorted_names()
