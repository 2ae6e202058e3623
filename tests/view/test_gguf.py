"""The viewer on GGUF files (llama.cpp's format), made here with gguf-py's writer: the document is
``inspect``'s summary, the values are what gguf-py's reader dequantizes, the diff (GGUF vs GGUF,
GGUF vs the safetensors it came from) is ``diff``'s, a tensor gguf-py cannot dequantize shows its
error, a corrupt file is the CLI's one-line error; and the page in real Chromium, live and exported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors.errors import GGUFUnsupported
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.diff import diff_files, shown_names, tensor_value_diff
from pysafetensors.tools.stats import tensor_stats
from pysafetensors.tools.summary import GGUFSummary, gguf_value_text, summarize
from pysafetensors.tools.values import heatmap, histogram
from pysafetensors.view import ViewSession, export_report
from pysafetensors.view.data import js_safe

from .conftest import canvas_ink, open_page, serving
from .test_cli import env
from .test_data import check_blocks, cli_json, inspect_tree, live_input, tree_as_dicts, with_leaf_numbers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gguf"))
gh: Any = __import__("gguf_helpers")  # the GGUF tests' writers (gguf-py)

# A vocabulary of 60,000 20-character tokens: over a megabyte the page must not carry.
TOKENS = [f"token-{i:014d}" for i in range(60_000)]
UNREADABLE = "q8_1"  # gguf-py 0.19 has no dequantization for Q8_1


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view_gguf")
    tensors = gh.mixed_tensors()
    tensors[UNREADABLE] = (np.random.default_rng(1).integers(0, 256, (8, 256 // 32 * 40), np.uint8), gh.Q.Q8_1)
    arrays = {"tokenizer.ggml.tokens": (TOKENS, gh.V.STRING), "test.arr.nested": ([[1, 2], [3]], gh.V.ARRAY)}
    mixed = gh.write_gguf(root / "mixed.gguf", tensors, kv=gh.EVERY_VALUE, arrays=arrays)
    edited = dict(tensors)
    edited["q8_0"] = (gh.quants.quantize(np.ones((8, 256), np.float32), gh.Q.Q8_0), gh.Q.Q8_0)
    del edited["ids"]
    arrays2 = {"tokenizer.ggml.tokens": (TOKENS[:-1] + ["changed"], gh.V.STRING)}
    edited_path = gh.write_gguf(root / "edited.gguf", edited, kv=gh.EVERY_VALUE, arrays=arrays2)
    source = gh.llama_source()
    from pysafetensors.numpy import save_file

    save_file(source, root / "llama.safetensors")
    return {"mixed": mixed, "edited": edited_path, "source": root / "llama.safetensors",
            "llama": gh.llama_gguf(root / "llama-q8.gguf", source, quantize=gh.Q.Q8_0)}


@pytest.fixture(scope="module")
def reference(files: dict[str, Path]) -> dict[str, np.ndarray]:
    """gguf-py's reader and dequantizer: the oracle for the values (the unreadable type left out)."""
    import gguf

    out = {}
    for t in gguf.GGUFReader(str(files["mixed"])).tensors:
        if t.name != UNREADABLE:
            shape = tuple(int(d) for d in reversed(t.shape.tolist()))
            plain = t.tensor_type in (gh.Q.F32, gh.Q.F16, gh.Q.I32)  # gguf-py's reader gives these as they are
            values = t.data if plain else gguf.quants.dequantize(t.data, t.tensor_type)
            out[t.name] = np.asarray(values).reshape(shape)
    return out


# --- the document ---------------------------------------------------------------------------------


def test_document_is_inspects_summary_and_gguf_pys_header(files: dict[str, Path]) -> None:
    import gguf

    with ViewSession.open([str(files["mixed"])]) as session:
        body = session.document_json()
        inp = live_input(session)
        with open_checkpoint(str(files["mixed"]), gguf=True) as ckpt:
            summary = summarize(ckpt, tree=True)
    assert isinstance(summary, GGUFSummary)
    # The numbers are inspect's (the CLI's JSON), minus what the page gets as columns and pairs.
    expected = cli_json("inspect", files["mixed"], "--tree")
    for key, value in inp["summary"].items():
        assert value == js_safe(expected[key]), key
    assert set(expected) - set(inp["summary"]) == {"tensors", "tree", "metadata", "modelspec", "filter",
                                                   "total_tensor_count", "gguf_metadata", "repeated_blocks"}
    check_blocks(inp["blocks"], expected["repeated_blocks"])
    assert inp["format"] == "gguf" and inp["summary"]["format"] == "gguf" and inp["summary"]["gguf_version"] == 3
    cols = inp["tensors"]
    rows = expected["tensors"]
    assert cols["name"] == [r["name"] for r in rows] and cols["dtype"] == [r["dtype"] for r in rows]
    assert cols["shape"] == [r["shape"] for r in rows] and cols["dims"] == [r["gguf_dims"] for r in rows]
    assert cols["params"] == [r["parameters"] for r in rows] and cols["bytes"] == [r["nbytes"] for r in rows]
    assert with_leaf_numbers(tree_as_dicts(inp["tree"], cols["name"]), cols) == inspect_tree(expected["tree"])
    # gguf-py's reader: the same tensors, GGML types, GGUF dims and stored bytes.
    reader = gguf.GGUFReader(str(files["mixed"]))
    assert cols["name"] == [t.name for t in reader.tensors]
    assert cols["dtype"] == [t.tensor_type.name for t in reader.tensors]
    assert cols["dims"] == [[int(d) for d in t.shape] for t in reader.tensors]
    assert cols["bytes"] == [int(t.n_bytes) for t in reader.tensors]
    assert inp["summary"]["parameter_count"] == sum(int(t.n_elements) for t in reader.tensors)
    assert cols["values"][cols["name"].index("q4_k")] == "F32" and cols["values"][cols["name"].index("f16")] == "F16"
    # Every key/value pair, typed, as inspect's text shows it; the vocabulary as length + first items.
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert [k for k, _ in inp["metadata"]] == keys
    assert inp["metadata"] == [[k, gguf_value_text(e)] for k, e in summary.gguf_metadata.items()]
    assert inp["metadata_types"] == [e.type for e in summary.gguf_metadata.values()]
    vocab = dict(inp["metadata"])["tokenizer.ggml.tokens"]
    assert vocab.startswith('60,000 items: ["token-00000000000000", "token-00000000000001"') and len(vocab) <= 250
    assert len(body) < 20_000  # the 1.2 MB vocabulary stays out of the page


# --- values ---------------------------------------------------------------------------------------


def test_values_are_gguf_pys_dequantized_values(files: dict[str, Path], reference: dict[str, np.ndarray]) -> None:
    with ViewSession.open([str(files["mixed"])]) as session, \
            open_checkpoint(str(files["mixed"]), gguf=True) as ckpt:
        for name, values in reference.items():
            reply = session.values(0, name)
            assert reply["stats"] == js_safe(tensor_stats(ckpt, name).to_dict()), name  # the tools' numbers
            x = values.astype(np.float64)
            s = reply["stats"]
            assert s["dtype"] == ckpt.info(name).type and s["elements"] == x.size
            assert s["min"] == x.min() and s["max"] == x.max()
            assert s["mean"] == pytest.approx(x.mean(), rel=1e-9, abs=1e-12)
            assert s["std"] == pytest.approx(x.std(), rel=1e-9, abs=1e-12)
            assert s["zeros"] == int(np.count_nonzero(x == 0))
            counts, edges = np.histogram(x, bins=64)
            assert reply["histogram"]["counts"] == counts.tolist(), name
            assert reply["histogram"]["edges"] == pytest.approx(edges.tolist())
            assert reply["histogram"] == js_safe(histogram(ckpt, name, 64).to_dict())
            if x.ndim >= 2:  # 8 x 256: every cell one value
                assert reply["heatmap"] == js_safe(heatmap(ckpt, name, 512).to_dict())
                assert np.array_equal(np.array(reply["heatmap"]["cells"]), x.reshape(-1, x.shape[-1]))
            else:
                assert reply["heatmap"] is None
        with pytest.raises(GGUFUnsupported, match="Q8_1"):
            session.values(0, UNREADABLE)


def test_remote_gguf_reads_the_header_then_one_tensor_once(files: dict[str, Path]) -> None:
    data = files["mixed"].read_bytes()
    with RangeServer({"m.gguf": data}) as origin:
        url = origin.url("m.gguf")
        with ViewSession.open([url]) as session:
            ckpt = session.inputs[0]
            # Opening read the 1.7 MB header (how far past it the GGUF front reads is tests/gguf's matter).
            assert origin.log.bytes_sent >= ckpt.header_size
            origin.reset_log()
            inp = live_input(session)
            assert origin.log.requests == 0 and inp["local"] is False and inp["label"] == url
            t = ckpt.info("q4_k")
            origin.reset_log()
            reply = session.values(0, "q4_k")
            assert origin.log.bytes_sent == t.nbytes  # stats, histogram and heatmap from one read
            with ViewSession.open([str(files["mixed"])]) as local:
                assert reply == local.values(0, "q4_k")
                assert inp["summary"] | {"path": None} == json.loads(local.document_json())["inputs"][0]["summary"] | {
                    "path": None}


# --- diff -----------------------------------------------------------------------------------------


def test_diff_of_two_gguf_files_is_diffs(files: dict[str, Path]) -> None:
    with ViewSession.open([str(files["mixed"]), str(files["edited"])]) as session:
        diff = session.document()["diff"]
        expected = js_safe(diff_files(*session.inputs).to_dict())
        reply = session.value_diff("q8_0")
        assert reply["diff"] == tensor_value_diff(*session.inputs, "q8_0").to_dict()
    assert "names" not in diff  # the same names on both sides
    assert [t["name"] for t in diff["tensors_removed"]] == ["ids"] and diff["same"] is False
    assert {k: v for k, v in diff.items() if not k.startswith("metadata")} == \
        {k: v for k, v in expected.items() if not k.startswith("metadata")}
    assert list(diff["metadata_changed"]) == list(expected["metadata_changed"]) == ["tokenizer.ggml.tokens"]
    change = diff["metadata_changed"]["tokenizer.ggml.tokens"]
    full = expected["metadata_changed"]["tokenizer.ggml.tokens"]
    assert len(full["a"]) > 1_000_000 and change["a"] == full["a"][:200] + f"... ({len(full['a'])} chars)"
    assert reply["diff"]["compared"] and reply["diff"]["differing"] > 0 and reply["histogram"]["of"] == "differences"


def test_diff_of_gguf_and_its_safetensors_source_maps_the_names(files: dict[str, Path]) -> None:
    q = "model.layers.0.self_attn.q_proj.weight"
    with ViewSession.open([str(files["llama"]), str(files["source"])]) as session:
        gguf_side, st_side = session.inputs
        diff = session.document()["diff"]
        expected = js_safe(diff_files(gguf_side, st_side).to_dict())
        names = shown_names(gguf_side, st_side)[0]
        reply = session.value_diff(q)
        oracle = tensor_value_diff(gguf_side, st_side, q)
    assert diff | {"names": None} == expected | {"names": None}
    assert diff["names"][1] is None
    assert diff["names"][0] == [names[t.name] for t in gguf_side.tensors]
    assert q in diff["names"][0] and "blk.0.attn_q.weight" not in diff["names"][0]
    assert expected["tensors_added"] == expected["tensors_removed"] == [] and expected["names_mapped"] == 12
    assert reply["diff"] == oracle.to_dict() and reply["diff"]["name"] == q
    # Q8_0 of the rows un-permuted: close to the source, nowhere near a permuted comparison.
    assert reply["diff"]["compared"] and reply["diff"]["cosine_similarity"] > 0.999
    assert sum(reply["histogram"]["counts"]) == 32 * 32


# --- the command line -----------------------------------------------------------------------------


def run_view(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pysafetensors", "view", *map(str, args)], capture_output=True,
                          text=True, timeout=120, env=env(), stdin=subprocess.DEVNULL, check=False)


def test_a_corrupt_gguf_is_one_line_and_exit_2(files: dict[str, Path], tmp_path: Path) -> None:
    data = files["mixed"].read_bytes()
    cases = {
        "truncated.gguf": data[:200],  # the metadata runs past the end
        "absurd.gguf": data[:8] + (2**63).to_bytes(8, "little") + data[16:],  # 2^63 tensors
    }
    for name, body in cases.items():
        bad = tmp_path / name
        bad.write_bytes(body)
        for extra in ([], ["--export", tmp_path / "r.html"]):
            r = run_view(bad, "--no-browser", *extra)
            assert r.returncode == 2, r.stderr
            assert r.stdout == "" and "Traceback" not in r.stderr
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("pysafetensors: error: ") and name in lines[0], r.stderr
        assert not (tmp_path / "r.html").exists()


def test_export_with_stats_of_a_gguf(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    r = run_view(files["mixed"], "--export", out, "--with-stats")
    assert r.returncode == 0, r.stderr
    text = out.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="pst-data">') + len('<script type="application/json" id="pst-data">')
    data = json.loads(text[start:text.index("</script>", start)])
    with ViewSession.open([str(files["mixed"])]) as session:
        assert data["inputs"][0]["tensors"] == session.document()["inputs"][0]["tensors"]
        stats = {s["name"]: s for s in data["inputs"][0]["stats"]}
        for name in stats:
            if name != UNREADABLE:
                assert stats[name]["stats"] == session.values(0, name)["stats"]
    assert "Q8_1" in stats[UNREADABLE]["error"] and "stats" not in stats[UNREADABLE]
    assert len(text) < 200_000


# --- the page in Chromium --------------------------------------------------------------------------


def detail(page: Any, table: str) -> dict[str, str]:
    keys = [t.strip() for t in page.locator(f"{table} td.key").all_text_contents()]
    return dict(zip(keys, [t.strip() for t in page.locator(f"{table} td.val").all_text_contents()]))


def test_the_page_shows_a_gguf(page: Any, files: dict[str, Path]) -> None:
    with open_checkpoint(str(files["mixed"]), gguf=True) as ckpt:
        summary = summarize(ckpt)
        q4k = tensor_stats(ckpt, "q4_k")
    assert isinstance(summary, GGUFSummary)
    with serving(ViewSession.open([str(files["mixed"])])) as server:
        open_page(page, server.url)
        assert page.text_content("#param-count .value") == f"{summary.parameter_count:,}"
        assert page.text_content("#tensor-count .value") == "9"
        assert page.text_content("#format .value") == "GGUF v3"
        assert page.text_content("#alignment .value") == "32"
        by_type = [t.strip() for t in page.locator("#dtypes td").all_text_contents()][0::3]
        assert by_type == list(summary.parameters_by_dtype)
        rows = page.locator("#metadata tr").evaluate_all("rs => rs.slice(1).map(r => [...r.cells].map(c => c.textContent))")
        assert rows == [[k, e.type, gguf_value_text(e)] for k, e in summary.gguf_metadata.items()]
        vocab = next(r for r in rows if r[0] == "tokenizer.ggml.tokens")
        assert vocab[1] == "array[string]" and vocab[2].startswith("60,000 items: [")

        page.click("button[data-tab=tree]")
        assert page.locator("#tree .row[data-k]").count() == 9  # no dots: every tensor at the top
        page.click("button[data-tab=table]")
        page.click("#table .row[data-tensor='q4_k']")
        page.wait_for_selector("#heatmap")
        info = detail(page, "#tensor-info")
        assert info["type"] == "Q4_K" and info["shape"] == "[8, 256]" and info["GGUF dims"] == "[256, 8]"
        assert info["values"] == "F32 (dequantized by gguf-py)"
        stats = detail(page, "#stats")
        for key in ("min", "max", "mean", "std"):
            assert stats[key] == page.evaluate("x => fmtNum(x)", getattr(q4k, key)), key
        assert stats["elements"] == "2,048"
        assert canvas_ink(page, "#histogram") > 50 and canvas_ink(page, "#heatmap") > 1000
        page.click(f"#table .row[data-tensor='{UNREADABLE}']")
        page.wait_for_selector("#stats-error")
        assert "Dequantization for Q8_1 is not yet implemented" in page.text_content("#stats-error")
        page.click("#table .row[data-tensor='bf16']")  # the server went on
        page.wait_for_selector("#heatmap")
        assert detail(page, "#tensor-info")["values"] == "BF16"  # a plain type: read as it is
        page.click("#table .row[data-tensor='f16']")
        page.wait_for_selector("#heatmap")
        assert detail(page, "#tensor-info")["values"] == "F16"
        errors = [e for e in page.log.errors if "422" not in e]  # the Q8_1 reply's status, logged by Chromium
        assert errors == []


def test_the_exported_gguf_report_opens_from_file(page: Any, files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "gguf.html"
    with ViewSession.open([str(files["mixed"])]) as session:
        export_report(session, out, with_stats=True)
    open_page(page, out.as_uri())
    assert page.text_content("#format .value") == "GGUF v3"
    page.click("button[data-tab=table]")
    page.click("#table .row[data-tensor='q8_0']")
    page.wait_for_selector("#histogram")
    assert canvas_ink(page, "#histogram") > 50
    page.click(f"#table .row[data-tensor='{UNREADABLE}']")
    assert "Q8_1" in page.text_content("#stats-error")
    assert page.log.requests == [out.as_uri()] and page.log.errors == []


def test_the_diff_page_of_a_gguf_and_its_source(page: Any, files: dict[str, Path]) -> None:
    q = "model.layers.0.self_attn.q_proj.weight"
    with ViewSession.open([str(files["llama"]), str(files["source"])]) as s:
        oracle = tensor_value_diff(*s.inputs, q)
    with serving(ViewSession.open([str(files["llama"]), str(files["source"])])) as server:
        open_page(page, server.url)
        assert page.text_content("#diff-added .value") == "0" and page.text_content("#diff-removed .value") == "0"
        changed = page.locator("#diff-list .row[data-k]").evaluate_all("rs => rs.map(r => r.dataset.tensor)")
        assert q in changed  # Q8_0 vs F32: same shape, another type
        page.click(f"#diff-list .row[data-tensor='{q}']")
        page.wait_for_selector("#diff-histogram")
        numbers = detail(page, "#value-diff-numbers")
        assert numbers["compared"] == "yes" and numbers["elements"] == "1,024"
        assert numbers["cosine_similarity"] == page.evaluate("x => fmtNum(x)", oracle.cosine_similarity)
        assert numbers["max_abs_diff"] == page.evaluate("x => fmtNum(x)", oracle.max_abs_diff)
        assert canvas_ink(page, "#diff-histogram") > 50
        assert page.log.errors == []
