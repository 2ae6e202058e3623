"""What every command shares before it runs: the common options, the remote-input options object,
usage errors and the one error -> exit-code path.

This module is light on purpose (the standard library, :mod:`pysafetensors.errors` and what an
error being reported needs, imported then): ``cli/main.py`` imports it to print ``--help`` and
``--version`` without numpy or the format core, and every command imports it instead of
``cli/main`` (which imports the commands: importing it back would be a cycle).

``--timeout``, ``-H/--header``, ``-o/--storage-option`` and ``--max-input-size`` are parsed once
into :class:`RemoteOptions` (``args.remote``), which the commands pass explicitly to whatever
opens an input or an output (:meth:`RemoteOptions.for_path`: which options, and the Hugging Face
token, go to which kind of URL); :meth:`RemoteOptions.secrets` are never printed.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, NoReturn

from ..errors import HeaderError, MissingDependency, SafetensorError

PROG = "pysafetensors"

__all__ = [
    "PROG",
    "Parser",
    "RemoteOptions",
    "UsageError",
    "common_options",
    "escape_text",
    "finish_args",
    "hf_token",
    "report_error",
    "safe_message",
]


class UsageError(Exception):
    """Bad command-line arguments (exit 2)."""


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so errors stay one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


# ---------------------------------------------------------------------------------------------
# Terminal safety (here rather than in _common, which imports the tools: an error report needs it)

# C0 controls, DEL, C1 controls, and the invisible bidi/line controls that reorder or break
# what a terminal shows (U+202E right-to-left override makes "txt.exe" read "exe.txt").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group(0)
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def escape_text(text: str) -> str:
    """``text`` safe to print on a terminal: control and bidi characters written as escapes.

    A tensor name or metadata value holding a newline cannot forge output lines, and an
    escape sequence (``\\x1b]0;...\\x07`` sets the window title) is shown, not obeyed.
    """
    return _UNSAFE.sub(_escape_char, text)


def escape_texts(texts: Iterable[str]) -> list[str]:
    """:func:`escape_text` of each of ``texts``, in order.  One scan over them all first: the
    usual input (names without a control character) costs one regex search, not one per text."""
    texts = list(texts)
    if _UNSAFE.search(" ".join(texts)) is None:  # a space is safe: any unsafe char is in a text
        return texts
    return [_UNSAFE.sub(_escape_char, t) for t in texts]


# ---------------------------------------------------------------------------------------------
# Option values


def _seconds(text: str) -> float:
    """``--timeout``: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _size(text: str) -> int:
    """``--max-input-size``: bytes, or decimal units as ``--max-shard-size`` takes (5GB, 500MB)."""
    from ..format.index import parse_size  # only when the option is given: the format core is not light

    try:
        value = parse_size(text.strip())
    except (ValueError, SafetensorError) as e:
        raise argparse.ArgumentTypeError(f"expected a size such as 5GB, 500MB or a number of bytes, got {text!r}") from e
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a size > 0, got {text!r}")
    return value


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)


def _header(text: str) -> tuple[str, str]:
    """``-H 'Name: value'`` as (name, value).  The error never echoes the value (it may be a secret)."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _HEADER_NAME.match(name):
        shown = name if _HEADER_NAME.match(name) else "..."
        raise argparse.ArgumentTypeError(f"expected 'Name: value' (got a value starting {shown!r}, not shown)")
    if any(c in value for c in "\r\n\0"):
        raise argparse.ArgumentTypeError(f"the value of header {name!r} holds a line break or NUL")
    return name, value


def _storage_option(text: str) -> tuple[str, str]:
    """``-o KEY=VALUE`` as (dotted key, value)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (a.b=v for a nested option), got key {key or '...'!r}")
    return key, value


_SECRET_KEY = re.compile(r"(key|secret|token|password|passwd|credential|session|auth|signature)", re.IGNORECASE)

_TIMEOUT_HELP = "total seconds allowed per HTTP request for http(s) inputs (default: the library's)"
_HEADER_HELP = ("extra HTTP request header for http(s) URLs, e.g. 'Authorization: Bearer hf_...' (repeatable); "
                "dropped on a redirect to another host, never printed")
_OPTION_HELP = ("fsspec storage option for s3://, gs://, memory://... URLs, e.g. endpoint_url=http://minio:9000, "
                "profile=dev, anon=true; a.b=v nests (repeatable; not for http(s))")
_MAX_INPUT_HELP = ("largest streamed input (a pipe such as /dev/stdin) read before giving up: bytes or 5GB, "
                   "500MB... (decimal; default: the library's)")


def common_options() -> argparse.ArgumentParser:
    """Options every subcommand accepts, before or after its name (its ``parents=``)."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("common options")
    # SUPPRESS keeps a subcommand's unset option from overwriting one given before it.
    g.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON")
    g.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars")
    g.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors")
    add_remote_options(g, default=argparse.SUPPRESS)
    return p


INPUT_HELP = "a .safetensors or .gguf file, an index JSON, a checkpoint directory, a URL or a pipe"


def command_parser(subparsers: Any, name: str, *, help: str, description: str, epilog: str,
                   parents: Iterable[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    """Register subcommand ``name`` with the common options (then those of ``parents``) and its
    examples (``epilog``) kept as written: every command's and action's parser starts here, so
    ``--help`` looks the same everywhere."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, parents=[common_options(), *parents], help=help, description=description, epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_remote_options(p: Any, default: Any = None) -> None:
    """``--timeout``, ``-H``, ``-o``, ``--max-input-size`` on ``p`` (a parser or an argument group).

    Repeatable ones given after the subcommand's name replace those given before it (argparse
    parses the subcommand into a namespace of its own): give them all on one side."""
    p.add_argument("--timeout", type=_seconds, default=default, metavar="SECONDS", help=_TIMEOUT_HELP)
    p.add_argument("-H", "--header", dest="headers", action="append", type=_header, default=default,
                   metavar="'NAME: VALUE'", help=_HEADER_HELP)
    p.add_argument("-o", "--storage-option", dest="storage_options", action="append", type=_storage_option,
                   default=default, metavar="KEY=VALUE", help=_OPTION_HELP)
    p.add_argument("--max-input-size", type=_size, default=default, metavar="SIZE", help=_MAX_INPUT_HELP)


# ---------------------------------------------------------------------------------------------
# Hugging Face token


_TRUE = {"1", "on", "yes", "true"}


def _hf_token_file() -> str:
    """Where ``huggingface_hub`` login writes the token: $HF_TOKEN_PATH, else $HF_HOME/token, else
    $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token."""
    if os.environ.get("HF_TOKEN_PATH"):
        return os.path.expanduser(os.environ["HF_TOKEN_PATH"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "token")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(cache), "huggingface", "token")


def hf_token() -> str | None:
    """The Hugging Face token this user set up (``HF_TOKEN``, the older ``HUGGING_FACE_HUB_TOKEN``,
    else the login token file), or None; None whenever ``HF_HUB_DISABLE_IMPLICIT_TOKEN`` is set."""
    if os.environ.get("HF_HUB_DISABLE_IMPLICIT_TOKEN", "").strip().lower() in _TRUE:
        return None
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        token = os.environ.get(var, "").strip()
        if token:
            return token
    try:
        with open(_hf_token_file(), encoding="utf-8") as f:
            token = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def is_hf_url(url: str) -> bool:
    """Whether ``url`` is on the Hugging Face Hub: https://huggingface.co, https://hf.co, or the
    origin (scheme, host and port) of ``HF_ENDPOINT`` (a private Hub, a mirror)."""
    from ..io.http_options import origin as origin_of  # at run time only: --help never needs it

    origin = origin_of(url)
    if origin in (("https", "huggingface.co", 443), ("https", "hf.co", 443)):
        return True
    endpoint = os.environ.get("HF_ENDPOINT", "").strip()
    return bool(endpoint) and origin == origin_of(endpoint)


# ---------------------------------------------------------------------------------------------
# The options object


def _nested(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``[("a.b", "v"), ("c", "w")]`` -> ``{"a": {"b": "v"}, "c": "w"}``; a key set as both a value
    and a group of options (``a=1`` and ``a.b=2``) is a usage error."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        *groups, last = key.split(".")
        node = out
        for g in groups:
            child = node.setdefault(g, {})
            if not isinstance(child, dict):
                raise UsageError(f"{PROG}: error: -o {key}=...: {g!r} was already given a value")
            node = child
        if isinstance(node.get(last), dict):
            raise UsageError(f"{PROG}: error: -o {key}=...: {key!r} already holds nested options")
        node[last] = value
    return out


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for k, v in tree.items():
        if isinstance(v, Mapping):
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


class RemoteOptions(NamedTuple):
    """How this command line reaches remote inputs and outputs (``args.remote``); immutable (a
    NamedTuple: no dataclasses import on the way to ``--help``).

    Attributes:
        timeout: ``--timeout``: seconds per HTTP request, or None for the library's default.
        headers: ``-H`` headers, in the order given, for http(s) URLs.
        storage_options: ``-o`` options, nested, for fsspec URLs.
        max_input_size: ``--max-input-size`` in bytes, or None for the library's default cap on
            streamed inputs.
    """

    timeout: float | None = None
    headers: tuple[tuple[str, str], ...] = ()
    storage_options: Mapping[str, Any] = _NO_OPTIONS
    max_input_size: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RemoteOptions:
        """The options parsed into ``args`` (absent ones: None / empty)."""
        return cls(
            timeout=getattr(args, "timeout", None),
            headers=tuple(getattr(args, "headers", None) or ()),
            storage_options=_nested(getattr(args, "storage_options", None) or ()),
            max_input_size=getattr(args, "max_input_size", None),
        )

    def for_path(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """The ``storage_options`` for opening ``path``: for an http(s) URL ``timeout`` and
        ``headers`` (with the Hugging Face token on a Hub URL), for another URL the ``-o``
        options, for a local path nothing.  Raises UsageError for ``-o`` with an http(s) URL."""
        from ..io.registry import url_scheme  # at run time only: the io package is not light

        text = os.fspath(path)
        scheme = url_scheme(text)
        if scheme in ("http", "https"):
            if self.storage_options:
                raise UsageError(
                    f"{PROG}: error: -o/--storage-option sets fsspec options (s3://, gs://, memory://...); "
                    "http(s) URLs take -H/--header 'Name: value' and --timeout instead")
            options: dict[str, Any] = {}
            if self.timeout is not None:
                options["timeout"] = self.timeout
            headers = dict(self.headers)
            if not any(k.lower() == "authorization" for k in headers) and is_hf_url(text):
                token = hf_token()
                if token:
                    headers["Authorization"] = f"Bearer {token}"
            if headers:
                options["headers"] = headers
            return options
        if scheme is None or scheme == "file":
            return {}
        return _copy_tree(self.storage_options)

    def secrets(self) -> list[str]:
        """Values never to print: every header value (and its parts after a scheme word such
        as ``Bearer``), the Hugging Face token, and credential-like ``-o`` values."""
        out: list[str] = []
        for _name, value in self.headers:
            out.append(value)
            out += value.split()[1:]
        token = hf_token()
        if token:
            out.append(token)
        out += [str(v) for k, v in _leaves(self.storage_options) if _SECRET_KEY.search(k)]
        return sorted({s for s in out if len(s) >= 4}, key=len, reverse=True)


def _copy_tree(tree: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of nested option dicts: the callee may keep or change what it is given."""
    return {k: _copy_tree(v) if isinstance(v, Mapping) else v for k, v in tree.items()}


def finish_args(args: argparse.Namespace) -> argparse.Namespace:
    """Fill in the flags a run did not give (False) and attach the remote options as ``args.remote``."""
    for flag in ("json", "quiet", "debug"):
        if not hasattr(args, flag):
            setattr(args, flag, False)
    args.remote = RemoteOptions.from_args(args)
    return args


# ---------------------------------------------------------------------------------------------
# Errors


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # Notes added on the way up (an S3 upload an interrupted save could not abort) belong to the line.
    text = "; ".join([text, *getattr(exc, "__notes__", ())])
    return " ".join(line.strip() for line in text.splitlines())


def _in_words(exc: BaseException) -> str:
    """The error's one line: a HeaderError that has a user's wording (``plain``: "not a
    safetensors file (...)", "truncated: ...") says that, after the input it is about, rather
    than upstream's wording the Python exception keeps; anything else its message."""
    if isinstance(exc, HeaderError) and exc.plain:
        return f"{exc.input_name}: {exc.plain}" if exc.input_name else exc.plain
    return _one_line(exc)


def stderr_line(text: str) -> None:
    """One line on stderr (nothing when the process has no stderr)."""
    if sys.stderr is not None:
        print(text, file=sys.stderr)


def safe_message(text: str, secrets: Iterable[str] = ()) -> str:
    """A message fit for the terminal: URLs without secrets, ``secrets`` (header values, tokens)
    replaced by ``***``, control characters escaped."""
    from ..io.redact import redact_text  # only when something is reported

    for secret in secrets:
        text = text.replace(secret, "***")
    return escape_text(redact_text(text))


def report_error(exc: BaseException, debug: bool = False, *, finding: bool = False,
                 secrets: Iterable[str] = ()) -> int:
    """THE error -> exit-code path: one line on stderr, the traceback with ``--debug``.

    Returns 1 for a finding (``finding=True``: a missing key, a failed verification), 2 for an
    error, and 2 for an unexpected exception (a bug: said so, with a hint to rerun with --debug).
    ``secrets`` (``args.remote.secrets()``) are written as ``***``.
    """
    secrets = list(secrets)
    if debug and sys.stderr is not None:
        import traceback

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        for secret in secrets:
            text = text.replace(secret, "***")
        sys.stderr.write(text)
    if finding:
        stderr_line(f"{PROG}: {safe_message(_one_line(exc), secrets)}")
        return 1
    if isinstance(exc, (SafetensorError, MissingDependency, OSError, ValueError)):
        stderr_line(f"{PROG}: error: {safe_message(_in_words(exc), secrets)}")
    else:
        stderr_line(f"{PROG}: internal error: {type(exc).__name__}: {safe_message(_one_line(exc), secrets)} "
                    "(rerun with --debug)")
    return 2
