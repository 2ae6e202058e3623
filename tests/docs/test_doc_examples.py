"""The examples in the docs run, and print what they show.

- Every ```python block in docs/**/*.md and README.md runs: the blocks of one page in order, in one
  fresh interpreter, in an empty temporary directory.  A block preceded by
  ``<!-- docs-test: not-run: REASON -->`` is not run (it needs the network); the reason is required.
- Every ```console block that shows output is preceded by ``<!-- docs-test: console -->``, and each
  of its ``$`` lines runs in a directory holding all-MiniLM-L6-v2's model.safetensors (and, for a
  block that names ``model.gguf``, that model written as GGUF by gguf-py:
  ``tests/gguf/gguf_helpers.minilm_gguf``) and prints exactly what the block shows.  A line ``...``
  in the shown output stands for any number of lines left out.
- A ```python block preceded by ``<!-- docs-test: setup -->`` makes the files its page's console
  blocks use: it runs (with the page's earlier setup blocks) in that directory before each console
  block that follows it, so the reader sees how every file in the examples was made.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import EXTRA_OF, require
from docs_helpers import ROOT, Block, blocks_of, doc_pages, env, minilm, rel, run_python_blocks

PYTHON = ("python", "py")


def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks_of(page) if b.lang in PYTHON and b.marker not in ("not-run", "setup")]


PAGES = [p for p in doc_pages() if _runnable(p)]


def _shows_output(block: Block) -> bool:
    return any(line.strip() and not line.startswith("$ ") for line in block.code.splitlines())


def test_markers_are_well_formed() -> None:
    for page in doc_pages():
        blocks = blocks_of(page)
        for i, block in enumerate(blocks):
            if block.marker is None:
                continue
            where = f"{rel(page)}:{block.line}"
            assert block.marker in ("not-run", "console", "setup"), f"{where}: unknown docs-test marker {block.marker!r}"
            if block.marker == "not-run":
                assert block.lang in PYTHON, f"{where}: not-run marks a python block"
                assert block.reason and len(block.reason) > 10, f"{where}: a not-run block needs a reason"
            elif block.marker == "setup":
                assert block.lang in PYTHON, f"{where}: setup marks a python block"
                assert any(b.marker == "console" for b in blocks[i + 1:]), f"{where}: no console block follows it"
            else:
                assert block.lang == "console", f"{where}: the console marker goes before a ```console block"
    not_run = [b for p in doc_pages() for b in blocks_of(p) if b.marker == "not-run"]
    runnable = [b for p in doc_pages() for b in blocks_of(p) if b.lang in PYTHON and b.marker != "not-run"]
    # Kept rare: at most one block in five may be left out.
    assert len(not_run) * 5 <= len(runnable), (len(runnable), len(not_run))


def test_every_console_block_that_shows_output_is_run() -> None:
    """Output shown in the docs is output a test produced: no ```console block shows any unchecked."""
    unmarked = [f"{rel(p)}:{b.line}" for p in doc_pages() for b in blocks_of(p)
                if b.lang == "console" and b.marker != "console" and _shows_output(b)]
    assert unmarked == [], f"mark these <!-- docs-test: console --> (and make them pass): {unmarked}"


_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.MULTILINE)


def _optional_imports(blocks: list[Block]) -> list[str]:
    """The optional modules (a framework, ...: ``EXTRA_OF``) a page's blocks import."""
    return sorted({m for b in blocks for m in _IMPORT.findall(b.code) if m in EXTRA_OF})


def test_optional_imports_are_found() -> None:
    code = "import numpy as np\nimport jax.numpy as jnp\n  from mlx import core\nimport torchvision\n"
    block = Block(Path("page.md"), 1, "python", code, None, None)
    assert _optional_imports([block]) == ["jax", "mlx"]


@pytest.mark.parametrize("page", PAGES, ids=[rel(p) for p in PAGES])
@pytest.mark.slow
def test_python_examples_run(page: Path, tmp_path: Path) -> None:
    for module in _optional_imports(_runnable(page)):
        require(module)  # a page showing a framework runs where that framework is installed
    workdir = tmp_path / "work"
    workdir.mkdir()
    proc = run_python_blocks(_runnable(page), workdir, tmp_path / "blocks.json")
    assert proc.returncode == 0, f"{rel(page)}: an example failed\n{proc.stdout}\n{proc.stderr}"


CONSOLE = [(p, b) for p in doc_pages() for b in blocks_of(p) if b.marker == "console"]


def _console_steps(code: str) -> list[tuple[str, str]]:
    """(command, expected output) per ``$`` line of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.rstrip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"output before the first command: {line!r}"
            steps[-1][1].append(line)
    return [(cmd, "\n".join(out).rstrip("\n")) for cmd, out in steps]


def shows(expected: str, got: str) -> bool:
    """Whether ``got`` is what ``expected`` shows: the same lines, where a line ``...`` stands for
    any number of lines (none included)."""
    parts = [r"(?:[^\n]*\n)*?" if line == "..." else re.escape(line) + r"\n" for line in expected.split("\n")]
    return re.fullmatch("".join(parts), got + "\n") is not None


def test_an_elided_line_stands_for_lines_and_nothing_else() -> None:
    assert shows("a\n...\nd", "a\nb\nc\nd") and shows("a\n...\nd", "a\nd") and shows("...\nc", "a\nb\nc")
    assert shows("a\nb", "a\nb") and shows("", "")
    assert not shows("a\nb", "a\nb\nc") and not shows("a\n...\nd", "a\nb\nc") and not shows("a...", "abc")
    assert not shows("a\n...", "b\nc") and not shows("x", "")


@pytest.fixture(scope="module")
def minilm_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 as GGUF (gguf-py writes it), for the GGUF guide's console blocks."""
    sys.path.insert(0, str(ROOT / "tests" / "gguf"))
    from gguf_helpers import minilm_gguf as write

    return write(minilm(), tmp_path_factory.mktemp("gguf") / "model.gguf")


@pytest.mark.parametrize("page,block", CONSOLE, ids=[f"{rel(p)}:{b.line}" for p, b in CONSOLE])
@pytest.mark.slow
def test_console_examples_print_what_they_show(page: Path, block: Block, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    shutil.copyfile(minilm(), workdir / "model.safetensors")
    if "model.gguf" in block.code:
        shutil.copyfile(request.getfixturevalue("minilm_gguf"), workdir / "model.gguf")
    setup = [b for b in blocks_of(page) if b.marker == "setup" and b.line < block.line]
    if setup:
        proc = run_python_blocks(setup, workdir, tmp_path / "setup.json")
        assert proc.returncode == 0, f"{rel(page)}: a setup block failed\n{proc.stdout}\n{proc.stderr}"
    steps = _console_steps(block.code)
    assert steps
    # One shell for the whole block, as in a reader's terminal (`echo $?` sees the command before
    # it).  Each command's output is its stdout, then its stderr, then a separator line.
    sep = "--- docs-test: next command ---"
    script = [f'pysafetensors() {{ "{sys.executable}" -m pysafetensors "$@"; }}']
    for command, _ in steps:
        script += ["{", command, '} 2>"$ERR"', f"st=$?; cat \"$ERR\"; printf '\\n%s\\n' '{sep}'; (exit $st)"]
    proc = subprocess.run(["bash", "-c", "\n".join(script)], cwd=workdir, env={**env(), "ERR": str(tmp_path / "err")},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, check=False)
    outputs = proc.stdout.split(f"\n{sep}\n")
    assert len(outputs) == len(steps) + 1 and outputs[-1] == "", proc.stdout
    for (command, expected), output in zip(steps, outputs, strict=False):
        got = output.rstrip("\n")
        assert shows(expected, got), \
            f"{rel(page)}:{block.line}: `{command}` printed\n{got}\n--- the docs show\n{expected}"
