"""install_as_safetensors / uninstall_as_safetensors / python -m pysafetensors.run.

Each check runs in a fresh interpreter: the alias changes process-wide state, and this test
process imports the real safetensors as the oracle elsewhere.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from _helpers import require

from ._helpers import run_env

FRAMEWORKS = ("torch", "jax", "flax", "tensorflow", "paddle", "mlx")


def _python(code: str, tmp_path: Any, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], env=run_env(str(tmp_path / "hf")), cwd=tmp_path,
        capture_output=True, text=True, timeout=240, check=False,
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _json(code: str, tmp_path: Any, *args: str) -> Any:
    return json.loads(_python(code, tmp_path, *args).stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_install_imports_no_framework_and_faces_import_theirs_when_imported(tmp_path: Any) -> None:
    got = _json(
        f"""
        import json, sys
        import pysafetensors
        FW = {FRAMEWORKS!r}
        loaded = lambda: sorted(m for m in FW if m in sys.modules)
        pysafetensors.install_as_safetensors()
        import safetensors
        from safetensors import (SafetensorError, TensorSpec, __version__, _safe_open_handle, deserialize, safe_open,
                                 serialize, serialize_file)
        from safetensors._safetensors_rust import safe_open as rust_safe_open
        after_top = loaded()
        import safetensors.numpy
        after_numpy = loaded()
        import safetensors.torch
        from safetensors.torch import load_file, save_file, storage_ptr, _remove_duplicate_names, _find_shared_tensors
        print(json.dumps({{
            "after_top": after_top, "after_numpy": after_numpy, "after_torch": loaded(),
            "same": [safe_open is pysafetensors.safe_open, rust_safe_open is safe_open,
                     SafetensorError is pysafetensors.SafetensorError, serialize is pysafetensors.serialize,
                     safetensors.numpy is pysafetensors.numpy, safetensors.torch is pysafetensors.torch,
                     load_file is pysafetensors.torch.load_file],
            "version": __version__, "repr": repr(safetensors),
            "spec": safetensors.torch.__spec__.name,
        }}))
        """,
        tmp_path,
    )
    assert got["after_top"] == [] and got["after_numpy"] == []
    assert got["after_torch"] == ["torch"]
    assert all(got["same"]), got["same"]
    assert got["version"] == "0.8.0" and "pysafetensors" in got["repr"]
    assert got["spec"] == "pysafetensors.torch"  # the face keeps its own spec (importable, reloadable)


@pytest.mark.slow
def test_every_framework_face_resolves(tmp_path: Any) -> None:
    for module in ("paddle", "jax", "flax", "tensorflow", "mlx.core"):  # paddle first: see _helpers
        require(module)
    got = _json(
        """
        import json, sys
        import pysafetensors
        pysafetensors.install_as_safetensors()
        # paddle imports safetensors.numpy itself (so it gets ours), and comes before tensorflow:
        # the other order segfaults (tests/frameworks/_fw_cases.py).
        import paddle
        paddle_got = sys.modules["safetensors.numpy"].__name__
        import safetensors.flax, safetensors.tensorflow, safetensors.paddle, safetensors.mlx
        from safetensors.paddle import load_file
        from safetensors.numpy import safe_open
        faces = {f: getattr(safetensors, f).__name__ for f in ("flax", "tensorflow", "paddle", "mlx")}
        print(json.dumps({"faces": faces, "paddle_load": load_file is pysafetensors.paddle.load_file,
                          "paddle_got": paddle_got,
                          "numpy_safe_open": safe_open is pysafetensors.safe_open}))
        """,
        tmp_path,
    )
    assert got["faces"] == {f: f"pysafetensors.{f}" for f in ("flax", "tensorflow", "paddle", "mlx")}
    assert got["paddle_load"] and got["numpy_safe_open"] and got["paddle_got"] == "pysafetensors.numpy"


def test_install_is_idempotent_and_unknown_submodules_are_not_found(tmp_path: Any) -> None:
    got = _json(
        """
        import json, sys
        import pysafetensors
        from pysafetensors._alias import AliasFinder, is_installed
        before = is_installed()
        pysafetensors.install_as_safetensors()
        pysafetensors.install_as_safetensors()
        import safetensors
        first = safetensors
        pysafetensors.install_as_safetensors()
        import safetensors
        try:
            import safetensors.nothing
            missing = None
        except ModuleNotFoundError as e:
            missing = e.name
        print(json.dumps({"before": before, "finders": sum(isinstance(f, AliasFinder) for f in sys.meta_path),
                          "first": sys.meta_path.index(next(f for f in sys.meta_path if isinstance(f, AliasFinder))),
                          "same_module": first is safetensors, "missing": missing}))
        """,
        tmp_path,
    )
    assert got == {"before": False, "finders": 1, "first": 0, "same_module": True, "missing": "safetensors.nothing"}


@pytest.mark.slow
def test_install_refuses_when_the_real_safetensors_is_imported(tmp_path: Any) -> None:
    got = _json(
        """
        import json, sys
        import safetensors.torch
        import pysafetensors
        from pysafetensors.errors import AliasConflict, SafetensorError
        try:
            pysafetensors.install_as_safetensors()
            error = None
        except AliasConflict as e:
            error = str(e)
            kinds = [isinstance(e, ImportError), isinstance(e, SafetensorError)]
        import safetensors
        print(json.dumps({"error": error, "kinds": kinds, "installed": pysafetensors._alias.is_installed(),
                          "still_real": hasattr(safetensors, "_safetensors_rust")}))
        """,
        tmp_path,
    )
    assert got["error"] is not None and got["kinds"] == [True, True]
    assert "safetensors.torch" in got["error"] and "python -m pysafetensors.run" in got["error"]
    assert not got["installed"] and got["still_real"]


def test_uninstall_restores_the_real_package(tmp_path: Any) -> None:
    got = _json(
        """
        import importlib, json, sys
        import pysafetensors
        pysafetensors.install_as_safetensors()
        import safetensors, safetensors.numpy
        ours = safetensors.numpy
        pysafetensors.uninstall_as_safetensors()
        left = sorted(m for m in sys.modules if m.split(".")[0] == "safetensors")
        import safetensors, safetensors.numpy
        real = hasattr(safetensors, "_safetensors_rust") and safetensors.numpy is not ours
        importlib.reload(pysafetensors.numpy)  # the face's own spec survived the alias
        try:
            pysafetensors.install_as_safetensors()
            refused = False
        except ImportError:
            refused = True
        pysafetensors.uninstall_as_safetensors()  # nothing installed: a no-op that keeps the real modules
        print(json.dumps({"left": left, "real": real, "refused": refused,
                          "kept": "safetensors.numpy" in sys.modules, "ours_is": ours.__name__}))
        """,
        tmp_path,
    )
    assert got == {"left": [], "real": True, "refused": True, "kept": True, "ours_is": "pysafetensors.numpy"}


def test_files_written_through_the_alias_are_upstreams_bytes(tmp_path: Any) -> None:
    import safetensors.numpy as upstream_numpy

    arrays = {"b": np.arange(12, dtype=np.float32).reshape(3, 4), "a": np.array([1, 2, 3], dtype=np.int64)}
    np.savez(tmp_path / "in.npz", **arrays)
    _python(
        """
        import sys, numpy as np, pysafetensors
        pysafetensors.install_as_safetensors()
        from safetensors.numpy import save_file, load_file
        arrays = dict(np.load("in.npz"))
        save_file(arrays, "ours.safetensors", metadata={"format": "np"})
        assert all(np.array_equal(load_file("ours.safetensors")[k], v) for k, v in arrays.items())
        """,
        tmp_path,
    )
    upstream_numpy.save_file(arrays, str(tmp_path / "theirs.safetensors"), metadata={"format": "np"})
    assert (tmp_path / "ours.safetensors").read_bytes() == (tmp_path / "theirs.safetensors").read_bytes()


def test_dependency_checks_see_a_safetensors_distribution(tmp_path: Any) -> None:
    # The real distribution is installed here, so its metadata answers; the wheel test checks the
    # alias's own distribution in a venv without the real one.
    got = _json(
        """
        import json, importlib.metadata, pysafetensors
        pysafetensors.install_as_safetensors()
        import safetensors
        print(json.dumps([importlib.metadata.version("safetensors"), safetensors.__version__]))
        """,
        tmp_path,
    )
    assert got == ["0.8.0", "0.8.0"]


def _upstream_names(face: str) -> set[str]:
    """Names upstream's ``safetensors/<face>.py`` defines or imports from safetensors."""
    spec = importlib.util.find_spec("safetensors")
    assert spec is not None and spec.submodule_search_locations
    with open(os.path.join(next(iter(spec.submodule_search_locations)), f"{face}.py"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.module == "safetensors":
            names |= {a.asname or a.name for a in node.names}
    return names


@pytest.mark.slow
def test_missing_upstream_names_are_exactly_the_documented_ones(tmp_path: Any) -> None:
    for module in ("paddle", "jax", "flax", "tensorflow", "mlx.core"):  # paddle first: see _helpers
        require(module)
    from pysafetensors._alias import _DEFINED_IN, NOT_PROVIDED

    faces = list(NOT_PROVIDED)
    ours = _json(
        f"""
        import importlib, json
        import paddle  # before tensorflow (see tests/frameworks/_fw_cases.py)
        print(json.dumps({{f: dir(importlib.import_module("pysafetensors." + f)) for f in {faces!r}}}))
        """,
        tmp_path,
    )
    for face in faces:
        assert sorted(_upstream_names(face) - set(ours[face])) == sorted(NOT_PROVIDED[face]), face
    import safetensors as upstream

    assert {n for n in dir(upstream) if not n.startswith("__") or n == "__version__"} - {"_safetensors_rust", *faces} \
        <= {*_DEFINED_IN, "__version__"}
    page = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs",
                        "upstream-differences.md")  # the one list of differences
    with open(page, encoding="utf-8") as fh:
        text = fh.read()
    for face, names in NOT_PROVIDED.items():  # the documented list is this list
        for name in names:
            assert f"`{name}`" in text, (face, name)


def test_star_imports_give_upstreams_names(tmp_path: Any) -> None:
    """``from safetensors import *`` and ``from safetensors._safetensors_rust import *`` bind the names
    upstream's modules export (the compiled module declares ``__all__``; the package does not)."""
    import safetensors as upstream
    import safetensors._safetensors_rust as upstream_rust

    code = """
        import json
        def star(module):
            ns = {}
            exec(f"from safetensors{module} import *", ns)
            return sorted(k for k in ns if k != "__builtins__")
        INSTALL
        import safetensors, safetensors._safetensors_rust as rust
        print(json.dumps({"top": star(""), "rust": star("._safetensors_rust"), "rust_all": getattr(rust, "__all__", None),
                          "top_all": getattr(safetensors, "__all__", None)}))
        """
    ours = _json(code.replace("INSTALL", "import pysafetensors; pysafetensors.install_as_safetensors()"), tmp_path)
    real = _json(code.replace("INSTALL", "pass"), tmp_path)
    assert real["rust_all"] == list(upstream_rust.__all__) and real["top_all"] is None  # the oracle ran
    assert not hasattr(upstream, "__all__")
    assert ours == real


# --- python -m pysafetensors.run -------------------------------------------------------------

PROBE = """\
import json, os, sys
import safetensors
print(json.dumps({
    "argv": sys.argv, "name": __name__, "path0": sys.path[0],
    "spec": __spec__.name if __spec__ else None,
    "file": os.path.realpath(__file__) if "__file__" in globals() else None,
    "main_is_me": sys.modules["__main__"].__dict__ is globals(),
    "alias": getattr(safetensors, "__alias_of__", None),
}))
code = int(os.environ.get("PROBE_EXIT", "0"))
if code == 99:
    raise RuntimeError("probe failed on purpose")
sys.exit(code)
"""


def _probe(tmp_path: Any, args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={**run_env(str(tmp_path / "hf")), **(env or {})},
    )


@pytest.mark.parametrize(
    "form", [["scripts/probe.py", "a", "--flag"], ["-m", "probe_module", "x", "-m"], ["-c", PROBE, "c1"]],
    ids=["script", "module", "code"],
)
def test_run_behaves_as_python_itself_with_the_alias(tmp_path: Any, form: list[str]) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "probe.py").write_text(PROBE)
    (tmp_path / "probe_module.py").write_text(PROBE)
    plain = _probe(tmp_path, form)
    aliased = _probe(tmp_path, ["-m", "pysafetensors.run", *form])
    assert plain.returncode == aliased.returncode == 0, aliased.stderr[-3000:]
    theirs, ours = json.loads(plain.stdout), json.loads(aliased.stdout)
    assert theirs.pop("alias") is None and ours.pop("alias") == "pysafetensors"
    assert ours == theirs
    assert ours["name"] == "__main__" and ours["main_is_me"]


@pytest.mark.parametrize("exit_code", [0, 3, 99])
def test_run_passes_on_exit_codes_and_errors(tmp_path: Any, exit_code: int) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    env = {"PROBE_EXIT": str(exit_code)}
    plain = _probe(tmp_path, ["probe.py"], env)
    aliased = _probe(tmp_path, ["-m", "pysafetensors.run", "probe.py"], env)
    assert aliased.returncode == plain.returncode == (1 if exit_code == 99 else exit_code)
    if exit_code == 99:
        assert "RuntimeError: probe failed on purpose" in aliased.stderr


def test_run_usage_errors(tmp_path: Any) -> None:
    nothing = _probe(tmp_path, ["-m", "pysafetensors.run"])
    assert nothing.returncode == 2 and "python -m pysafetensors.run SCRIPT" in nothing.stderr
    assert _probe(tmp_path, ["-m", "pysafetensors.run", "--help"]).returncode == 0
    missing = _probe(tmp_path, ["-m", "pysafetensors.run", "nope.py"])
    assert missing.returncode == 2 and "nope.py" in missing.stderr and "No such file" in missing.stderr
    dangling = _probe(tmp_path, ["-m", "pysafetensors.run", "-m"])
    assert dangling.returncode == 2 and "Argument expected for the -m option" in dangling.stderr
