"""Command-line entry point: parse arguments, dispatch to a command module, map errors to exit codes.

Adding a command (the registry)
-------------------------------
Each command lives in its own module ``pysafetensors/cli/<module>.py`` which declares::

    DESCRIPTION = "..."                   # the paragraph at the top of its --help
    EXAMPLES = "examples: ..."            # the epilog: 2-3 command lines, kept as written
    def add_arguments(parser) -> None:    # its own arguments (and actions), each with a help
    def run(args) -> int:                 # 0 ok, 1 a finding, 2 an error

and gets one row in :data:`COMMANDS` (its name, its module, its one-line help): that is the
only line to touch here.  The registry builds the command's parser (``command_parser`` in
``cli/_options.py``: the common options ``--json/--quiet/--debug`` and the remote options
after the subcommand too, the description, the examples) and hands it to ``add_arguments``;
``tests/cli/test_help.py`` checks every command has a description, examples and a help for
each argument.

The registry is lazy: ``pysafetensors --help`` and ``--version`` list :data:`COMMANDS` without
importing any command module (nor numpy, nor the format core), and a run imports only the
module of the command it runs.

Exit codes: 0 ok, 1 a finding, 2 an error; every error becomes its code and one line on stderr
in :func:`~._options.report_error`.  Python warnings (numpy's floating-point ones included)
never reach stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .. import __version__
from ._options import (
    PROG,
    Parser,
    UsageError,
    add_remote_options,
    command_parser,
    finish_args,
    report_error,
    safe_message,
    stderr_line,
)


class Command(NamedTuple):
    """One row of the registry: the module under ``pysafetensors.cli`` and the one-line help."""

    module: str
    help: str


# Command name -> (module, one-line help), in the order commands are listed in --help.
COMMANDS: dict[str, Command] = {
    "inspect": Command("inspect", "sizes, parameter counts, metadata, tensors"),
    "id": Command("identity", "structural ID (weight-inspect) and content hashes"),
    "diff": Command("diff", "compare two checkpoints (exit 1 if different)"),
    "validate": Command("validate", "check every format rule of a safetensors or GGUF file (exit 1 if invalid)"),
    "metadata": Command("metadata", "get, set, unset or strip __metadata__"),
    "stats": Command("stats", "per-tensor min/max/mean/std, NaN/Inf/zero counts"),
    "shard": Command("shard", "split into Hugging Face shards + index"),
    "merge": Command("merge", "join a sharded checkpoint into one file"),
    "convert": Command("convert", "convert a checkpoint (pickle, npz, GGUF) to safetensors"),
    "view": Command("view", "show a checkpoint (or compare two) in the browser, or export an HTML report"),
}

# Top-level options that take a value: the word after them is never the command's name.
_VALUED = frozenset({"--timeout", "-H", "--header", "-o", "--storage-option", "--max-input-size"})


def command_in(argv: Sequence[str]) -> str | None:
    """The registered command ``argv`` runs (the first word that is not an option or an
    option's value), or None (``--help``, ``--version``, no command, an unknown word)."""
    it = iter(argv)
    for word in it:
        if word == "--":
            break
        if word in _VALUED:
            next(it, None)
        elif not word.startswith("-") or word == "-":
            return word if word in COMMANDS else None
    return None


def _reserve(subparsers: argparse._SubParsersAction[Parser], name: str, help_text: str) -> None:
    """A stand-in for a command whose module is not loaded: listed in --help, never run."""
    p = subparsers.add_parser(name, help=help_text, add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)


def _load(subparsers: argparse._SubParsersAction[Parser], name: str, entry: Command) -> None:
    """Import the module of ``name`` and build its parser from what the module declares, routed
    to its ``run``."""
    module = importlib.import_module(f"{__package__}.{entry.module}")
    parser = command_parser(subparsers, name, help=entry.help, description=module.DESCRIPTION,
                            epilog=module.EXAMPLES)
    module.add_arguments(parser)
    parser.set_defaults(_run=module.run)


def build_parser(load: str | Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser.  ``load``: the command(s) whose modules are imported and whose
    full parsers are built (``"*"``: all of them, as the CLI reference page needs); every other
    command is a listed stand-in (its name and help)."""
    wanted = set(COMMANDS) if load == "*" else {load} if isinstance(load, str) else set(load or ())
    parser = Parser(prog=PROG, description="Inspect, check, compare and edit safetensors files.",
                    epilog="Run 'pysafetensors COMMAND --help' for a command's options and examples.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    add_remote_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, entry in COMMANDS.items():
        if name in wanted:
            _load(subparsers, name, entry)
        else:
            _reserve(subparsers, name, entry.help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    secrets: Callable[[], list[str]] = list  # the values never to print, known once the options are parsed
    try:
        parser = build_parser(command_in(args_list))
        try:
            args = parser.parse_args(args_list)
            if getattr(args, "_run", None) is None and getattr(args, "command", None) in COMMANDS:
                # argparse found a command command_in did not (an option cluster such as -qH
                # hid it): parse again with that command's own parser.
                parser = build_parser(args.command)
                args = parser.parse_args(args_list)
        except SystemExit as e:  # --help / --version
            return int(e.code or 0) if not isinstance(e.code, str) else 2
        if getattr(args, "_run", None) is None:
            parser.print_help(sys.stderr)
            return 2
        finish_args(args)
        debug = bool(args.debug)
        secrets = args.remote.secrets
        if sys.stdout is None:  # started with stdout closed (`... >&-`)
            raise UsageError(f"{PROG}: error: standard output is closed; nowhere to write the result")
        with warnings.catch_warnings():
            if not debug:
                warnings.simplefilter("ignore")
            return int(args._run(args))
    except KeyboardInterrupt as e:
        notes = getattr(e, "__notes__", ())
        stderr_line(f"{PROG}: interrupted" + "".join(f"; {safe_message(' '.join(n.split()))}" for n in notes))
        return 130
    except BrokenPipeError:
        # `pysafetensors inspect x | head` is not an error; keep Python's exit-time flush quiet.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except UsageError as e:
        stderr_line(safe_message(str(e)))
        return 2
    except Exception as e:  # noqa: BLE001 - every error, a bug included, is one line unless --debug
        return report_error(e, debug, secrets=secrets())


if __name__ == "__main__":
    raise SystemExit(main())
