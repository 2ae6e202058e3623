"""``pysafetensors view`` opening the browser: never with the token on the browser's command line
(any local user reads ``/proc/PID/cmdline``), but on a 0600 redirect file that is removed once the
page has loaded, after a timeout, or at exit; and the line that says a slow start is working."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from servers import RangeServer

from pysafetensors.cli import view as view_cli

from .test_cli import env, viewer, visit


def fake_browser(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A BROWSER command that records its whole command line, the mode of the file it is given and
    a copy of that file; its environment and the folder it records into."""
    log = tmp_path / "browser"
    log.mkdir()
    script = tmp_path / "browser.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$0" "$@" > "{log}/argv"\n'
        'f="${1#file://}"\n'
        f'stat -c %a "$f" > "{log}/mode"\n'
        f'cp "$f" "{log}/copy.html"\n'
        f'echo "$f" > "{log}/path"\n')
    script.chmod(0o755)
    return {"BROWSER": f"{script} %s"}, log


def wait_for(check: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_browser_is_given_a_0600_redirect_file_not_the_token(minilm: Path, tmp_path: Path, page: Any) -> None:
    extra, log = fake_browser(tmp_path)
    with viewer(minilm, browser=True, extra_env=extra) as v:
        url = v.url()
        token = url.split("token=", 1)[1]
        wait_for(lambda: (log / "path").exists())
        argv = (log / "argv").read_text().splitlines()
        redirect = Path((log / "path").read_text().strip())
        assert argv[1:] == [redirect.as_uri()]  # the browser's whole command line: a file, no token
        assert not any(token in arg for arg in argv)
        assert (log / "mode").read_text().strip() == "600"
        copy = (log / "copy.html").read_text()
        assert f'content="0;url={url}"' in copy and f'href="{url}"' in copy  # it sends the browser on
        assert redirect.exists()  # until the page is opened
        doc = visit(url)  # the page trades the token for its cookie: the file has done its job
        assert doc["inputs"][0]["summary"]["parameter_count"] == 22_713_728
        wait_for(lambda: not redirect.exists(), timeout=10)
        # What a real browser does with the file: Chromium follows it to the page.
        page.goto((log / "copy.html").as_uri())
        page.wait_for_url(url.split("?", 1)[0])
        page.wait_for_selector("body[data-ready]")
        assert page.get_attribute("body", "data-ready") == "1"
        assert page.text_content("#param-count .value") == "22,713,728"


def test_a_redirect_file_never_opened_is_removed_at_exit(minilm: Path, tmp_path: Path) -> None:
    extra, log = fake_browser(tmp_path)
    with viewer(minilm, browser=True, extra_env=extra) as v:
        v.url()
        wait_for(lambda: (log / "path").exists())
        redirect = Path((log / "path").read_text().strip())
        assert redirect.exists()
        v.proc.send_signal(signal.SIGINT)
        assert v.proc.wait(timeout=30) == 0
        assert not redirect.exists()


def opened_files(monkeypatch: pytest.MonkeyPatch, answer: bool) -> list[tuple[str, int, str]]:
    """webbrowser.open replaced: each call records (the URL, the file's mode, its text)."""
    import webbrowser

    seen: list[tuple[str, int, str]] = []

    def fake_open(url: str, *args: object, **kwargs: object) -> bool:
        path = Path(url.removeprefix("file://"))
        seen.append((url, path.stat().st_mode & 0o777, path.read_text()))
        return answer

    monkeypatch.setattr(webbrowser, "open", fake_open)
    return seen


def test_a_page_not_opened_in_time_is_said_and_its_file_removed(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    seen = opened_files(monkeypatch, True)
    url = "http://127.0.0.1:9/?token=secret-token"
    view_cli._open_browser(url, threading.Event(), wait=0.2)
    ((opened, mode, text),) = seen
    assert opened.startswith("file:///") and "secret-token" not in opened and mode == 0o600 and url in text
    assert not Path(opened.removeprefix("file://")).exists()
    assert "has not opened the page after 0 s; open the URL above" in capsys.readouterr().err


def test_a_browser_that_fails_leaves_no_file(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seen = opened_files(monkeypatch, False)
    view_cli._open_browser("http://127.0.0.1:9/?token=t", threading.Event())
    assert not Path(seen[0][0].removeprefix("file://")).exists()
    assert "could not open a browser; open the URL above" in capsys.readouterr().err


def test_the_redirect_file_is_removed_once_the_page_is_visited(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = opened_files(monkeypatch, True)
    visited = threading.Event()
    done = threading.Thread(target=view_cli._open_browser, args=("http://127.0.0.1:9/?token=t", visited, 60))
    done.start()
    wait_for(lambda: seen)
    path = Path(seen[0][0].removeprefix("file://"))
    assert path.exists()
    visited.set()
    done.join(timeout=10)
    assert not done.is_alive() and not path.exists()


def read_until(fd: int, text: str, timeout: float) -> str:
    got = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in got and time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return got.decode(errors="replace")


def test_a_slow_start_says_what_it_is_reading_on_a_terminal(minilm: Path) -> None:
    with RangeServer({"model.safetensors": minilm.read_bytes()}, latency=1.5) as origin:
        url = origin.url("model.safetensors")
        for quiet in (False, True):
            master, slave = pty.openpty()
            proc = subprocess.Popen([sys.executable, "-m", "pysafetensors", "view", url, "--no-browser"]
                                    + (["--quiet"] if quiet else []),
                                    stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env(), text=True)
            os.close(slave)
            try:
                assert proc.stdout is not None
                line = ""
                while not line.startswith("http://"):
                    line = proc.stdout.readline()
                    assert line, "no URL"
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)
                err = read_until(master, "stopped", 10)
            finally:
                if proc.poll() is None:
                    proc.kill()
                os.close(master)
            notice = f"pysafetensors view: reading {url}..."
            assert (notice in err) != quiet, err  # --quiet: no progress output
            assert "stopped" in err
