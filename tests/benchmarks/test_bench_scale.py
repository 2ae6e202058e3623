"""The scale benchmark (benchmarks/scale.py) runs end to end and writes what it promises.

Nothing here asserts a time: the quick run checks that every section produced samples for
every implementation, that RESULTS.md has its tables and the plots are real PNG images.  The
helpers that build the benchmark's files and serve them are checked against upstream
safetensors and a plain HTTP client.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _helpers import require

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCALE = BENCH / "scale.py"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def scale() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        import scale as mod

        yield mod
    finally:
        sys.path.remove(str(BENCH))


def _run(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCALE), *args], capture_output=True, text=True, timeout=timeout, check=False)


def _table_rows(text: str, heading: str) -> list[list[str]]:
    """The data rows of the first table after ``heading`` (header and separator dropped)."""
    part = text.split(heading, 1)[1]
    rows = []
    for line in part.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[1:]  # the first is the header


@pytest.mark.timeout(1800)  # fresh processes importing torch: about a minute idle, much longer on a busy machine
@pytest.mark.slow
def test_quick_run_writes_tables_plots_and_every_sample(tmp_path: Path) -> None:
    require("matplotlib", "bench")  # the report draws its plots
    out, data = tmp_path / "out", tmp_path / "data"
    proc = _run("--quick", "--out", str(out), "--data", str(data), timeout=1750)
    assert proc.returncode == 0, proc.stderr[-4000:]

    text = (out / "RESULTS.md").read_text()
    number = re.compile(r"\d+(\.\d+)?( ms| s)")
    for heading in (
        "### load torch mmap hot", "### load torch mmap cold", "### load torch pread hot", "### load torch pread cold",
        "### load numpy mmap hot", "### load numpy mmap cold", "### load numpy pread hot",
        "### load numpy pread cold", "### save torch",
        "### open + keys()", "### load_file torch",
        "### open index + every dtype/shape", "### load torch, shard after shard", "### load torch, threads over shards",
    ):
        rows = _table_rows(text, heading)
        assert rows, heading
        for row in rows:  # upstream and ours columns both hold a measured time
            assert number.search(row[1]) and number.search(row[2]), (heading, row)
            assert re.search(r"\*\*\d+\.\d+x\*\*", row[3]), (heading, row)
    floor = _table_rows(text, "The machine's floor at each size")
    assert floor and all("GB/s" in cell for cell in floor[0][1:]), floor
    # Hot mmap loads are set against mapping and touching the cached file.
    hot = text.split("### load torch mmap hot", 1)[1].split("\n\n")[1]
    assert "mmap + touch (hot) GB/s" in hot.splitlines()[0], hot
    for heading in ("### header, typical file", "### one tensor, typical file", "### header, long header file"):
        rows = _table_rows(text, heading)
        assert [r[0] for r in rows] == ["0 ms", "20 ms"], rows
        assert all(number.search(c) for r in rows for c in r[1:]), rows
    assert "| target | measured | verdict |" in text
    assert "**Command**: `python benchmarks/scale.py --quick" in text

    plots = ("load_hot.png", "load_cold.png", "save.png", "count.png", "shards.png", "remote.png")
    import matplotlib.image

    for name in plots:
        path = out / name
        assert path.read_bytes()[:8] == PNG_MAGIC, name
        image = matplotlib.image.imread(path)
        assert image.shape[0] > 100 and image.shape[1] > 100, (name, image.shape)
        assert float(image.std()) > 0.01, name  # something is drawn, not a blank canvas
        assert f"]({name})" in text, name

    doc = json.loads((out / "results.json").read_text())
    assert doc["machine"]["cpus"] and doc["machine"]["kernel"] and doc["machine"]["mem_total_bytes"]
    assert "--quick" in doc["command"] and not doc["failures"]
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    by_key = {(r["section"], r["workload"], r["x"], r["impl"]): r["samples"] for r in doc["records"]}
    for r in doc["records"]:
        by.setdefault((r["section"], r["impl"]), []).extend(r["samples"])
    for section in ("size", "count", "shards"):
        for impl in ("ours", "upstream"):
            samples = by[section, impl]
            assert samples and all(s["seconds"] > 0 and s["peak_rss_mib"] > 0 for s in samples), (section, impl)
    assert {r["workload"] for r in doc["records"] if r["impl"] == "phys"} == {
        "odirect", "cold_read", "write_fsync", "write", "memcpy", "map_touch"}
    for impl in ("ours", "hf", "fsspec"):
        samples = by["remote", impl]
        assert samples and all(s["requests"] >= 1 and s["bytes_sent"] > 0 and s["seconds"] > 0 for s in samples), impl
    # Cold samples started with their file out of the page cache, hot ones with it in.
    for r in doc["records"]:
        for s in r["samples"]:
            if r["workload"].endswith(" cold"):
                assert s["resident_pct"] < 50, (r["workload"], s["resident_pct"])
            elif r["workload"].endswith(" hot"):
                assert s["resident_pct"] > 99, (r["workload"], s["resident_pct"])

    # The report can be redrawn from the raw samples alone.
    again = tmp_path / "again"
    redo = _run("--report-only", str(out / "results.json"), "--out", str(again), timeout=300)
    assert redo.returncode == 0, redo.stderr
    assert (again / "RESULTS.md").read_text() == text
    assert sorted(p.name for p in again.glob("*.png")) == sorted(plots)
    # Several runs in one report: the targets run by run, the samples pooled.
    both = tmp_path / "both"
    redo = _run("--report-only", str(out / "results.json"), str(out / "results.json"), "--out", str(both), timeout=300)
    assert redo.returncode == 0, redo.stderr
    combined = (both / "RESULTS.md").read_text()
    assert "| target | run 1 | run 2 |" in combined and "## 2 runs" in combined
    pooled = json.loads((both / "results.json").read_text())
    assert len(pooled["runs"]) == 2
    assert all(len(r["samples"]) == 2 * len(by_key[r["section"], r["workload"], r["x"], r["impl"]])
               for r in pooled["records"])


def test_a_hot_or_save_target_states_the_floor_as_a_multiple_of_upstream(scale: Any) -> None:
    """Each size of a hot-load or save target carries the machine's floor over upstream's
    time: the best ratio any implementation could reach there (a target below it cannot be met)."""

    def rec(workload: str, impl: str, seconds: list[float]) -> dict[str, Any]:
        return {"section": "size", "workload": workload, "x": 512 * 2**20, "impl": impl,
                "samples": [{"seconds": s} for s in seconds]}

    doc = {"records": [
        rec("load torch mmap hot", "upstream", [0.010, 0.012, 0.011]),
        rec("load torch mmap hot", "ours", [0.0105, 0.0099, 0.0100]),
        rec("map_touch", "phys", [0.0090, 0.0095, 0.0091]),
        rec("save torch", "upstream", [0.20]), rec("save torch", "ours", [0.19]),
    ]}
    rows = {target: (measured, verdict) for target, measured, verdict in scale.targets(scale.Results(doc))}
    measured, verdict = rows["load torch mmap hot <= 0.8x upstream, sizes >= 64 MiB"]
    assert measured == "512 MiB 0.91x (mmap+touch 0.83x)" and verdict == "**MISSED**", measured
    assert rows["hot torch load (mmap) at 512 MiB <= 0.7x upstream"][0] == "0.91x (mmap+touch 0.83x)"
    # No buffered-write floor in this run: the save's figure stands alone.
    assert rows["save torch <= 0.8x upstream, sizes >= 64 MiB"][0] == "512 MiB 0.95x"
    assert scale.floors_of("load numpy mmap hot") == ("map_touch",)
    assert scale.floors_of("load numpy pread hot") == ("memcpy",)
    assert scale.floors_of("load torch pread cold") == ("odirect",)
    assert scale.floors_of("save torch") == ("write", "write_fsync")


def test_big_section_refuses_when_the_disk_cannot_hold_the_checkpoint(tmp_path: Path) -> None:
    require("matplotlib", "bench")  # the report draws its plots
    out = tmp_path / "out"
    proc = _run("--section", "big", "--big-factor", "100000", "--out", str(out), "--data", str(tmp_path / "d"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = (out / "RESULTS.md").read_text()
    assert re.search(r"big: not run: a [\d.]+ [KMGT]iB checkpoint \(100000 x MemAvailable .*\) needs .* of disk", text)
    assert not any(r["section"] == "big" for r in json.loads((out / "results.json").read_text())["records"])
    assert not (tmp_path / "d" / "big").exists()


def test_benchmark_files_are_read_by_upstream(scale: Any, tmp_path: Path) -> None:
    from safetensors import safe_open

    path = str(tmp_path / "f.safetensors")
    tensors = scale.size_tensors(4 * scale.MiB)
    size = scale.write_checkpoint(path, tensors)
    assert size == os.path.getsize(path)
    with safe_open(path, framework="np") as f:
        assert f.keys() == [t[0] for t in tensors]
        assert [f.get_slice(t[0]).get_shape() for t in tensors] == [t[2] for t in tensors]
        assert f.metadata() == {"format": "pt"}
    index = scale.write_sharded(str(tmp_path / "sharded"), 4 * scale.MiB, 12, 5)
    shards = scale.shard_files(index)
    assert [os.path.basename(s) for s in shards] == [f"model-{i:05d}-of-00005.safetensors" for i in range(1, 6)]
    names = []
    for shard in shards:
        with safe_open(shard, framework="np") as f:
            names += f.keys()
    with open(index) as fh:
        assert sorted(json.load(fh)["weight_map"]) == sorted(names) and len(names) == 12


def test_latency_server_answers_ranges_and_counts_each_operation(scale: Any, tmp_path: Path) -> None:
    path = tmp_path / "blob.safetensors"
    payload = bytes(range(256)) * 64
    path.write_bytes(payload)
    server = scale.LatencyServer({"blob.safetensors": str(path)})
    try:
        server.reset(0.0)
        url = f"{server.base}/bench/model/resolve/main/blob.safetensors"
        req = urllib.request.Request(url, headers={"Range": "bytes=10-19"})
        with urllib.request.urlopen(req) as resp:
            assert resp.status == 206 and resp.read() == payload[10:20]
            assert resp.headers["Content-Range"] == f"bytes 10-19/{len(payload)}"
        import time

        mark = time.monotonic()
        req = urllib.request.Request(url, headers={"Range": f"bytes=-{100}"})
        with urllib.request.urlopen(req) as resp:
            assert resp.read() == payload[-100:]
        counts = server.split(mark)
        assert (counts["requests"], counts["bytes_sent"], counts["ranges"]) == (1, 10, ["GET bytes=10-19"])
        assert (counts["repeat_requests"], counts["repeat_bytes_sent"]) == (1, 100)
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{server.base}/missing.safetensors")
        assert e.value.code == 404
    finally:
        server.close()


def test_a_sample_is_stopped_by_its_guard_or_timeout() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from _common import SampleFailed, run_sample
    finally:
        sys.path.remove(str(BENCH))
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(SampleFailed) as e:
        run_sample(sleeper, guard=lambda pid: f"memory low for {pid}")
    assert e.value.killed_by and e.value.killed_by.startswith("memory low for ") and e.value.returncode == -9
    with pytest.raises(SampleFailed) as e:
        run_sample(sleeper, timeout=0.5)
    assert e.value.killed_by == "timeout after 0.5 s"
    out = run_sample([sys.executable, "-c", "import json; print('noise'); print(json.dumps({'seconds': 1.5}))"])
    assert out["seconds"] == 1.5 and out["wait4_maxrss_mib"] > 0


def test_size_and_count_arguments(scale: Any) -> None:
    assert scale.parse_size("256MiB") == 256 << 20
    assert scale.parse_size("8GiB") == scale.parse_size("8G") == 8 << 30
    assert scale.parse_count("100k") == scale.parse_count("100_000") == 100_000
    assert scale.parse_count("1M") == 1_000_000
    o = scale.options(["--max-size", "256MiB", "--max-count", "100000"])
    assert [s for s in o.sizes if s <= o.max_size] == [16 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20]
    assert [c for c in o.counts if c <= o.max_count] == [1000, 3000, 10_000, 30_000, 100_000]
    assert o.sections == ["size", "count", "shards", "remote"] and o.samples == 5
    assert scale.options(["--big"]).sections[-1] == "big"
    with pytest.raises(SystemExit):
        scale.options(["--max-size", "lots"])


def test_profile_child_records_only_around_each_repetition(scale: Any, tmp_path: Path) -> None:
    """benchmarks/profile_targets.py's child turns perf on before each timed repetition and off
    after it, over perf's control FIFO protocol (each command acknowledged): here a thread
    plays perf's side and counts the commands."""
    import threading

    import profile_targets

    path = tmp_path / "small.safetensors"
    scale.write_checkpoint(str(path), scale.size_tensors(2 * 2**20))
    many = scale.ensure_many(str(tmp_path / "many.safetensors"), 1000)
    ctl, ack = tmp_path / "ctl", tmp_path / "ack"
    for case, args in (("hot", {"path": str(path)}), ("header", {"path": many}),
                       ("save", {"size": 32 * 2**20, "out": str(tmp_path / "out.safetensors")})):
        for impl in profile_targets.CASES[case]:
            for p in (ctl, ack):
                if p.exists():
                    p.unlink()
                os.mkfifo(p)
            heard: list[str] = []

            def perf_side(heard: list[str] = heard) -> None:
                with open(ctl) as c, open(ack, "w") as a:
                    for line in c:
                        heard.append(line.strip())
                        a.write("ack\n")
                        a.flush()

            side = threading.Thread(target=perf_side, daemon=True)
            side.start()
            control = profile_targets._Perf(str(ctl), str(ack))
            times = profile_targets.child(case, impl, {**args, "reps": 3}, control)
            control.ctl.close()
            side.join(10)
            assert len(times) == 3 and all(t > 0 for t in times), (case, impl, times)
            assert heard == ["enable", "disable"] * 3, (case, impl, heard)
    assert not (tmp_path / "out.safetensors").exists()  # each save's output is removed


_IMPORTS_IN_THE_CLOCK = """
import json, sys
sys.path.insert(0, sys.argv[1])
import scale_worker as w

imported = {}
timed = w.base._timed

def watched(fn):
    before = set(sys.modules)
    out = timed(fn)
    imported[op] = sorted(set(sys.modules) - before)
    return out

w.base._timed = watched
args = {"path": sys.argv[2], "size": int(sys.argv[3]), "out": sys.argv[2] + ".out", "fsync": False}
for op in ("map_touch", "memcpy", "write", "cold_read"):
    getattr(w, "op_" + op)("phys", args)
print(json.dumps(imported))
"""


def test_a_physical_reference_imports_nothing_inside_its_clock(tmp_path: Path) -> None:
    """A reference is a floor only if its clock holds the work alone: a module imported inside it
    (numpy is about 0.1 s) would make the floor slower than the loads it bounds."""
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 4096)
    out = subprocess.run([sys.executable, "-c", _IMPORTS_IN_THE_CLOCK, str(BENCH), str(path), str(path.stat().st_size)],
                         capture_output=True, text=True, timeout=300, check=True)
    imported = json.loads(out.stdout.splitlines()[-1])
    assert set(imported) == {"map_touch", "memcpy", "write", "cold_read"}
    assert imported == {op: [] for op in imported}
