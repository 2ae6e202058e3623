"""The viewer's JSON is the CLI's numbers: checked against ``inspect``/``stats``/``diff --json`` and
upstream safetensors, on MiniLM, a sharded checkpoint, a loopback HTTP URL and a 100,000-tensor header.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors.cli.main import main as cli_main
from pysafetensors.tools.checkpoint import open_checkpoint
from pysafetensors.tools.diff import diff_files
from pysafetensors.tools.values import difference_histogram, heatmap, histogram
from pysafetensors.view import ViewSession
from pysafetensors.view.data import HOLD_CAP, js_safe, thumbnail

from .conftest import THUMBNAIL, png, write_header_only

QUERY = "encoder.layer.0.attention.self.query.weight"


def cli_json(*args: object, code: int = 0) -> Any:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        got = cli_main([str(a) for a in args] + ["--json"])
    assert got == code, out.getvalue()
    return json.loads(out.getvalue())


def live_input(session: ViewSession, i: int = 0) -> dict[str, Any]:
    """Input ``i`` as the live page gets it: the first document's part (its tensors, tree and
    blocks left out), with what api/tensors then sends put in."""
    inp = json.loads(session.document_json())["inputs"][i]
    assert inp["tensors"] is None and inp["tree"] is None and inp["blocks"] is None
    part = json.loads(session.tensors_json(i))
    assert set(part) == {"tensors", "tree", "blocks"}
    return {**inp, **part}


def tree_as_dicts(tree: dict[str, list[Any]], names: list[str]) -> dict[str, Any]:
    """The page's flat tree arrays in inspect --tree --json's shape (paths rebuilt from labels,
    a tensor's label from its name after its group's path)."""
    def group(g: int, name: str) -> dict[str, Any]:
        return {"name": name, "label": tree["label"][g], "parameters": tree["params"][g], "tensors": tree["tensors"][g],
                "nbytes": tree["bytes"][g], "children": []}

    root = group(0, "")
    stack = [(root, tree["end"][0])]
    for pos, n in enumerate(tree["nodes"]):
        while pos >= stack[-1][1]:
            stack.pop()
        parent = stack[-1][0]
        if n >= 0:
            label = names[n][len(parent["name"]) + 1:] if parent is not root else names[n]
            parent["children"].append({"name": names[n], "label": label, "parameters": 0, "tensors": 1, "nbytes": 0,
                                       "children": [], "index": n})
        else:
            label = tree["label"][-1 - n]
            node = group(-1 - n, f"{parent['name']}.{label}" if parent is not root else label)
            parent["children"].append(node)
            stack.append((node, tree["end"][-1 - n]))
    assert len(stack) >= 1 and tree["end"][0] == len(tree["nodes"])
    return root


def with_leaf_numbers(node: dict[str, Any], columns: dict[str, list[Any]]) -> dict[str, Any]:
    """``tree_as_dicts``' tree with each tensor's parameters and bytes from the tensor columns."""
    stack = [node]
    while stack:
        n = stack.pop()
        if "index" in n:
            n["parameters"], n["nbytes"] = columns["params"][n["index"]], columns["bytes"][n["index"]]
            del n["index"]
        stack.extend(n["children"])
    return node


def inspect_tree(node: dict[str, Any]) -> dict[str, Any]:
    return {"name": node["name"], "label": node["label"], "parameters": node["parameters"],
            "tensors": node["tensors"], "nbytes": node["nbytes"],
            "children": [inspect_tree(c) for c in node["children"]]}


def check_against_inspect(inp: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """The input's summary, tensor columns and tree are `inspect --tree --json`'s."""
    expected = cli_json("inspect", path, "--tree")
    for key, value in inp["summary"].items():
        assert value == expected[key], key
    assert set(expected) - set(inp["summary"]) == {"tensors", "tree", "metadata", "modelspec", "filter",
                                                   "total_tensor_count", "repeated_blocks"}
    check_blocks(inp["blocks"], expected["repeated_blocks"])
    rows = expected["tensors"]
    cols = inp["tensors"]
    assert cols["name"] == [r["name"] for r in rows]
    assert cols["dtype"] == [r["dtype"] for r in rows]
    assert cols["shape"] == [r["shape"] for r in rows]
    assert cols["params"] == [r["parameters"] for r in rows]
    assert cols["bytes"] == [r["nbytes"] for r in rows]
    assert [[b, e] for b, e in zip(cols["begin"], cols["end"])] == [r["data_offsets"] for r in rows]
    if expected["files"]:
        assert [expected["files"][i] for i in cols["file"]] == [r["file"] for r in rows]
    else:
        assert cols["file"] is None
    assert with_leaf_numbers(tree_as_dicts(inp["tree"], cols["name"]), cols) == inspect_tree(expected["tree"])
    meta = expected["metadata"]
    plain = None if meta is None else [[k, v] for k, v in meta.items() if not k.startswith("modelspec.")]
    assert inp["metadata"] == plain
    assert inp["modelspec"] == [[k, v] for k, v in expected["modelspec"].items()]
    return expected


def check_blocks(blocks: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """The page's blocks that are not nested in another's members are inspect's repeated blocks."""
    shown = [b for b in blocks if not b["nested"]]
    assert [(b["path"], b["label"], b["indices"], b["count"], b["copies"], b["tensors"], b["params"], b["bytes"],
             b["total_params"], b["total_bytes"], b["whole"], [d[1:] for d in b["differing"]]) for b in shown] == [
        (e["path"], e["label"], e["indices"], e["count"], e["copies"], e["tensors"], e["parameters"], e["nbytes"],
         e["total_parameters"], e["total_nbytes"], e["whole_group"],
         [[d["index"], d["path"], d["reason"]] for d in e["differing"]]) for e in expected]
    for b in blocks:
        assert b["ranges"] in b["label"] and len(b["members"]) == b["count"] == len(b["indices"])


def check_values(reply: dict[str, Any], path: str | Path, name: str, oracle: np.ndarray) -> None:
    """A values reply is `stats --json`'s numbers, numpy's histogram and the matrix itself."""
    stats = cli_json("stats", path, "--filter", name)["tensors"]
    assert [reply["stats"]] == stats
    x = oracle.astype(np.float64).ravel()
    counts, edges = np.histogram(x, bins=64, range=(x.min(), x.max()))
    assert reply["histogram"]["counts"] == counts.tolist()
    assert reply["histogram"]["edges"] == edges.tolist()
    assert reply["stats"]["min"] == float(x.min()) and reply["stats"]["max"] == float(x.max())
    if oracle.ndim >= 2:
        h = reply["heatmap"]
        rows, cols = int(np.prod(oracle.shape[:-1])), oracle.shape[-1]
        assert (h["rows"], h["cols"]) == (rows, cols)
        if rows <= 512 and cols <= 512:  # one cell per element: the matrix itself
            assert np.array_equal(np.array(h["cells"]), x.reshape(rows, cols))
    else:
        assert reply["heatmap"] is None


# --- MiniLM ------------------------------------------------------------------------------------------


def test_minilm_document_is_inspects(minilm: Path) -> None:
    with ViewSession.open([str(minilm)]) as session:
        doc = session.document()
        served = json.loads(session.document_json())
        tensors = json.loads(session.tensors_json(0))
    # The live page gets the same document in two answers: the tensors come on their own.
    parts = ("tensors", "tree", "blocks")
    assert served == {**doc, "live": True, "inputs": [{**doc["inputs"][0], **dict.fromkeys(parts)}]}
    assert tensors == {k: doc["inputs"][0][k] for k in parts}
    assert [b["label"] for b in tensors["blocks"]] == ["encoder.layer.[0–5] × 6"]
    assert doc["diff"] is None and len(doc["inputs"]) == 1
    inp = doc["inputs"][0]
    check_against_inspect(inp, minilm)
    assert inp["summary"]["parameter_count"] == 22_713_728
    assert inp["summary"]["tensor_count"] == 104
    assert inp["thumbnail"] is None and inp["stats"] is None and inp["local"] is True


def test_minilm_values_are_stats_and_numpys(minilm: Path) -> None:
    from safetensors.numpy import load_file as upstream_load

    oracle = upstream_load(str(minilm))
    with ViewSession.open([str(minilm)]) as session:
        for name in (QUERY, "encoder.layer.0.attention.self.query.bias", "embeddings.word_embeddings.weight"):
            check_values(session.values(0, name), minilm, name, oracle[name])
        big = session.values(0, "embeddings.word_embeddings.weight")["heatmap"]
        with open_checkpoint(str(minilm)) as ckpt:
            assert big == heatmap(ckpt, "embeddings.word_embeddings.weight").to_dict()
        assert len(big["cells"]) == 512 and len(big["cells"][0]) == 384  # 30522 rows folded into 512 cells
        ids = session.values(0, "embeddings.position_ids")  # I64 [1, 512]
        assert ids["stats"]["min"] == 0 and ids["stats"]["max"] == 511
        with pytest.raises(KeyError):
            session.values(0, "no.such.tensor")
        with pytest.raises(IndexError):
            session.values(1, QUERY)


# --- a sharded checkpoint -------------------------------------------------------------------------


def test_sharded_document_and_values(shards: Path, minilm: Path) -> None:
    from safetensors.numpy import load_file as upstream_load

    index = shards / "model.safetensors.index.json"
    for given in (index, shards):  # the index, or the directory holding it
        with ViewSession.open([str(given)]) as session:
            inp = session.document()["inputs"][0]
            expected = check_against_inspect(inp, given)
            assert len(expected["files"]) == 3
            last = inp["tensors"]["name"][-1]
            assert expected["files"][inp["tensors"]["file"][-1]] == "model-00003-of-00003.safetensors"
            name = QUERY
            oracle = upstream_load(str(minilm))[name]
            check_values(session.values(0, name), given, name, oracle)
            with ViewSession.open([str(minilm)]) as single:  # the same bytes give the same numbers
                assert session.values(0, last) == single.values(0, last)


# --- a loopback HTTP URL ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_model(minilm: Path) -> Any:
    with RangeServer({"model.safetensors": minilm.read_bytes()}) as server:
        yield server


def test_http_document_reads_only_the_header_and_values_only_the_tensor(http_model: RangeServer, minilm: Path) -> None:
    from safetensors.numpy import load_file as upstream_load

    url = http_model.url("model.safetensors")
    http_model.reset_log()
    session = ViewSession.open([url])
    try:
        opened = http_model.log.bytes_sent
        header_end = 8 + session.inputs[0].header_size
        assert header_end <= opened <= 100_001  # the first ranged request holds the 11 kB header
        http_model.reset_log()
        inp = live_input(session)
        assert http_model.log.requests == 0  # the page's document and tensor list need no byte more
        assert inp["local"] is False and inp["label"] == url
        check_against_inspect(inp, url)
        info = session.inputs[0].info(QUERY)
        http_model.reset_log()
        reply = session.values(0, QUERY)
        # One read of exactly the tensor's bytes serves stats, histogram and heatmap.
        assert http_model.log.bytes_sent == info.nbytes
        start, end = header_end + info.begin, header_end + info.end - 1
        for rng in http_model.log.ranges:
            lo, hi = (int(v) for v in rng.removeprefix("bytes=").split("-"))
            assert start <= lo <= hi <= end, rng
        check_values(reply, url, QUERY, upstream_load(str(minilm))[QUERY])
        with ViewSession.open([str(minilm)]) as local:
            assert reply == local.values(0, QUERY)
    finally:
        session.close()


def test_http_value_diff_reads_each_tensor_once(http_model: RangeServer, edited_pair: tuple[Path, Path, dict[str, str]]) -> None:
    a, b, changed = edited_pair
    name = changed["nudged"]
    with ViewSession.open([http_model.url("model.safetensors"), str(b)]) as session:
        http_model.reset_log()
        reply = session.value_diff(name)
        assert http_model.log.bytes_sent == session.inputs[0].info(name).nbytes
    with ViewSession.open([str(a), str(b)]) as local:
        assert reply == local.value_diff(name)


# --- two inputs: the diff -------------------------------------------------------------------------


def test_diff_document_and_value_diffs_are_diffs(edited_pair: tuple[Path, Path, dict[str, str]]) -> None:
    a, b, changed = edited_pair
    with ViewSession.open([str(a), str(b)]) as session:
        doc = session.document()
        assert doc["diff"] == cli_json("diff", a, b, code=1)
        values = {v["name"]: v for v in cli_json("diff", a, b, "--values", code=1)["values"]}
        assert {c["name"] for c in doc["diff"]["tensors_changed"]} == {changed["cast"], changed["reshaped"]}
        for key in ("nudged", "cast", "reshaped"):
            name = changed[key]
            reply = session.value_diff(name)
            assert reply["diff"] == values[name]
            with open_checkpoint(str(a)) as ca, open_checkpoint(str(b)) as cb:
                if key == "reshaped":
                    assert reply["diff"]["compared"] is False and reply["histogram"] is None
                else:
                    assert reply["histogram"] == difference_histogram(ca, cb, name, 64).to_dict()
        nudged = session.value_diff(changed["nudged"])
        assert nudged["diff"]["differing"] == 8
        counts = nudged["histogram"]["counts"]  # a - b: eight values near -0.01, the rest 0
        assert counts[0] == 8 and counts[-1] == 147_456 - 8 and sum(counts) == 147_456
        with pytest.raises(KeyError):
            session.value_diff(changed["added"])  # only in B: nothing to compare


# --- export data ------------------------------------------------------------------------------------


def test_document_with_stats_is_stats_and_histograms(minilm: Path) -> None:
    stats = cli_json("stats", minilm)["tensors"]
    with ViewSession.open([str(minilm)]) as session, open_checkpoint(str(minilm)) as ckpt:
        doc = session.document(with_stats=True)
        assert doc["live"] is False
        got = doc["inputs"][0]["stats"]
        assert [g["stats"] for g in got] == stats
        for g in got[:12]:
            assert g["histogram"] == histogram(ckpt, g["name"], 64).to_dict()


def test_two_inputs_with_stats_carry_diff_values(edited_pair: tuple[Path, Path, dict[str, str]]) -> None:
    a, b, _ = edited_pair
    with ViewSession.open([str(a), str(b)]) as session:
        doc = session.document(with_stats=True)
    assert doc["diff"] == js_safe(diff_files(str(a), str(b), values=True).to_dict())
    assert all(len(inp["stats"]) == inp["summary"]["tensor_count"] for inp in doc["inputs"])


# --- thumbnails and exact integers ------------------------------------------------------------------


@pytest.mark.parametrize("value,shown", [
    (THUMBNAIL, True),
    ("data:image/jpeg;base64," + __import__("base64").b64encode(b"\xff\xd8\xff\xe0rest").decode(), True),
    ("data:image/webp;base64," + __import__("base64").b64encode(b"RIFF\x10\x00\x00\x00WEBPVP8 ").decode(), True),
    ("data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+", False),  # SVG can script
    ("data:image/png;base64," + __import__("base64").b64encode(b"<script>x</script>").decode(), False),  # not a PNG
    (THUMBNAIL.replace("data:image/png", "data:image/jpeg"), False),  # says JPEG, holds a PNG
    (THUMBNAIL + "!", False),
    ("DATA:image/png;base64," + THUMBNAIL.split(",")[1], False),
    ("data:image/png,rawbytes", False),
    ("javascript:alert(1)//data:image/png;base64,", False),
    ("https://example.com/x.png", False),
    ("data:image/png;base64,", False),
])
def test_thumbnail_shown_only_for_a_real_image_data_uri(value: str, shown: bool) -> None:
    assert thumbnail({"modelspec.thumbnail": value}) == (value if shown else None)


def test_thumbnail_in_the_document(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "spec.safetensors"
    image = "data:image/png;base64," + __import__("base64").b64encode(png(3, 2, (0, 0, 0))).decode()
    save_file({"w": np.ones((2, 2), np.float32)}, str(path),
              metadata={"modelspec.title": "T", "modelspec.thumbnail": image, "format": "pt"})
    with ViewSession.open([str(path)]) as session:
        inp = session.document()["inputs"][0]
    assert inp["thumbnail"] == image
    assert inp["modelspec"] == [["modelspec.title", "T"], ["modelspec.thumbnail", image]]
    assert inp["metadata"] == [["format", "pt"]]


def test_integers_beyond_2_53_are_exact_strings(tmp_path: Path) -> None:
    from pysafetensors.numpy import save_file

    path = tmp_path / "u64.safetensors"
    save_file({"big": np.array([[0, 2**64 - 1], [2**53 + 1, 7]], np.uint64)}, str(path))
    with ViewSession.open([str(path)]) as session:
        reply = session.values(0, "big")
    stats = cli_json("stats", path)["tensors"][0]
    assert reply["stats"]["max"] == str(stats["max"]) == "18446744073709551615"
    assert reply["stats"]["min"] == 0
    assert json.loads(json.dumps(reply))["heatmap"]["rows"] == 2


def test_a_remote_tensor_over_the_hold_cap_is_streamed_with_the_same_numbers(
    http_model: RangeServer, minilm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pysafetensors.tools import pairing

    assert HOLD_CAP >= 47 << 20  # MiniLM's largest tensor (47 MB) is held: one read
    monkeypatch.setattr(pairing, "HOLD_CAP", 1024)
    with ViewSession.open([http_model.url("model.safetensors")]) as session:
        http_model.reset_log()
        reply = session.values(0, QUERY)
        nbytes = session.inputs[0].info(QUERY).nbytes
        assert http_model.log.bytes_sent == 3 * nbytes  # stats, histogram, heatmap: one pass each
    with ViewSession.open([str(minilm)]) as local:
        assert reply == local.values(0, QUERY)


def test_a_session_takes_one_or_two_inputs(minilm: Path) -> None:
    with pytest.raises(ValueError):
        ViewSession([])


def test_no_metadata_and_empty_metadata(tmp_path: Path) -> None:
    path = tmp_path / "bare.safetensors"
    write_header_only(path, {"a": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]}}, b"\x00\x00\x80\x3f")
    with ViewSession.open([str(path)]) as session:
        inp = session.document()["inputs"][0]
        assert inp["metadata"] is None and inp["modelspec"] == []
        assert session.values(0, "a")["stats"]["mean"] == 1.0
        assert session.values(0, "a")["heatmap"] is None
