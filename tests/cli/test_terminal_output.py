"""What reaches the terminal: attacker-controlled names and metadata are escaped in every text
output (JSON stays exact), and URLs never show their credentials or signatures."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import numpy as np
import pytest
from servers import RangeServer

from pysafetensors.cli._common import escape_text
from pysafetensors.numpy import save_file

from .conftest import Run, run_cli

EVIL_NAME = "w\nresult: identical\x1b]0;pwned\x07\u202etxt.exe"
EVIL_KEY = "k\x1b[31m\r"
EVIL_VALUE = "v\x9b2J\u2066x\x00\n~ forged: line"
# Anything a terminal would obey, or that reorders or breaks lines.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def evil(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_file({EVIL_NAME: np.arange(4, dtype=np.float32), "ok": np.zeros((2, 2), np.float32)}, str(a),
              metadata={EVIL_KEY: EVIL_VALUE, "plain": "x"})
    save_file({EVIL_NAME: np.arange(4, dtype=np.float32) + 1, "ok": np.zeros((2, 2), np.float32)}, str(b),
              metadata={EVIL_KEY: EVIL_VALUE + "2"})
    return a, b


def test_escape_text() -> None:
    assert escape_text("a\nb\tc\x1b[0m\x7f\x9b\u202e\u2066ok é") == "a\\nb\\tc\\x1b[0m\\x7f\\x9b\\u202e\\u2066ok é"


def _commands(a: Path, b: Path) -> list[list[object]]:
    return [
        ["inspect", a], ["inspect", a, "--tensors"], ["inspect", a, "--tree"],
        ["stats", a], ["id", a, "--tensors"],
        ["diff", a, b, "--values"], ["diff", a, b, "--format", "md"],
        ["metadata", a, "get"], ["metadata", a, "get", EVIL_KEY],
        ["metadata", a, "set", f"{EVIL_KEY}=new\x1b[2J", "--dry-run"], ["validate", a],
        ["shard", a, a.parent / "out\x1b]0;t\x07", "--dry-run"], ["merge", a, a.parent / "m\nresult: identical"],
    ]


def test_no_control_character_reaches_text_output(evil: tuple[Path, Path]) -> None:
    a, b = evil
    for args in _commands(a, b):
        r = run_cli(*args)
        assert r.code in (0, 1), (args, r.err)
        for stream in (r.out, r.err):
            assert not UNSAFE.search(stream), (args, stream)
        assert not any(line.startswith(("result: identical", "~ forged")) for line in r.out.splitlines()), args
    assert escape_text(EVIL_NAME) in run_cli("inspect", a, "--tensors").out
    assert escape_text(EVIL_VALUE) in run_cli("metadata", a, "get", EVIL_KEY).out


def test_json_output_stays_exact(evil: tuple[Path, Path]) -> None:
    a, b = evil
    inspect = json.loads(run_cli("inspect", a, "--json", "--tensors").out)
    assert EVIL_NAME in {t["name"] for t in inspect["tensors"]} and inspect["metadata"][EVIL_KEY] == EVIL_VALUE
    assert json.loads(run_cli("metadata", a, "get", EVIL_KEY, "--json").out)["value"] == EVIL_VALUE
    diff = json.loads(run_cli("diff", a, b, "--values", "--json").out)
    assert diff["metadata_changed"][EVIL_KEY] == {"a": EVIL_VALUE, "b": EVIL_VALUE + "2"}
    assert [v["name"] for v in diff["values"] if v["differing"]] == [EVIL_NAME]


def test_errors_are_escaped(evil: tuple[Path, Path]) -> None:
    a, _ = evil
    r = run_cli("metadata", a, "get", "\x1b]0;title\x07")
    assert r.code == 1 and "\\x1b]0;title\\x07" in r.err and not UNSAFE.search(r.err)
    r = run_cli("inspect", a / "x\x1b[2J")
    assert r.code == 2 and not UNSAFE.search(r.err) and r.err.count("\n") == 1


def test_convert_report_escapes_pickle_names(tmp_path: Path) -> None:
    """convert's tied, skipped and finding lines name pickle keys: escaped in text, exact in JSON."""
    torch = pytest.importorskip("torch")
    w, base = torch.ones(3), torch.arange(10.0)
    tied, skipped, viewed = "b\x1b]0;pwn\x07", "bad\nresult: forged", "part\n~ forged: line\u202e"
    src = tmp_path / "evil\x1b[2J.pt"
    # a and its tie share a storage; the view of base inflates the output past 1%: a finding
    torch.save({"a": w, tied: w, skipped: 5, "all": base, viewed: base[2:8]}, src)
    r = run_cli("convert", src, tmp_path / "out.safetensors")
    assert r.code == 1, r.err  # the finding: views expanded into copies
    assert "tied:" in r.out and "skipped 1" in r.out and "finding:" in r.out
    assert not UNSAFE.search(r.out + r.err), r.out
    assert not any(line.startswith(("result: forged", "~ forged")) for line in r.out.splitlines()), r.out
    assert escape_text(tied) in r.out and escape_text(skipped) in r.out and escape_text(src.name) in r.out
    report = json.loads(run_cli("convert", src, tmp_path / "out2.safetensors", "--json", "--no-verify").out)
    assert report["skipped"] == [skipped] and tied in {*report["removed"], *report["removed"].values()}
    assert report["source"] == str(src)


SECRET, PASSWORD = "SiGnAtUrE0123", "hunter2pass"


def _gguf_bytes(tmp_path: Path) -> bytes:
    gguf = pytest.importorskip("gguf")
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    w.add_tensor("token_embd.weight", np.ones((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return (tmp_path / "m.gguf").read_bytes()


def _npy_bytes() -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, np.arange(6, dtype=np.float32))
    return buf.getvalue()


def test_signed_and_credential_urls_never_printed(evil: tuple[Path, Path]) -> None:
    a, _ = evil
    out = a.parent / "written"
    files = {"m.safetensors": a.read_bytes(), "n.npy": _npy_bytes(), "m.gguf": _gguf_bytes(a.parent),
             "bad.pt": b"PK\x03\x04 not a zip"}
    with RangeServer(files) as server:
        server.require_query = f"X-Amz-Signature={SECRET}"
        signed = server.url(f"m.safetensors?X-Amz-Signature={SECRET}")
        creds = signed.replace("http://", f"http://user:{PASSWORD}@")
        missing = server.url(f"nope.safetensors?X-Amz-Signature={SECRET}").replace("http://", f"http://u:{PASSWORD}@")
        runs = [
            run_cli("inspect", signed), run_cli("inspect", signed, "--json"), run_cli("stats", signed, "--json"),
            run_cli("id", signed, "--json", "--content"), run_cli("diff", signed, a), run_cli("diff", a, signed, "--json"),
            run_cli("metadata", signed, "get", "--json"), run_cli("metadata", signed, "get", "missing"),
            run_cli("inspect", creds), run_cli("inspect", missing), run_cli("metadata", missing, "get"),
            run_cli("metadata", signed, "set", "k=v"),  # refused: no --output for a URL
            run_cli("inspect", signed, "--frobnicate"),  # a usage error
            run_cli("validate", signed), run_cli("validate", signed, "--json"), run_cli("validate", missing),
        ]
        assert runs[0].code == 0 and "/m.safetensors" in runs[0].out
        assert json.loads(runs[1].out)["path"] == server.url("m.safetensors")
        assert runs[9].code == 2 and "nope.safetensors" in runs[9].err
        # The commands that write: the input (and where it came from) named in text and --json.
        writes = []
        for n, url in enumerate([signed, creds]):
            writes += [
                run_cli("shard", url, out / f"s{n}", "--max-shard-size", "8"),
                run_cli("shard", url, out / f"sj{n}", "--json"), run_cli("shard", url, out / f"sd{n}", "--dry-run"),
                run_cli("merge", url, out / f"m{n}.safetensors"), run_cli("merge", url, out / f"mj{n}.safetensors", "--json"),
            ]
            for name in ("n.npy", "m.gguf"):
                source = url.replace("m.safetensors", name)
                writes += [run_cli("convert", source, out / f"c{n}{name}.safetensors"),
                           run_cli("convert", source, out / f"cj{n}{name}.safetensors", "--json")]
            writes.append(run_cli("convert", url.replace("m.safetensors", "bad.pt"), out / "bad.safetensors"))
        sources = [json.loads(r.out)["source"] for r in writes if r.out.startswith("{")]
        assert sources == [server.url(n) for n in ("m.safetensors", "m.safetensors", "n.npy", "m.gguf")] * 2
        assert [r.code for r in writes] == [0] * 9 + [2] + [0] * 9 + [2], [r.err for r in writes]
        assert "bad.pt: not a readable zip archive" in writes[9].err
        view = run_cli("view", signed, creds, "--export", out / "view.html")  # the page's labels and data
        assert view.code == 0 and server.url("m.safetensors") in (out / "view.html").read_text()
        for r in [*runs, *writes, view, Run(0, (out / "view.html").read_text(), "")]:
            assert SECRET not in r.out + r.err and PASSWORD not in r.out + r.err, r


@pytest.mark.slow
def test_timeout_option_bounds_a_silent_server(tmp_path: Path) -> None:
    """A server that accepts the connection and never answers: --timeout makes it an error."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # never accepted: the request sits in the backlog, no reply ever comes
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/m.safetensors"
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(run_cli("inspect", url, "--timeout", "0.2")), daemon=True)
    try:
        worker.start()
        worker.join(120)  # without the option each attempt waits the library default (30 s)
        assert results, "inspect did not return: --timeout did not reach the HTTP source"
        r = results[0]
        assert r.code == 2 and r.err.count("\n") == 1 and "127.0.0.1" in r.err  # type: ignore[attr-defined]
    finally:
        listener.close()
    assert run_cli("inspect", tmp_path / "x", "--timeout", "0").code == 2
    assert run_cli("inspect", tmp_path / "x", "--timeout", "nan").code == 2
