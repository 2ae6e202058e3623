"""The real distribution: ``python -m build`` makes an sdist and a wheel, and the wheel works
installed (not editable) into a clean virtual environment with no extras.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "src", "pysafetensors")

pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]


def _version() -> str:
    """``__version__`` as the source states it (read, not imported: the one place it lives)."""
    with open(os.path.join(PACKAGE, "_version.py"), encoding="utf-8") as fh:
        for node in ast.parse(fh.read()).body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__version__"]:
                return str(ast.literal_eval(node.value))
    raise AssertionError("no __version__ in src/pysafetensors/_version.py")


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH: the venv must find the installed wheel, never this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _run(cmd: list[str], cwd: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """{"sdist", "wheel", "venv", "work"}: built once (the wheel from the sdist, as build does)."""
    base = tmp_path_factory.mktemp("wheel")
    out = str(base / "dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=str(base))
    files = sorted(os.listdir(out))
    sdists = [f for f in files if f.endswith(".tar.gz")]
    wheels = [f for f in files if f.endswith(".whl")]
    assert len(sdists) == 1 and len(wheels) == 1, files
    venv = str(base / "venv")
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=str(base))
    python = os.path.join(venv, "bin", "python")
    # The outer pip installs into the venv (no pip bootstrap there): the wheel and its two
    # required dependencies, from the configured index / cache; no extras.
    _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", os.path.join(out, wheels[0])],
         cwd=str(base))
    work = base / "work"
    work.mkdir()
    return {"sdist": os.path.join(out, sdists[0]), "wheel": os.path.join(out, wheels[0]), "venv": venv,
            "work": str(work)}


def test_one_version_number_everywhere(dist: dict[str, str]) -> None:
    import pysafetensors

    version = _version()
    assert pysafetensors.__version__ == version
    assert os.path.basename(dist["wheel"]).startswith(f"pysafetensors-{version}-py3-none-any")
    assert os.path.basename(dist["sdist"]) == f"pysafetensors-{version}.tar.gz"
    with zipfile.ZipFile(dist["wheel"]) as whl:
        metadata = whl.read(f"pysafetensors-{version}.dist-info/METADATA").decode()
    assert f"\nVersion: {version}\n" in metadata
    assert "\nLicense-Expression: Apache-2.0\n" in metadata
    assert "Requires-Dist: numpy" in metadata and "Requires-Dist: ml-dtypes" in metadata
    assert "Requires-Dist: urllib3" in metadata
    # torch & co are extras, never requirements of the bare install.
    assert not [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line
                and not line.split()[1].startswith(("numpy", "ml-dtypes", "urllib3"))]


def test_wheel_carries_typing_license_and_every_package_file(dist: dict[str, str]) -> None:
    version = _version()
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
        license_text = whl.read(f"pysafetensors-{version}.dist-info/licenses/LICENSE").decode()
    assert "pysafetensors/py.typed" in names
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as fh:
        assert license_text == fh.read()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    # Package data in general (non-.py files such as py.typed, the viewer's static/ files): every
    # file under src/pysafetensors is in the wheel.
    expected = set()
    for where, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        expected |= {os.path.relpath(os.path.join(where, f), os.path.dirname(PACKAGE)).replace(os.sep, "/")
                     for f in files}
    assert expected - names == set()
    assert not [n for n in names if n.endswith(".pyc")]


def test_sdist_carries_license_changelog_and_sources(dist: dict[str, str]) -> None:
    prefix = f"pysafetensors-{_version()}/"
    with tarfile.open(dist["sdist"]) as sdist:
        names = set(sdist.getnames())
    for need in ("LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "src/pysafetensors/py.typed",
                 "src/pysafetensors/__init__.py", "src/pysafetensors/run.py"):
        assert prefix + need in names, need


CHECKS = """
import importlib.metadata, importlib.util, json, os, sys
import numpy as np
import pysafetensors
from pysafetensors import safe_open
from pysafetensors.errors import MissingDependency
from pysafetensors.numpy import load_file, save_file

report = {"file": pysafetensors.__file__, "version": pysafetensors.__version__,
          "dist_version": importlib.metadata.version("pysafetensors"),
          "torch_present": importlib.util.find_spec("torch") is not None,
          "safetensors_present": importlib.util.find_spec("safetensors") is not None}
arrays = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.array([1, -2], dtype=np.int64)}
save_file(arrays, "m.safetensors", metadata={"k": "v"})
loaded = load_file("m.safetensors")
with safe_open("m.safetensors", framework="np") as f:
    report["round_trip"] = all(np.array_equal(loaded[k], v) and loaded[k].dtype == v.dtype for k, v in arrays.items()) \\
        and f.metadata() == {"k": "v"} and f.keys() == ["i", "w"]
try:
    safe_open("m.safetensors", framework="pt")
    report["pt_error"] = None
except MissingDependency as e:
    report["pt_error"] = str(e)
try:
    import pysafetensors.torch
    report["torch_face_error"] = None
except ImportError as e:
    report["torch_face_error"] = f"{type(e).__name__}: {e}"
pysafetensors.install_as_safetensors()
import safetensors
from safetensors.numpy import load
report["alias_round_trip"] = np.array_equal(load(open("m.safetensors", "rb").read())["w"], arrays["w"])
report["alias_dist_version"] = importlib.metadata.version("safetensors")
try:
    import safetensors.torch
    report["alias_torch_error"] = None
except ImportError as e:
    report["alias_torch_error"] = str(e)
print(json.dumps(report))
"""


def test_clean_install_without_extras(dist: dict[str, str]) -> None:
    python = os.path.join(dist["venv"], "bin", "python")
    report = json.loads(_run([python, "-c", CHECKS], cwd=dist["work"]).stdout.strip().splitlines()[-1])
    assert report["file"].startswith(os.path.realpath(dist["venv"])) or report["file"].startswith(dist["venv"])
    assert report["version"] == report["dist_version"] == _version()
    assert not report["torch_present"] and not report["safetensors_present"]
    assert report["round_trip"] and report["alias_round_trip"]
    hint = "pip install 'pysafetensors[torch]'"
    assert report["pt_error"] is not None and hint in report["pt_error"]
    assert report["torch_face_error"] is not None and report["torch_face_error"].startswith("MissingDependency")
    assert hint in report["torch_face_error"]
    assert report["alias_torch_error"] is not None and hint in report["alias_torch_error"]
    # No real safetensors here: while the alias is on, importlib.metadata finds its stand-in.
    assert report["alias_dist_version"] == "0.8.0"


def test_console_script_and_module_entry_points(dist: dict[str, str]) -> None:
    python = os.path.join(dist["venv"], "bin", "python")
    script = os.path.join(dist["venv"], "bin", "pysafetensors")
    helped = _run([script, "--help"], cwd=dist["work"]).stdout
    assert "inspect" in helped and "convert" in helped
    assert _run([python, "-m", "pysafetensors", "--help"], cwd=dist["work"]).stdout == helped
    save = "import numpy as np; from pysafetensors.numpy import save_file; save_file({'x': np.zeros(3)}, 'c.safetensors')"
    _run([python, "-c", save], cwd=dist["work"])
    inspected = json.loads(_run([script, "--json", "inspect", "c.safetensors"], cwd=dist["work"]).stdout)
    assert '"F64"' in json.dumps(inspected)
    run = _run([python, "-m", "pysafetensors.run", "-c", textwrap.dedent("""
        import safetensors, sys
        print(safetensors.__alias_of__, sys.argv[1:])
    """), "a"], cwd=dist["work"]).stdout
    assert run.split() == ["pysafetensors", "['a']"]
