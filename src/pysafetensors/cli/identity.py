"""``pysafetensors id FILE``: weight-inspect's structural ID, optionally content and per-tensor hashes.

The hashes are :func:`pysafetensors.tools.identity.identify`'s (its docstring gives the
canonical form); this module renders them, each labelled with what it hashes: ``structure
sha256`` (names, dtypes, shapes, metadata: never the values), ``content sha256`` (the tensor
data, with ``--content``; said to be not computed otherwise), ``tensor content sha256``.  A GGUF file's layout is checked only when its data
is hashed (``--content``, ``--tensors``): without them the header is all that is read.
"""

from __future__ import annotations

import argparse

from ..tools.identity import Identity, identify
from ._common import emit, progress_factory, render_json, terminal_safe
from ._inputs import open_input
from ._options import INPUT_HELP


def render_id(result: Identity, fmt: str = "text") -> str:
    if fmt == "json":
        return render_json(result)
    result = terminal_safe(result)
    out = [result.id, f"structure sha256: {result.structure_sha256}"]
    out.append(f"content sha256:   {result.content_sha256 or 'not computed (--content hashes the tensor data)'}")
    if result.canonical is not None:
        out.append(f"canonical: {result.canonical}")
    if result.tensors is not None:
        out.append("tensor content sha256:")
        width = max((len(t.name) for t in result.tensors), default=0)
        out.extend(f"  {t.name.ljust(width)}  {t.content_sha256}" for t in result.tensors)
    return "\n".join(out) + "\n"


EXAMPLES = """\
examples:
  pysafetensors id model.safetensors
  pysafetensors id model.safetensors --content --tensors
  pysafetensors id model.gguf --canonical --json
"""


DESCRIPTION = ("Print the structural ID (weight-inspect's: names, dtypes, shapes and metadata, never the "
               "values; reads the header only) and, with --content/--tensors, hashes of the tensor data.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help=INPUT_HELP)
    p.add_argument("--content", action="store_true",
                   help="also hash the tensor data: every byte after the header (ModelSpec hash_sha256, 0x...)")
    p.add_argument("--tensors", action="store_true", help="also hash each tensor's bytes")
    p.add_argument("--canonical", action="store_true", help="also print the canonical JSON that is hashed")


def run(args: argparse.Namespace) -> int:
    # The structural ID needs only a GGUF's header: a header-only file (weight-inspect's
    # tiny.gguf) has one.  Hashing the data (--content, --tensors) needs a sound layout.
    hashing = bool(args.content or args.tensors)
    with open_input(args.file, args.remote, gguf=True, gguf_layout=hashing) as ckpt:
        result = identify(ckpt, args.content, args.tensors, args.canonical, progress_factory(args))
    emit(render_id(result, "json" if args.json else "text"))
    return 0
