"""``view A B --export --with-stats`` reads each input's data once: the stats, histograms and
``diff --values`` numbers all come from one pass over each input, counted in bytes sent by the
loopback Range servers that hold the two files."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors.cli.main import main as cli_main
from pysafetensors.tools import _chunks
from pysafetensors.view import ViewSession

from .test_data import cli_json


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 32 KiB read-ahead window: the big tensors take the ranged path, the small ones come in runs.
    monkeypatch.setattr(_chunks, "CHUNK_ELEMENTS", 1 << 12)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two checkpoints that share most tensors: one nudged, one cast, one reshaped, one on each side only."""
    from pysafetensors.numpy import save_file

    rng = np.random.default_rng(7)
    a: dict[str, np.ndarray] = {"big.w": rng.standard_normal((200, 160)).astype(np.float32),
                                "cast": rng.standard_normal((40, 40)).astype(np.float32),
                                "reshaped": np.arange(24, dtype=np.float32).reshape(6, 4),
                                "same": np.arange(100, dtype=np.int64), "only_a": np.ones(50, np.int32)}
    a.update({f"small.{k}": rng.standard_normal((8, 8)).astype(np.float32) for k in range(20)})
    b = {k: v.copy() for k, v in a.items() if k != "only_a"}
    b["big.w"][3, :5] += 0.5
    b["cast"] = a["cast"].astype(np.float16)
    b["reshaped"] = a["reshaped"].reshape(4, 6)
    b["only_b"] = np.arange(300, dtype=np.uint8)
    paths = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_file(a, str(paths[0]), metadata={"format": "np"})
    save_file(b, str(paths[1]), metadata={"format": "np", "note": "b"})
    assert all(p.stat().st_size > 100_001 for p in paths)  # beyond what opening prefetches
    return paths


@pytest.fixture
def origins(pair: tuple[Path, Path]) -> Iterator[tuple[RangeServer, RangeServer]]:
    with RangeServer({"a.safetensors": pair[0].read_bytes()}) as sa, \
            RangeServer({"b.safetensors": pair[1].read_bytes()}) as sb:
        yield sa, sb


def check_read_once(origin: RangeServer, path: Path) -> None:
    """The server sent the file's every byte exactly once: ranges that never overlap, adding up to
    the file (opening prefetches its first 100 kB, which the tensors in it are then read from)."""
    spans = []
    for rng in origin.log.ranges:
        assert rng is not None
        lo, hi = (int(v) for v in rng.removeprefix("bytes=").split("-"))
        spans.append((lo, hi + 1))
    spans.sort()
    assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(spans)), spans  # no byte asked for twice
    assert origin.log.bytes_sent == path.stat().st_size == sum(hi - lo for lo, hi in spans)


def without_paths(diff: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in diff.items() if k not in ("a", "b")}


@pytest.mark.usefixtures("small_window")
def test_two_inputs_with_stats_read_each_input_once(pair: tuple[Path, Path],
                                                    origins: tuple[RangeServer, RangeServer]) -> None:
    urls = [origins[0].url("a.safetensors"), origins[1].url("b.safetensors")]
    for origin in origins:
        origin.reset_log()
    with ViewSession.open(urls) as session:
        doc = session.document(with_stats=True)
    for origin, path in zip(origins, pair):
        check_read_once(origin, path)
    # The numbers are the CLI's: diff --values, and stats per input.
    a, b = pair
    assert without_paths(doc["diff"]) == without_paths(cli_json("diff", a, b, "--values", code=1))
    assert {v["name"]: v["differing"] for v in doc["diff"]["values"]}["big.w"] == 5
    for inp, path in zip(doc["inputs"], pair):
        assert [s["stats"] for s in inp["stats"]] == cli_json("stats", path)["tensors"]
        assert [s["name"] for s in inp["stats"]] == inp["tensors"]["name"]  # in the columns' order


@pytest.mark.usefixtures("small_window")
def test_the_export_command_reads_each_input_once(pair: tuple[Path, Path], origins: tuple[RangeServer, RangeServer],
                                                  tmp_path: Path) -> None:
    urls = [origins[0].url("a.safetensors"), origins[1].url("b.safetensors")]
    for origin in origins:
        origin.reset_log()
    out = tmp_path / "report.html"
    assert cli_main(["view", *urls, "--export", str(out), "--with-stats", "--quiet"]) == 0
    for origin, path in zip(origins, pair):
        check_read_once(origin, path)
    text = out.read_text(encoding="utf-8")
    block = text.split('<script type="application/json" id="pst-data">', 1)[1].split("</script>", 1)[0]
    doc = json.loads(block)
    assert doc["diff"]["same"] is False and len(doc["diff"]["values"]) == 24


def test_tensors_let_go_for_want_of_room_give_the_same_numbers(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                                               origins: tuple[RangeServer, RangeServer]) -> None:
    from pysafetensors.tools import pairing

    # b's shared tensors that come before their partner in a cannot all wait within 1 kB: those
    # let go are read again for their comparison.
    monkeypatch.setattr(pairing, "HOLD_CAP", 1024)
    with ViewSession.open([origins[0].url("a.safetensors"), origins[1].url("b.safetensors")]) as remote:
        origins[1].reset_log()
        got = remote.document(with_stats=True)
        assert origins[1].log.bytes_sent > pair[1].stat().st_size - 100_001  # more than once (opening read the rest)
    with ViewSession.open([str(p) for p in pair]) as local:
        expected = local.document(with_stats=True)
    assert without_paths(got["diff"]) == without_paths(expected["diff"])
    assert [i["stats"] for i in got["inputs"]] == [i["stats"] for i in expected["inputs"]]
