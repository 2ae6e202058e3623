"""What the CLI says about a GGUF's names and rows (convert, diff), and ``id`` on a header alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gguf_helpers import V, run_cli, write_gguf
from test_gguf_identity_convert import tiny_gguf_header
from test_gguf_qk import attention_source, convert_like_llama_cpp

WARNING = "rows {verb} in GGUF order in 2 tensors llama.cpp may have rearranged: {names} (--json gives why)"
Q, K = "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight"


@pytest.fixture
def gptj(tmp_path: Path) -> Path:
    """A gptj GGUF: its q/k rows are not known to be permuted or kept, so they stay in GGUF order."""
    rng = np.random.default_rng(4)
    tensors = {f"blk.0.attn_{x}.weight": (rng.standard_normal((32, 32)).astype(np.float32), None) for x in "qk"}
    return write_gguf(tmp_path / "u.gguf", tensors, arch="gptj", kv={"gptj.attention.head_count": (4, V.UINT32)})


def test_convert_warns_of_rows_left_in_gguf_order(gptj: Path, tmp_path: Path) -> None:
    code, out, err = run_cli("convert", gptj, tmp_path / "back.safetensors", "--hf-names")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1] == "  names: 2 renamed to Hugging Face names"
    assert lines[2] == ("  warning: architecture 'gptj' is not one transformers' GGUF loader reads: names from "
                        "gguf-py's map, layout changes other than llama's q/k permutation not undone")
    assert lines[3] == "  warning: " + WARNING.format(verb="written", names=f"{Q}, {K}")  # file order
    assert len(lines) == 4
    code, out, _ = run_cli("convert", gptj, tmp_path / "again.safetensors", "--hf-names", "--json")
    assert code == 0 and sorted(json.loads(out)["left_in_gguf_order"]) == [K, Q]


def test_convert_counts_put_back_tensors_with_their_noun(tmp_path: Path) -> None:
    heads = [(4, 2)]
    g = convert_like_llama_cpp(tmp_path / "l.gguf", "llama", attention_source(heads), heads)
    code, out, err = run_cli("convert", g, tmp_path / "l.safetensors", "--hf-names")
    assert code == 0, err
    assert out.splitlines()[1] == "  names: 8 renamed to Hugging Face names; q/k rows put back in Hugging Face " \
                                  "order in 4 tensors"
    assert "warning" not in out  # every q/k tensor was put back


def test_diff_warns_of_rows_compared_in_gguf_order(gptj: Path, tmp_path: Path) -> None:
    back = tmp_path / "back.safetensors"
    assert run_cli("convert", gptj, back, "--hf-names")[0] == 0
    warning = "warning: " + WARNING.format(verb="compared", names=f"{K}, {Q}")  # sorted, as the diff lists them
    for fmt in ("text", "md"):
        code, out, err = run_cli("diff", gptj, back, "--format", fmt)
        assert code == 0, err
        assert warning in out.splitlines(), out
    code, out, _ = run_cli("diff", back, gptj, "--json")
    assert code == 0 and sorted(json.loads(out)["left_in_gguf_order"]) == [K, Q]


def test_diff_of_put_back_rows_has_no_warning(tmp_path: Path) -> None:
    heads = [(4, 2)]
    source = attention_source(heads)
    g = convert_like_llama_cpp(tmp_path / "l.gguf", "llama", source, heads)
    back = tmp_path / "l.safetensors"
    assert run_cli("convert", g, back, "--hf-names")[0] == 0
    code, out, err = run_cli("diff", g, back)
    assert code == 0, err
    assert "q/k rows put back in Hugging Face order in 4 tensors" in out and "warning" not in out


def test_id_of_a_header_only_gguf(tmp_path: Path) -> None:
    """weight-inspect's tiny.gguf holds no tensor data: the structural ID needs only the header,
    so ``id`` gives weight-inspect's golden ID; hashing the data is refused with a clear error."""
    tiny = tmp_path / "tiny.gguf"
    tiny.write_bytes(tiny_gguf_header())
    code, out, err = run_cli("id", tiny)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["wi:gguf:3:d775e08a",
                                "structure sha256: d775e08a3e69f1edce0f3230ecc28841dd1c871f467529a0a8e7aa361b671202",
                                "content sha256:   not computed (--content hashes the tensor data)"]
    code, out, err = run_cli("id", tiny, "--json", "--canonical")
    assert code == 0 and json.loads(out)["id"] == "wi:gguf:3:d775e08a", err
    for option in ("--content", "--tensors"):
        code, out, err = run_cli("id", tiny, option)
        assert code == 2 and out == ""
        assert "data section would start at offset 128, past the end of the 122-byte file" in err
