"""Command-line entry point: parse arguments, dispatch to a command module, map errors to exit codes.

Adding a command (the registry)
-------------------------------
Each command lives in its own module ``pysafetensors/cli/<module>.py`` exposing two functions::

    def add_parser(subparsers) -> None:   # subparsers.add_parser("name", parents=..., help=...)
    def run(args) -> int:                 # 0 ok, 1 a finding, 2 an error

``add_parser`` may register more than one subcommand name; every name it adds is routed to
that module's ``run``.  Pass ``parents=[common_options()]`` so ``--json/--quiet/--debug`` work
after the subcommand too.  To add a command, append its module name to ``COMMANDS`` below -
that is the only line to touch.  A listed module that does not exist (yet)
keeps its name reserved: the command is shown and answers "not available yet" with exit 2.

Exit codes: 0 ok, 1 a finding (diff found differences, validate found problems, ``metadata
get`` of a missing key), 2 an error (unreadable input, bad arguments).  Every error becomes its
exit code and its one line on stderr in :func:`report_error` (commands that catch an error to
choose a code, like ``convert``, call it too): URLs in the message lose their credentials and
query strings, control characters are escaped; the traceback is shown only with ``--debug``.
Python warnings (numpy's floating-point ones included) never reach stderr.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .. import __version__
from ..errors import HeaderError, MissingDependency, SafetensorError
from ..io.redact import redact_text
from ._common import escape_text
from ._inputs import command_options

# Module names under pysafetensors.cli, in the order commands are listed in --help.
COMMANDS: tuple[str, ...] = (
    "inspect",
    "identity",  # the `id` command
    "diff",
    "validate",
    "metadata",
    "stats",
    "shard",
    "merge",
    "convert",
    "view",
)

PROG = "pysafetensors"


class UsageError(Exception):
    """Bad command-line arguments (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors stay one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


_TIMEOUT_HELP = "total seconds allowed per HTTP request for http(s) inputs (default: the library's)"


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts, before or after its name."""
    p = argparse.ArgumentParser(add_help=False)
    # SUPPRESS keeps a subcommand's unset option from overwriting one given before it.
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON")
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    p.add_argument("--timeout", type=_seconds, default=argparse.SUPPRESS, metavar="SECONDS", help=_TIMEOUT_HELP)
    return p


def _reserve(subparsers: Any, name: str) -> None:
    p = subparsers.add_parser(name, parents=[common_options()], help=f"({name}: not available in this build)")
    p.add_argument("rest", nargs=argparse.REMAINDER)


def _not_available(name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        raise UsageError(f"{PROG} {name}: error: this command is not available in this build yet")

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Inspect, check, compare and edit safetensors files.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS", help=_TIMEOUT_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module_name in COMMANDS:
        before = set(subparsers.choices)
        try:
            module = importlib.import_module(f"{__package__}.{module_name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{module_name}":
                raise
            _reserve(subparsers, module_name)
            subparsers.choices[module_name].set_defaults(_run=_not_available(module_name))
            continue
        module.add_parser(subparsers)
        for name in set(subparsers.choices) - before:
            subparsers.choices[name].set_defaults(_run=module.run)
    return parser


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # Notes added on the way up (an S3 upload an interrupted save could not abort) belong to the line.
    text = "; ".join([text, *getattr(exc, "__notes__", ())])
    return " ".join(line.strip() for line in text.splitlines())


def _in_words(exc: BaseException) -> str:
    """The error's one line: a HeaderError that has a user's wording (``plain``: "not a
    safetensors file (...)", "truncated: ...") says that, after the input it is about, rather
    than upstream's wording the Python exception keeps; anything else its message."""
    plain = getattr(exc, "plain", None)
    if isinstance(exc, HeaderError) and plain:
        where = getattr(exc, "input_name", None)
        return f"{where}: {plain}" if where else plain
    return _one_line(exc)


def _stderr_line(text: str) -> None:
    if sys.stderr is not None:
        print(text, file=sys.stderr)


def safe_message(text: str) -> str:
    """A message fit for the terminal: URLs without secrets, control characters escaped."""
    return escape_text(redact_text(text))


def report_error(exc: BaseException, debug: bool = False, *, finding: bool = False) -> int:
    """THE error -> exit-code path: one line on stderr, the traceback with ``--debug``.

    Returns 1 for a finding (``finding=True``: a missing key, a failed verification), 2 for an
    error, and 2 for an unexpected exception (a bug: said so, with a hint to rerun with --debug).
    """
    if debug and sys.stderr is not None:
        traceback.print_exc()
    if finding:
        _stderr_line(f"{PROG}: {safe_message(_one_line(exc))}")
        return 1
    if isinstance(exc, (SafetensorError, MissingDependency, OSError, ValueError)):
        _stderr_line(f"{PROG}: error: {safe_message(_in_words(exc))}")
    else:
        _stderr_line(f"{PROG}: internal error: {type(exc).__name__}: {safe_message(_one_line(exc))} (rerun with --debug)")
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(args_list)
        except SystemExit as e:  # --help / --version
            return int(e.code or 0) if not isinstance(e.code, str) else 2
        if getattr(args, "_run", None) is None:
            parser.print_help(sys.stderr)
            return 2
        for flag in ("json", "quiet", "debug"):
            if not hasattr(args, flag):
                setattr(args, flag, False)
        if not hasattr(args, "timeout"):
            args.timeout = None
        debug = bool(args.debug)
        if sys.stdout is None:  # started with stdout closed (`... >&-`)
            raise UsageError(f"{PROG}: error: standard output is closed; nowhere to write the result")
        with warnings.catch_warnings(), command_options(args.timeout):
            if not debug:
                warnings.simplefilter("ignore")
            return int(args._run(args))
    except KeyboardInterrupt as e:
        notes = getattr(e, "__notes__", ())
        _stderr_line(f"{PROG}: interrupted" + "".join(f"; {safe_message(' '.join(n.split()))}" for n in notes))
        return 130
    except BrokenPipeError:
        # `pysafetensors inspect x | head` is not an error; keep Python's exit-time flush quiet.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 0
    except UsageError as e:
        _stderr_line(safe_message(str(e)))
        return 2
    except Exception as e:  # noqa: BLE001 - every error, a bug included, is one line unless --debug
        return report_error(e, debug)


if __name__ == "__main__":
    raise SystemExit(main())
