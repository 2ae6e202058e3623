"""_adapters/__init__.py: which adapter a framework name or an object's type selects."""

from __future__ import annotations

import array

import ml_dtypes
import numpy as np
import pytest
from _helpers import require

from pysafetensors._adapters import FRAMEWORKS, Adapter, dtype_of_object, load_adapter, write_item_of
from pysafetensors.errors import InvalidFramework
from pysafetensors.format.dtypes import by_code


@pytest.mark.parametrize(("name", "module"), [("np", "numpy"), ("numpy", "numpy"), ("pt", "torch")])
def test_load_adapter_gives_the_module_implementing_adapter(name: str, module: str) -> None:
    if module == "torch":
        require("torch")
    adapter = load_adapter(name)
    assert adapter.__name__ == f"pysafetensors._adapters.{module}"  # type: ignore[attr-defined]
    assert isinstance(adapter, Adapter) and adapter.NAME == module


@pytest.mark.parametrize("name", ["Torch", "PT", "jaxx", "", None, 3])
def test_an_unknown_framework_is_refused_by_name(name: object) -> None:
    with pytest.raises(InvalidFramework, match=f"framework {name} is invalid"):
        load_adapter(name)  # type: ignore[arg-type]


def test_every_framework_name_maps_to_an_adapter_module_file() -> None:
    from pathlib import Path

    import pysafetensors._adapters as pkg

    here = Path(pkg.__file__).parent
    assert {f"{m}.py" for m in FRAMEWORKS.values()} <= {p.name for p in here.iterdir()}
    assert set(FRAMEWORKS.values()) == {"torch", "numpy", "jax", "tensorflow", "paddle", "mlx"}


def test_write_item_of_picks_the_adapter_by_the_objects_package() -> None:
    a = np.arange(6, dtype=">i4").reshape(2, 3)
    item = write_item_of("a", a)
    assert item is not None and (item.name, item.dtype.code, item.shape) == ("a", "I32", (2, 3))
    assert bytes(item.get_bytes()) == a.astype("<i4").tobytes()
    assert write_item_of("b", b"raw") is None
    assert write_item_of("c", array.array("f", [1.0])) is None
    assert write_item_of("d", memoryview(b"xy")) is None


@pytest.mark.parametrize(("value", "code"), [
    (np.float32, "F32"), (np.dtype(">f8"), "F64"), (np.dtype("bool"), "BOOL"), (ml_dtypes.bfloat16, "BF16"),
    (np.dtype(ml_dtypes.float8_e4m3fn), "F8_E4M3"), (np.int8, "I8"), (np.uint64, "U64"),
])
def test_dtype_of_object_reads_numpy_and_ml_dtypes(value: object, code: str) -> None:
    assert dtype_of_object(value) == by_code(code)


@pytest.mark.parametrize("value", ["F32", "float32", 4, object(), np.dtype("U4"), np.dtype("O")])
def test_dtype_of_object_is_none_for_what_no_adapter_owns(value: object) -> None:
    assert dtype_of_object(value) is None


def test_dtype_of_object_reads_torch_dtypes() -> None:
    torch = require("torch")
    assert dtype_of_object(torch.bfloat16) == by_code("BF16")
    assert dtype_of_object(torch.float8_e5m2) == by_code("F8_E5M2")
    assert dtype_of_object(torch.int16) == by_code("I16")


@pytest.mark.parametrize("module", sorted(set(FRAMEWORKS.values())))
def test_every_adapter_accepts_the_cpu_and_imports_its_namesake_package(module: str) -> None:
    # safe_open relies on both: with the CPU and the package imported, nothing at open can fail.
    import ast
    from pathlib import Path

    import pysafetensors._adapters as pkg
    from pysafetensors._device import parse_device

    tree = ast.parse((Path(pkg.__file__).parent / f"{module}.py").read_text())
    imported = {a.name.partition(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    required = {n.args[0].value.partition(".")[0] for n in ast.walk(tree)
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "require"}
    assert module in imported | required
    adapter = require(f"pysafetensors._adapters.{module}")
    assert adapter.check_device(parse_device("cpu")) is None


def _run(code: str) -> None:
    """``code`` in a fresh interpreter importing this checkout's package."""
    import os
    import subprocess
    import sys

    import pysafetensors

    src = os.path.dirname(pysafetensors.__path__[0])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_safe_open_imports_the_adapter_only_when_open_needs_it(tmp_path) -> None:
    from pysafetensors.numpy import save_file

    path = str(tmp_path / "t.safetensors")
    save_file({"a": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    _run(
        "import sys\n"
        "import numpy\n"
        "from pysafetensors import safe_open\n"
        "from pysafetensors.errors import InvalidDevice\n"
        "name = 'pysafetensors._adapters.numpy'\n"
        # The framework imported and the CPU: keys, metadata and slice shapes need no adapter.
        f"with safe_open({path!r}, 'np') as f:\n"
        "    assert f.keys() == ['a'] and f.get_slice('a').get_shape() == [2, 3]\n"
        "    assert name not in sys.modules\n"
        "    assert f.get_tensor('a').sum() == 15 and name in sys.modules\n"
        # Another device: checked at open, as before.
        "try:\n"
        f"    safe_open({path!r}, 'np', device='cuda')\n"
        "except InvalidDevice:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no InvalidDevice at open')\n"
    )


def test_a_framework_not_yet_imported_is_imported_at_open(tmp_path) -> None:
    from pysafetensors.numpy import save_file

    path = str(tmp_path / "t.safetensors")
    save_file({"a": np.zeros(2, dtype=np.float32)}, path)
    _run(
        "import sys\n"
        "from pysafetensors import safe_open\n"
        "from pysafetensors.errors import MissingDependency\n"
        "sys.modules['mlx'] = None\n"  # not installed, as far as this process knows
        "for device in ('cpu', 'no such device'):\n"  # the framework's error first, as before
        "    try:\n"
        f"        safe_open({path!r}, 'mlx', device=device)\n"
        "    except MissingDependency:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit('no MissingDependency at open')\n"
    )
