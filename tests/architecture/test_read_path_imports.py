"""Reading one local file must not import the write side or the sharded reader, and neither
must resolving the package's names (but the incremental writer's) or importing a face.  A
well-formed header takes the fast paths, so the header rules' modules load only for a header
they defer, and the memory check only for a read that copies (importing a face loads none of
them, nor the low-level serialize API).

``from pysafetensors import safe_open`` runs at import time in every library that reads
checkpoints (transformers does it), so what it imports is paid by every user, and its
allocations advance the garbage collector's generations for the rest of the process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")

#: the write side: the writer, its sinks and layout planner, and the incremental writer's face
WRITE_SIDE = [
    "pysafetensors.writer",
    "pysafetensors.io.sinks",
    "pysafetensors.io.targets",
    "pysafetensors.format.layout",
    "pysafetensors._incremental",
]
#: the sharded reader and what only it needs
SHARDED = [
    "pysafetensors.sharded",
    "pysafetensors.io.spool",
    "pysafetensors.format.index",
]
#: the header rules and the serde-exact JSON reading they use: for headers the fast paths defer
RULES = ["pysafetensors.format.rules", "pysafetensors.format.json_compat"]
#: the memory check, for reads that copy into fresh buffers (a map's views need none)
COPYING = ["pysafetensors.io.memory"]
WATCHED = [*WRITE_SIDE, *SHARDED, "pysafetensors._api", *RULES, *COPYING]

#: the root's public names that need no writer until they are called (all but the incremental writer's)
READ_NAMES = ["SafetensorError", "TensorSpec", "_safe_open_handle", "deserialize", "install_as_safetensors",
              "safe_open", "serialize", "serialize_file", "uninstall_as_safetensors"]


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps([m for m in {WATCHED!r} if m in sys.modules]))\n"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_safe_open_imports_no_write_side() -> None:
    assert _loaded_after("from pysafetensors import safe_open") == []


def test_reading_a_local_file_imports_no_write_side(tmp_path: Path) -> None:
    path = tmp_path / "one.safetensors"
    header = b'{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x01\x02")
    statement = (
        "from pysafetensors import safe_open\n"
        f"with safe_open({str(path)!r}, framework='numpy') as f:\n"
        "    assert f.get_tensor('t').tolist() == [1, 2]\n"
        "    assert f.get_slice('t')[1:].tolist() == [2]"
    )
    assert _loaded_after(statement) == []


def test_resolving_the_names_readers_use_imports_no_write_side() -> None:
    # what a library that reads (and may save later) resolves at import time, and its face
    import pysafetensors

    assert set(READ_NAMES) == set(pysafetensors.__all__) - {"SafetensorsWriter", "open_writer", "__version__"}
    statement = f"from pysafetensors import {', '.join(READ_NAMES)}\nimport pysafetensors.numpy"
    assert [m for m in _loaded_after(statement) if m in WRITE_SIDE or m in SHARDED] == []


def test_importing_the_torch_face_imports_no_write_side() -> None:
    pytest.importorskip("torch")
    statement = "from pysafetensors import safe_open\nfrom pysafetensors.torch import load_file, save_file"
    assert _loaded_after(statement) == []


def test_the_check_can_fail(tmp_path: Path) -> None:
    # a sharded checkpoint does load the sharded reader, and saving loads the writer
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {}}))
    loaded = _loaded_after(
        "from pysafetensors import safe_open, serialize\n"
        f"safe_open({str(index)!r}, framework='numpy').keys()\n"
        "serialize({})"
    )
    assert "pysafetensors.sharded" in loaded
    assert "pysafetensors.writer" in loaded
    # a header the fast paths defer (a name written with an escape) loads the rules, which take it
    path = tmp_path / "escaped.safetensors"
    header = b'{"\\u0074":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}'
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\x01\x02")
    statement = f"from pysafetensors import safe_open\nassert safe_open({str(path)!r}, framework='numpy').keys() == ['t']"
    assert _loaded_after(statement) == RULES
    # a read that copies loads the memory check
    statement = f"from pysafetensors import safe_open\nsafe_open({str(path)!r}, framework='numpy', backend='pread').get_tensor('t')"
    assert "pysafetensors.io.memory" in _loaded_after(statement)
    # the incremental writer's class needs the write side to exist
    assert set(WRITE_SIDE) <= set(_loaded_after("from pysafetensors import SafetensorsWriter"))
