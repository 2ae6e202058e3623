"""Helpers shared by the reliability tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with this worktree's package (and fuzz/) first on the path."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code, *args], check=False, capture_output=True, text=True, timeout=timeout, env=full_env
    )


def in_threads(work: Callable[[int], None], count: int) -> None:
    """Run ``work(0)`` .. ``work(count - 1)`` at once, one thread each; re-raise the first failure."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 - re-raised below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
