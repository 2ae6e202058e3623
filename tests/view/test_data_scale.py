"""The viewer's JSON on the larger inputs, against the CLI's results: a sharded checkpoint and a
100,000-tensor header (documents, diffs, value diffs and stats)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pysafetensors.view import ViewSession

from .conftest import write_header_only
from .test_data import check_blocks, cli_json, live_input, tree_as_dicts, with_leaf_numbers

# --- a sharded checkpoint -----------------------------------------------------------------------------


def test_a_sharded_checkpoints_diff_is_the_diff_commands(shards: Path, edited_pair: tuple[Path, Path, dict[str, str]]
                                                          ) -> None:
    _, b, changed = edited_pair
    index = shards / "model.safetensors.index.json"
    values = {v["name"]: v for v in cli_json("diff", index, b, "--values", code=1)["values"]}
    with ViewSession.open([str(index), str(b)]) as session:
        doc = session.document()
        assert doc["diff"] == cli_json("diff", index, b, code=1)
        assert {c["name"] for c in doc["diff"]["tensors_changed"]} == {changed["cast"], changed["reshaped"]}
        assert [t["name"] for t in doc["diff"]["tensors_added"]] == [changed["added"]]
        files = doc["inputs"][0]["summary"]["files"]
        assert len(files) == 3
        for name in (changed["nudged"], changed["cast"], "pooler.dense.weight"):  # the last is in the last shard
            assert session.value_diff(name)["diff"] == values[name]
        assert values[changed["nudged"]]["differing"] == 8


# --- a 100,000-tensor header ---------------------------------------------------------------------


def check_against_summary(inp: dict[str, Any], path: Path) -> None:
    """As check_against_inspect, against the Summary that `inspect --tree --json` renders (its
    100 MB of indented JSON would take the test most of a minute to print and parse)."""
    from pysafetensors.tools import to_jsonable
    from pysafetensors.tools.summary import summarize

    expected = summarize(str(path), tree=True)
    for key, value in inp["summary"].items():
        assert value == to_jsonable(getattr(expected, key)), key
    check_blocks(inp["blocks"], to_jsonable(expected.repeated_blocks))
    cols, rows = inp["tensors"], expected.tensors
    assert cols["name"] == [r.name for r in rows] and cols["dtype"] == [r.dtype for r in rows]
    assert cols["shape"] == [r.shape for r in rows] and cols["params"] == [r.parameters for r in rows]
    assert cols["bytes"] == [r.nbytes for r in rows]
    assert [[b, e] for b, e in zip(cols["begin"], cols["end"])] == [r.data_offsets for r in rows]
    assert expected.tree is not None
    stack = [(with_leaf_numbers(tree_as_dicts(inp["tree"], cols["name"]), cols), expected.tree)]
    while stack:  # the same nodes, labels and totals, in the same order
        got, node = stack.pop()
        assert (got["name"], got["label"], got["parameters"], got["tensors"], got["nbytes"]) == (
            node.name, node.label, node.parameters, node.tensors, node.nbytes)
        assert len(got["children"]) == len(node.children)
        stack.extend(zip(got["children"], node.children))


@pytest.mark.slow
def test_hundred_thousand_tensor_header(big_header: tuple[Path, list[str]]) -> None:
    path, names = big_header
    with ViewSession.open([str(path)]) as session:
        inp = live_input(session)
        check_against_summary(inp, path)
        assert inp["metadata"] == [["format", "pt"]]
        assert inp["tensors"]["name"] == names
        assert inp["summary"]["tensor_count"] == 100_000 and inp["summary"]["parameter_count"] == 100_000
        layers = tree_as_dicts(inp["tree"], names)["children"][0]["children"][0]["children"]  # model -> layers -> 0..99
        assert [n["label"] for n in layers][:3] == ["0", "1", "2"]  # natural order, as inspect --tree
        assert sum(n["tensors"] for n in layers) == 100_000 and all(n["tensors"] == 1000 for n in layers)
        reply = session.values(0, names[-1])
        assert reply["stats"]["min"] == reply["stats"]["max"] == (len(names) - 1) % 251
        for name in (names[0], names[12_345], names[-1]):  # the stats command's numbers, every field
            assert [session.values(0, name)["stats"]] == cli_json("stats", path, "--filter", name)["tensors"]


def edited_copy(path: Path, names: list[str]) -> dict[str, str]:
    """A second 100,000-tensor file at ``path``: the first tensor removed, one added, one cast
    to I8, one reshaped, one value changed, metadata changed; returns the names touched."""
    touched = {"removed": names[0], "added": "model.extra.w", "cast": names[10], "reshaped": names[20],
               "nudged": names[30]}
    entries: dict[str, Any] = {"__metadata__": {"format": "pt", "note": "b"}}
    data = bytearray()
    for name in names[1:] + [touched["added"]]:
        dtype = "I8" if name == touched["cast"] else "U8"
        shape = [1, 1] if name == touched["reshaped"] else [1]
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + 1]}
        value = names.index(name) % 251 if name in (touched["nudged"], touched["cast"]) else len(data) + 1
        data.append((value + 7) % 256 if name == touched["nudged"] else value % 251)
    write_header_only(path, entries, bytes(data))
    return touched


@pytest.mark.slow
def test_a_hundred_thousand_tensor_diff_is_the_diff_commands(big_header: tuple[Path, list[str]], tmp_path: Path) -> None:
    a, names = big_header
    b = tmp_path / "many-b.safetensors"
    touched = edited_copy(b, names)
    expected = cli_json("diff", a, b, code=1)
    assert [t["name"] for t in expected["tensors_removed"]] == [touched["removed"]]
    assert [t["name"] for t in expected["tensors_added"]] == [touched["added"]]
    with ViewSession.open([str(a), str(b)]) as session:
        doc = session.document()
        assert doc["diff"] == expected
        assert {c["name"] for c in doc["diff"]["tensors_changed"]} == {touched["cast"], touched["reshaped"]}
        assert doc["diff"]["metadata_added"] == {"note": "b"}
        # diff --values over 100,000 tensors takes most of a minute: the numbers, worked out by hand.
        one = {"compared": True, "elements": 1, "reason": None}
        assert session.value_diff(touched["nudged"])["diff"] == {
            **one, "name": touched["nudged"], "differing": 1, "max_abs_diff": 7, "cosine_similarity": 1.0,
            "verdict": "values differ"}  # 30 vs 37
        assert session.value_diff(touched["cast"])["diff"] == {  # U8 10 vs I8 10
            **one, "name": touched["cast"], "differing": 0, "max_abs_diff": 0, "cosine_similarity": 1.0,
            "verdict": "values equal"}  # equal values of two dtypes: not the same bytes
        assert session.value_diff(names[251])["diff"] == {  # 0 vs 0: no direction to compare
            **one, "name": names[251], "differing": 0, "max_abs_diff": 0, "cosine_similarity": None,
            "verdict": "identical"}
        assert session.value_diff(touched["reshaped"])["diff"] == {
            "name": touched["reshaped"], "compared": False, "elements": 0, "differing": 0, "max_abs_diff": None,
            "cosine_similarity": None, "reason": "shapes differ", "verdict": "values not compared"}


