"""Dispatch, exit codes, one-line errors, --debug tracebacks, the module registry, subprocess runs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from pysafetensors.cli import main as cli_main

from .conftest import run_cli

SRC = Path(__file__).resolve().parents[2] / "src"


def test_help_and_version() -> None:
    r = run_cli("--help")
    assert r.code == 0
    for name in ("inspect", "id", "diff", "validate", "metadata", "stats", "shard", "merge", "convert"):
        assert name in r.out
    r = run_cli("--version")
    assert r.code == 0 and "pysafetensors" in r.out


def test_no_command_is_a_usage_error() -> None:
    assert run_cli().code == 2


def test_unknown_command_is_one_line_exit_2() -> None:
    r = run_cli("frobnicate")
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 1
    assert "invalid choice" in r.err


def test_missing_argument_exit_2() -> None:
    r = run_cli("inspect")
    assert r.code == 2 and "required" in r.err and len(r.err.strip().splitlines()) == 1


def test_convert_is_dispatched() -> None:
    r = run_cli("convert", "--help")
    assert r.code == 0
    assert "IN" in r.out and "OUT" in r.out


def test_missing_file_one_line_error(tmp_path: Path) -> None:
    r = run_cli("inspect", tmp_path / "nope.safetensors")
    assert r.code == 2
    assert r.out == ""
    assert r.err.strip() == f"pysafetensors: error: No such file or directory: {tmp_path / 'nope.safetensors'}"


def test_bad_file_one_line_and_debug_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{oops")
    r = run_cli("inspect", bad)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 1
    assert str(bad) in r.err and "invalid JSON" in r.err
    r = run_cli("inspect", bad, "--debug")
    assert r.code == 2
    assert "Traceback" in r.err and "InvalidHeaderJson" in r.err


def test_common_options_before_or_after_command(sample: Path) -> None:
    before = run_cli("--json", "inspect", sample)
    after = run_cli("inspect", sample, "--json")
    assert before.code == after.code == 0
    assert json.loads(before.out) == json.loads(after.out)


def test_no_progress_bar_when_not_a_tty(sample: Path) -> None:
    r = run_cli("id", sample, "--content", "--tensors")  # stderr is a StringIO: no bar
    assert r.code == 0 and r.err == ""


def _subprocess(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pysafetensors", *args], capture_output=True, text=True, env=env, check=False,
                          timeout=120)


def test_every_command_as_subprocess(sample: Path, tmp_path: Path) -> None:
    """One interpreter per command would cost seconds; a shell loop keeps it to one run per command."""
    other = tmp_path / "other.safetensors"
    other.write_bytes(sample.read_bytes())
    cases = [
        (["inspect", str(sample), "--json"], 0),
        (["id", str(sample)], 0),
        (["diff", str(sample), str(other)], 0),
        (["validate", str(sample)], 0),
        (["metadata", str(other), "get", "format"], 0),
        (["stats", str(sample), "--filter", "encoder.*"], 0),
        (["shard", str(sample), str(tmp_path / "shards"), "--max-shard-size", "100B"], 0),
        (["merge", str(tmp_path / "shards"), str(tmp_path / "merged.safetensors")], 0),
        (["diff", str(sample), str(tmp_path / "merged.safetensors"), "--values"], 0),
        (["validate", str(tmp_path / "missing.safetensors")], 2),
    ]
    for args, code in cases:
        proc = _subprocess(*args)
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stderr == "" if code == 0 else proc.stderr.count("\n") == 1
    assert json.loads(_subprocess("inspect", str(sample), "--json").stdout)["tensor_count"] == 10
    assert _subprocess("metadata", str(other), "get", "format").stdout == "pt\n"


class _FakeTTY:
    """A stderr that claims to be a terminal and records what tqdm draws."""

    def __init__(self) -> None:
        self.chunks: list[str] = []

    def write(self, s: str) -> int:
        self.chunks.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_tty_and_not_quiet(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    fake = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli_main.main(["id", str(sample), "--content"]) == 0
    assert any("hashing" in c for c in fake.chunks)
    assert "hashing" not in out.getvalue()  # the bar never touches stdout
    fake.chunks.clear()
    with redirect_stdout(io.StringIO()):
        assert cli_main.main(["id", str(sample), "--content", "--quiet"]) == 0
    assert fake.chunks == []


def test_missing_tqdm_falls_back_to_no_bar(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pysafetensors import _optional
    from pysafetensors.errors import MissingDependency

    def missing(module: str, extra: str) -> None:
        raise MissingDependency(module, extra)

    monkeypatch.setattr(_optional, "require", missing)
    fake = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", fake)
    with redirect_stdout(io.StringIO()):
        assert cli_main.main(["stats", str(sample)]) == 0
    assert fake.chunks == []


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "{missing}"],
        ["id", "{missing}"],
        ["diff", "{missing}", "{missing}"],
        ["validate", "{missing}"],
        ["metadata", "{missing}", "get"],
        ["metadata", "{dir}", "get"],
        ["stats", "{missing}"],
        ["shard", "{missing}", "{dir}/out"],
        ["merge", "{missing}", "{dir}/out.safetensors"],
        ["merge", "{dir}", "{dir}/out.safetensors"],  # a directory with no index
        ["inspect", "{garbage}"],
        ["stats", "{garbage}"],
    ],
)
def test_unreadable_input_exits_2_with_one_line(args: list[str], tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 64)
    values = {"missing": str(tmp_path / "missing.safetensors"), "dir": str(tmp_path), "garbage": str(garbage)}
    r = run_cli(*[a.format(**values) for a in args])
    assert r.code == 2, r.err
    assert r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and r.err.startswith("pysafetensors")


def test_closed_stdout_is_a_clean_error(sample: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    p = subprocess.run(["bash", "-c", f'"{sys.executable}" -m pysafetensors inspect "{sample}" >&-'],
                       capture_output=True, text=True, env=env, timeout=120, check=False)
    assert p.returncode == 2
    assert p.stderr == "pysafetensors: error: standard output is closed; nowhere to write the result\n"


def test_pipe_input_is_read(sample: Path) -> None:
    data = sample.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(SRC)}

    def run(*args: str, stdin: bytes = data) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "pysafetensors", *args], input=stdin, capture_output=True,
                              env=env, timeout=120, check=False)

    p = run("inspect", "/dev/stdin", "--json")
    assert p.returncode == 0, p.stderr
    piped = json.loads(p.stdout)
    local = json.loads(run_cli("inspect", sample, "--json").out)
    assert {**piped, "path": None} == {**local, "path": None} and piped["file_size"] == len(data)
    p = run("id", "/dev/stdin", "--content", "--json")
    assert json.loads(p.stdout)["content_sha256"] == json.loads(run_cli("id", sample, "--content", "--json").out)[
        "content_sha256"]
    for stdin, what in ((data[:-3], "truncated"), (data + b"xyz", "trailing"), (b"", "empty")):
        p = run("inspect", "/dev/stdin", stdin=stdin)
        assert p.returncode == 2 and p.stderr.count(b"\n") == 1 and b"/dev/stdin" in p.stderr, what


def test_fifo_without_writer_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run_cli("inspect", fifo)  # opened non-blocking: no writer reads as empty
    assert r.code == 2 and str(fifo) in r.err and "a FIFO" in r.err and "gave no bytes" in r.err

