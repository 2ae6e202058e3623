"""``pysafetensors validate FILE``: check every format rule and report every problem found.

The checking is ``pysafetensors.tools.validate`` (safetensors files, sharded checkpoints, GGUF
files by their magic); this module parses arguments and renders.
"""

from __future__ import annotations

import argparse

from ..io.redact import redact_url
from ..tools.validate import Problem, ValidateResult, validate
from ._common import emit, plural, render_json, terminal_safe
from ._options import INPUT_HELP, RemoteOptions

__all__ = ["Problem", "ValidateResult", "add_arguments", "compute_validate", "render_validate", "run"]


def compute_validate(path: str, remote: RemoteOptions | None = None) -> ValidateResult:
    """``validate``'s result for ``path``, with the options the command line gave (``args.remote``:
    ``--timeout``, ``-H``, ``-o``, ``--max-input-size``)."""
    remote = remote or RemoteOptions()
    r = validate(path, remote.for_path(path), max_input_size=remote.max_input_size)
    r.path = redact_url(r.path)  # a signed URL's query string or a password is never printed
    return r


def render_validate(r: ValidateResult, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(r)
    r = terminal_safe(r)
    out = []
    for kind, items in (("problem", r.problems), ("warning", r.warnings)):
        for p in items:
            where = (f" file {p.file}" if p.file else "") + (f" tensor {p.tensor!r}" if p.tensor is not None else "")
            offs = f" data_offsets {p.data_offsets}" if p.data_offsets is not None else ""
            out.append(f"{r.path}: {kind} [{p.code}]{where}{offs}: {p.message}")
    if r.valid:
        shards = f"{plural(len(r.files), 'shard')}, " if r.files else f"header {r.header_size or 0:,} bytes, "
        out.append(f"{r.path}: valid ({plural(r.tensor_count or 0, 'tensor')}, {shards}{r.file_size:,} bytes)")
    else:
        out.append(f"{r.path}: INVALID ({len(r.problems)} problem{'s' if len(r.problems) != 1 else ''})")
    return "\n".join(out) + "\n"


EXAMPLES = """\
examples:
  pysafetensors validate model.safetensors
  pysafetensors validate sharded/model.safetensors.index.json --json
  cat model.safetensors | pysafetensors validate /dev/stdin
"""


DESCRIPTION = ("Check every rule of the format (header, dtypes, offsets, coverage of the data, an index's "
               "shards) and list each problem and warning; exit 0 valid, 1 invalid, 2 unreadable.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help=INPUT_HELP)


def run(args: argparse.Namespace) -> int:
    r = compute_validate(args.file, args.remote)
    emit(render_validate(r, "json" if args.json else "text"))
    return 0 if r.valid else 1
