"""The suite's rule for missing dependencies (tests/conftest.py): a skip naming what to install, and
a failure instead under ``PYSAFETENSORS_REQUIRE_ALL=1`` (``make test``, CI); other skips stay skips.

Each case runs pytest in a subprocess on a small test file, with the suite's conftest as a plugin.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import EXTRA_OF, install_hint

TESTS = Path(__file__).resolve().parents[1]

CASES = '''
import pytest
from _helpers import require

def test_missing_by_require():
    require("no_such_module_for_pysafetensors_tests", "torch")

def test_missing_by_importorskip():
    pytest.importorskip("no_such_module_for_pysafetensors_tests")

def test_skipped_for_another_reason():
    pytest.skip("not on this platform")

def test_present():
    assert require("json").dumps([1]) == "[1]"
'''


def _run(tmp_path: Path, require_all: str | None) -> tuple[int, str]:
    (tmp_path / "test_cases.py").write_text(CASES, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYSAFETENSORS_REQUIRE_ALL"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    if require_all is not None:
        env["PYSAFETENSORS_REQUIRE_ALL"] = require_all
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-rA", "-q", "test_cases.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("require_all", [None, "0"])
def test_a_missing_dependency_skips_with_its_install_hint(tmp_path: Path, require_all: str | None) -> None:
    rc, out = _run(tmp_path, require_all)
    assert rc == 0, out
    assert "1 passed, 3 skipped" in out, out
    assert "no_such_module_for_pysafetensors_tests is not installed: pip install -e '.[torch]'" in out


def test_require_all_turns_missing_dependency_skips_into_failures(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, "1")
    assert rc == 1, out
    assert "2 failed, 1 passed, 1 skipped" in out, out
    assert "FAILED test_cases.py::test_missing_by_require" in out
    assert "FAILED test_cases.py::test_missing_by_importorskip" in out
    assert "SKIPPED [1] test_cases.py:12: not on this platform" in out  # not a dependency: still a skip


def test_the_hint_names_the_extra_of_the_top_level_module() -> None:
    assert install_hint("jax.numpy") == "jax.numpy is not installed: pip install -e '.[jax]'"
    assert install_hint("mlx.core", "mlx") == "mlx.core is not installed: pip install -e '.[mlx]'"
    assert install_hint("safetensors") == "safetensors is not installed: pip install -e '.[test]'"
    assert install_hint("griffe") == "griffe is not installed: pip install -e '.[docs]'"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
def test_every_extra_named_exists_in_pyproject() -> None:
    import tomllib

    extras = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    assert set(EXTRA_OF.values()) | {"test"} <= set(extras), sorted(set(EXTRA_OF.values()) - set(extras))


def test_the_librarys_missing_dependency_is_a_skip_only_when_the_module_is_absent(tmp_path: Path) -> None:
    (tmp_path / "test_faces.py").write_text('''
from pysafetensors.errors import MissingDependency

def test_absent():
    raise MissingDependency("no_such_module_for_pysafetensors_tests", "mlx")

def test_present_but_reported_missing():
    raise MissingDependency("json", "test")
''', encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYSAFETENSORS_REQUIRE_ALL"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    for require_all, counts in ((None, "1 failed, 1 skipped"), ("1", "2 failed")):
        if require_all:
            env["PYSAFETENSORS_REQUIRE_ALL"] = require_all
        proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-rA", "-q",
                               "test_faces.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                              check=False)
        out = proc.stdout + proc.stderr
        assert counts in out, out
        assert "FAILED test_faces.py::test_present_but_reported_missing" in out  # a real bug stays a failure
