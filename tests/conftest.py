"""Shared fixtures, and the rule that a full run (``make test``, CI) skips nothing for lack of a
dependency.

A contributor's venv with only some extras runs the suite with skips naming what to install
(``_helpers.require``, ``pytest.importorskip``, and a test stopped by the library's own
``MissingDependency`` for a module that is indeed absent, as when a test parametrized over the
faces calls one whose framework is missing); with ``PYSAFETENSORS_REQUIRE_ALL=1`` (set by the
Makefile's test targets) each such skip is reported as a failure instead, so a dependency that went
missing from the CI set-up cannot pass unseen.  Skips for other reasons (a platform, root) stay.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Generator
from typing import Any

import pytest
from _helpers import INSTALL_HINT, install_hint
from hypothesis import settings

from pysafetensors.errors import MissingDependency

# CI replays the same examples every run (HYPOTHESIS_PROFILE=ci in .ci/run), as it replays the
# same fuzz seeds, so a red CI always reproduces; a plain `make test` explores new examples.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "explore"))

#: Skip reasons that mean "a dependency is missing": ``require``'s hint, ``importorskip``'s message,
#: and the llama.cpp converter that ``make venv`` unpacks.
_MISSING = re.compile(re.escape(INSTALL_HINT) + r"|could not import |make venv")


def _require_all() -> bool:
    return os.environ.get("PYSAFETENSORS_REQUIRE_ALL", "") not in ("", "0")


def _missing_dependency(report: pytest.CollectReport | pytest.TestReport) -> str | None:
    """The skip reason when ``report`` is a skip for a missing dependency, else None."""
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return None
    reason = str(report.longrepr[2])
    return reason if _MISSING.search(reason) else None


def _fail(report: Any, reason: str) -> None:
    report.outcome = "failed"
    report.longrepr = f"PYSAFETENSORS_REQUIRE_ALL=1 and a dependency is missing: {reason}"


def _not_installed(call: pytest.CallInfo[None]) -> str | None:
    """The install hint when the test stopped on the library's own MissingDependency for a module
    that is indeed not installed (a face called for a framework this venv lacks)."""
    if call.excinfo is None or not isinstance(call.excinfo.value, MissingDependency):
        return None
    error = call.excinfo.value
    try:
        found = importlib.util.find_spec(error.module) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else install_hint(error.module, error.extra)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    hint = _not_installed(call) if report.failed else None
    if hint is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), (item.location[1] or 0) + 1, f"Skipped: {hint}")
    reason = _missing_dependency(report) if _require_all() else None
    if reason is not None and not hasattr(report, "wasxfail"):
        _fail(report, reason)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    reason = _missing_dependency(report) if _require_all() else None
    if reason is not None:
        _fail(report, reason)


@pytest.fixture
def tmp_file(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(os.fspath(tmp_path), "t.safetensors")
