"""mkdocs hook: the CLI reference page, written from the argparse parser at build time.

The page is made from the same ``argparse`` objects that ``pysafetensors --help`` prints, so it
cannot drift from the command line: ``pysafetensors.cli.main.build_parser()`` is called and the
parser is walked (its argument groups, and each subparsers action's parsers, recursively) rather
than the CLI's source being read.  A command added to the CLI appears here on the next build.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from mkdocs.structure.files import File, Files

PAGE = "reference/cli.md"
WIDTH = 80  # usage lines are wrapped at this width (the page's code column), whatever the terminal

_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#"})


def _md(text: str) -> str:
    """Plain text (help strings, metavars) shown literally in Markdown."""
    return " ".join(text.split()).translate(_MD_SPECIAL)


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    # formatter_class is typed as taking only prog; every argparse formatter takes width too.
    return cast(Any, parser.formatter_class)(prog=parser.prog, width=WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    fmt = _formatter(parser)
    fmt.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return fmt.format_help().strip()


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    try:  # argparse's own %(default)s / %(choices)s / %(prog)s expansion
        return str(_formatter(parser)._expand_help(action))
    except (KeyError, TypeError, ValueError):
        return str(action.help)


def _invocation(action: argparse.Action) -> str:
    """How the argument is written: ``-o, --output PATH`` or ``FILE``."""
    fmt = argparse.HelpFormatter(prog="x")
    return fmt._format_action_invocation(action)


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse._SubParsersAction]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield action


def _children(action: argparse._SubParsersAction) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) per subcommand, aliases folded into their parser."""
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    seen: dict[int, tuple[str, str, argparse.ArgumentParser]] = {}
    for name, sub in action.choices.items():
        if id(sub) not in seen:
            seen[id(sub)] = (name, helps.get(name, ""), sub)
    return list(seen.values())


def _arguments_table(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            notes = _help(parser, action)
            default = action.default
            extra = []
            if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
                extra.append("one of: " + ", ".join(str(c) for c in action.choices))
            if (
                default not in (None, False, argparse.SUPPRESS, [])
                and action.option_strings
                and action.nargs != 0
                and "%(default)" not in (action.help or "")
            ):
                extra.append(f"default: {default}")
            cells = [_md(notes)] + [_md(e) for e in extra]
            rows.append(f"| `{_invocation(action)}` | {'; '.join(c for c in cells if c)} |")
        if rows:
            lines += [f"**{_md(group.title or 'arguments')}**", "", "| argument | description |", "|---|---|", *rows, ""]
    return lines


def _section(parser: argparse.ArgumentParser, level: int, path: str, summary: str = "") -> list[str]:
    """The page section of one parser; ``path`` is how it is called (``pysafetensors metadata set``),
    which can differ from its ``prog`` (argparse puts a parent's positionals in a child's prog)."""
    lines = [f"{'#' * level} `{path}`", ""]
    description = parser.description or summary
    if description:
        lines += [_md(description), ""]
    lines += ["```text", _usage(parser), "```", ""]
    lines += _arguments_table(parser)
    if parser.epilog:  # examples and notes, laid out by hand (RawDescriptionHelpFormatter): kept verbatim
        lines += ["```text", parser.epilog.strip("\n"), "```", ""]
    for action in _subparsers(parser):
        children = _children(action)
        lines += ["| command | what it does |", "|---|---|"]
        lines += [f"| [`{name}`](#{_anchor(f'{path} {name}')}) | {_md(h)} |" for name, h, _sub in children]
        lines.append("")
        for name, h, sub in children:
            lines += _section(sub, min(level + 1, 6), f"{path} {name}", h)
    return lines


def _anchor(path: str) -> str:
    """The id Python-Markdown's toc gives a heading `` `path` ``: lowercase, spaces to dashes."""
    return "-".join(path.lower().split())


def render(parser: argparse.ArgumentParser) -> str:
    head = [
        "# Command-line reference",
        "",
        "Generated from the command's argparse parser when the site is built, so it says what",
        "`pysafetensors --help` says. The [command-line guide](../guides/cli.md) shows each",
        "command at work and explains exit codes, inputs and outputs.",
        "",
    ]
    return "\n".join(head + _section(parser, 2, parser.prog))


def build_parser(root: Path) -> argparse.ArgumentParser:
    src = str(root / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    from pysafetensors.cli.main import build_parser as build

    return build("*")  # every command's module loaded: the full parsers, not the --help stand-ins


def on_files(files: Files, config: Any) -> Files:
    root = Path(config["config_file_path"]).resolve().parent
    saved = {k: os.environ.get(k) for k in ("NO_COLOR", "PYTHON_COLORS")}
    os.environ["NO_COLOR"] = "1"  # Python 3.14's argparse colours help; the page wants plain text
    os.environ["PYTHON_COLORS"] = "0"
    try:
        content = render(build_parser(root))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    files.append(File.generated(config, PAGE, content=content))
    return files
