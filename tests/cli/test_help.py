"""Every command's ``--help`` (#31): a one-line description, each argument explained, 2-3
examples in the epilog, and all of it on the generated CLI reference page; and the lazy
registry (#33): ``--help`` and ``--version`` import no command module and no numpy."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pysafetensors.cli import main as cli_main

from .conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of ``parser``."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help or "" for c in action._choices_actions}
            out += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return out


def _all_commands() -> list[tuple[str, str, argparse.ArgumentParser]]:
    """Every command and action parser (``metadata get`` included), from the full parser."""
    found = []
    todo = _subparsers(cli_main.build_parser("*"))
    while todo:
        name, help_text, parser = todo.pop(0)
        found.append((name, help_text, parser))
        todo += [(f"{name} {n}", h, p) for n, h, p in _subparsers(parser)]
    return found


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    epilog = parser.epilog or ""
    _, _, block = epilog.partition("examples:\n")
    return [line.strip() for line in block.splitlines() if line.strip().startswith(("pysafetensors ", "cat "))]


@pytest.mark.parametrize("entry", _all_commands(), ids=lambda e: e[0])
def test_every_command_has_a_description_examples_and_argument_help(
        entry: tuple[str, str, argparse.ArgumentParser]) -> None:
    name, help_text, parser = entry
    assert help_text and "\n" not in help_text, name  # the one line in the commands list
    assert parser.description, name
    assert parser.formatter_class is argparse.RawDescriptionHelpFormatter, name  # examples keep their lines
    examples = _examples(parser)
    assert 2 <= len(examples) <= 3, (name, examples)
    command = name.split()[0]
    for line in examples:
        assert f"pysafetensors {command}" in line, (name, line)
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)


def test_the_registry_help_is_the_commands_own() -> None:
    full = {name: h for name, h, _p in _subparsers(cli_main.build_parser("*"))}
    assert full == {name: entry.help for name, entry in cli_main.COMMANDS.items()}
    lazy = {name: h for name, h, _p in _subparsers(cli_main.build_parser())}
    assert lazy == full


def test_command_in_finds_the_command_past_options_and_their_values() -> None:
    assert cli_main.command_in(["--timeout", "3", "-H", "X: y", "inspect", "f"]) == "inspect"
    assert cli_main.command_in(["-o", "anon=true", "--json", "diff", "a", "b"]) == "diff"
    assert cli_main.command_in(["--help"]) is None
    assert cli_main.command_in(["nonsense", "inspect"]) is None


def test_a_command_hidden_from_the_scan_still_runs(sample: Path) -> None:
    # "-qH" is one cluster taking a value: the scan takes that value for the command's name.
    assert cli_main.command_in(["-qH", "X-A: b", "inspect", str(sample)]) is None
    r = run_cli("-qH", "X-A: b", "inspect", sample, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["tensor_count"] > 0


def test_the_reference_page_holds_every_description_and_example() -> None:
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "_hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.render(cli_main.build_parser("*"))
    for name, _help, parser in _all_commands():
        assert f"`pysafetensors {name}`" in page, name
        for line in _examples(parser):
            assert line in page, (name, line)


@pytest.mark.parametrize("command", sorted(cli_main.COMMANDS))
def test_command_help_exits_0_and_shows_examples(command: str) -> None:
    r = run_cli(command, "--help") if command != "metadata" else run_cli("metadata", "x", "get", "--help")
    assert r.code == 0
    assert "examples:" in r.out


def _modules_after(*argv: str) -> dict[str, Any]:
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stdout\n"
        "from pysafetensors.cli.main import main\n"
        "with redirect_stdout(io.StringIO()) as out:\n"
        f"    rc = main({list(argv)!r})\n"
        "print(json.dumps({'rc': rc, 'out': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                          timeout=120)
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.mark.parametrize("argv", [("--version",), ("--help",)])
def test_version_and_help_import_no_command_and_no_numpy(argv: tuple[str, ...]) -> None:
    result = _modules_after(*argv)
    assert result["rc"] == 0 and "pysafetensors" in result["out"]
    modules = set(result["modules"])
    assert "numpy" not in modules
    assert not {f"pysafetensors.cli.{entry.module}" for entry in cli_main.COMMANDS.values()} & modules
    assert "pysafetensors.format" not in modules and "pysafetensors.handle" not in modules


def test_a_run_imports_only_its_own_command(sample: Path) -> None:
    result = _modules_after("id", str(sample))
    assert result["rc"] == 0
    loaded = {name for name, entry in cli_main.COMMANDS.items() if f"pysafetensors.cli.{entry.module}" in
              result["modules"]}
    assert loaded == {"id"}
