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
