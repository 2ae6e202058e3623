"""`pysafetensors view` ends on SIGTERM whatever state it is in (security round 3, item 8), each
case a real subprocess.

Reproduced here: started as a script or tool runner may start it, with SIGINT (and SIGTERM)
inherited as *ignored*, a signal sent while the inputs were still being opened was lost (the
handlers went in only once the port was bound), and the viewer then served until killed.  The
handlers now go in before the inputs are opened.  And a SIGTERM whose clean stop cannot end the
process (here: its exit waits on a thread that never ends) ends it FORCE_AFTER seconds later.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from servers import RangeServer

from pysafetensors.cli._stopper import FORCE_AFTER

from .test_cli import Viewer, env, visit


def _wait_for(condition: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_inputs_open_stops_it_even_when_inherited_ignored(minilm: Path, signum: int) -> None:
    """The input comes from a server that answers after 60 s: the signal arrives while the viewer
    waits for it, with both signals ignored by whoever started it."""
    with RangeServer({"m.safetensors": minilm.read_bytes()}, latency=60) as server:
        argv = ["/bin/sh", "-c", 'trap "" INT TERM; exec "$0" -m pysafetensors view "$1" --no-browser',
                sys.executable, server.url("m.safetensors")]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                                stdin=subprocess.DEVNULL)
        try:
            _wait_for(lambda: server.in_flight)  # the viewer is opening its input (the reply is 60 s away)
            proc.send_signal(signum)
            code = proc.wait(timeout=30)  # it would otherwise wait 60 s, then serve until killed
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            server.closing.set()
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert code == 130 and "interrupted" in err and "Traceback" not in err, (code, err)


@pytest.mark.slow
def test_sigterm_ends_it_when_its_exit_hangs(minilm: Path, tmp_path: Path) -> None:
    """After a clean stop ("stopped"), the interpreter waits for its non-daemon threads before it
    exits; one that never ends (a read stuck in a library's worker thread) held the viewer open.
    SIGTERM's countdown ends it FORCE_AFTER seconds after the signal, with 143 (128 + SIGTERM)."""
    script = tmp_path / "hangs_at_exit.py"
    script.write_text(
        "import sys, threading\n"
        "threading.Thread(target=threading.Event().wait, name='never-ends').start()\n"
        "from pysafetensors.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.Popen([sys.executable, str(script), "view", str(minilm), "--no-browser", "--host", "0.0.0.0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            stdin=subprocess.DEVNULL)
    try:
        url = Viewer(proc).url()
        assert visit(url)["inputs"][0]["summary"]["tensor_count"] == 104
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=FORCE_AFTER + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert code == 128 + signal.SIGTERM, (code, err)
    assert "stopped" in err and "still running" in err and "after SIGTERM" in err, err


@pytest.mark.slow
def test_sigint_alone_leaves_a_hanging_exit_to_the_user(minilm: Path, tmp_path: Path) -> None:
    """Ctrl-C stops the server cleanly and starts no countdown: a second Ctrl-C (or SIGTERM) is
    the user's to send.  The countdown is SIGTERM's alone."""
    script = tmp_path / "hangs_at_exit.py"
    script.write_text(
        "import sys, threading\n"
        "threading.Thread(target=threading.Event().wait, name='never-ends').start()\n"
        "from pysafetensors.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = subprocess.Popen([sys.executable, str(script), "view", str(minilm), "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            stdin=subprocess.DEVNULL)
    try:
        Viewer(proc).url()
        proc.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=FORCE_AFTER + 3)
        proc.send_signal(signal.SIGTERM)  # after the stop the handlers are back: SIGTERM's default ends it
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_the_repeated_signals_of_the_report_stop_it_every_time(minilm: Path) -> None:
    """SIGINT then SIGTERM, sent together at once and at several moments after the start, with
    SIGINT inherited ignored and a browser opener that never returns racing: the process always
    ends (cleanly, or killed by the second signal once the first has restored its default)."""
    browser = Path(os.environ.get("TMPDIR", "/tmp")) / f"pst-slow-browser-{os.getpid()}.sh"
    browser.write_text('#!/bin/sh\ntrap "" INT TERM\nsleep 60\n')
    browser.chmod(0o755)
    try:
        for delay in (0.3, 1.0, 3.0):
            argv = ["/bin/sh", "-c", 'trap "" INT; exec "$0" -m pysafetensors view "$1" --host 0.0.0.0', sys.executable,
                    str(minilm)]
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    env={**env(), "BROWSER": str(browser)}, stdin=subprocess.DEVNULL)
            try:
                time.sleep(delay)
                proc.send_signal(signal.SIGINT)
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=FORCE_AFTER + 30)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    raise AssertionError(f"still running {FORCE_AFTER + 30} s after SIGINT and SIGTERM ({delay} s)")
                proc.wait()
                if proc.stderr is not None:
                    proc.stderr.close()
    finally:
        browser.unlink()
