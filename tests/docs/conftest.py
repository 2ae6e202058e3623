"""The built documentation site, shared by the tests that read it (built once per run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import require
from docs_helpers import ROOT, env


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material"):
        require(module, "docs")  # mkdocs.yml's theme and plugins
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(out)],
        cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out
