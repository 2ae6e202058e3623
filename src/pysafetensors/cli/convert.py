"""``pysafetensors convert IN OUT [--key K] [--no-verify] [--metadata K=V ...] [--json]``.

Exit codes: 0 converted (and verified), 1 verification finding (output bytes differ, or the
output is more than 1% larger than the source storages), 2 error (unsafe or unreadable input).

A GGUF input (recognised by its magic; a local file or a URL) goes to
:func:`pysafetensors.gguf.convert.convert_gguf` instead: ``--dtype f32|f16|bf16|keep`` and
``--hf-names`` apply to it (and only to it), the tensors are dequantized and written a chunk at
a time, and the report names what ``--hf-names`` could not map.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ..convert import ConversionReport, convert_file
from ..errors import SafetensorError, VerificationFailed
from ..format.dtypes import BY_CODE
from ..gguf.convert import DTYPES, GGUFConversion, convert_gguf, output_code
from ..gguf.header import is_gguf
from ..gguf.reader import GGUFFile
from ..io.redact import redact_url
from ..io.registry import open_source, url_scheme
from ._common import bar_enabled, first_names, progress
from ._inputs import storage_options_for
from .main import report_error
from .metadata import parse_assignments

HELP = ("convert a PyTorch checkpoint (.pt/.bin/.pth, zip or legacy), .npy/.npz or a GGUF file to safetensors, "
        "running no pickle code")


def _parents() -> list[argparse.ArgumentParser]:
    # The dispatcher's shared --json/--quiet/--debug, when it provides them.
    try:
        from .main import common_options  # type: ignore[attr-defined]
    except ImportError:
        return []
    return [common_options()]


def add_parser(subparsers: Any) -> None:
    """Register the ``convert`` subcommand."""
    parents = _parents()
    p = subparsers.add_parser("convert", parents=parents, help=HELP, description=HELP)
    p.add_argument("input", metavar="IN", help="checkpoint or numpy file to convert")
    p.add_argument("output", metavar="OUT", help="safetensors file to write (replaced atomically)")
    p.add_argument("--key", help="convert only this dotted subtree, e.g. state_dict or model.encoder")
    p.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip re-reading the output and comparing it bit for bit with the source")
    p.add_argument("--metadata", action="append", default=[], metavar="KEY=VALUE",
                   help="add a metadata entry (repeatable)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="GGUF input: the dtype of float tensors (default f32: quantized ones dequantized); "
                        "keep writes F32/F16/BF16/F64/I8-I64 tensors as they are and refuses quantized ones")
    p.add_argument("--hf-names", action="store_true",
                   help="GGUF input: Hugging Face tensor names (gguf-py's map for the architecture; llama's q/k "
                        "rows put back), reporting the names it cannot map")
    if not parents:
        p.add_argument("--json", action="store_true", help="print the report as JSON")


def render(report: ConversionReport, *, as_json: bool = False) -> str:
    """The report as text (or JSON with stable keys)."""
    if as_json:
        return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    state = "verified" if report.verified else ("NOT verified" if not report.findings else "verification FAILED")
    summary = (
        f"{report.source} ({report.source_kind}) -> {report.destination}: {report.tensors} tensors, "
        f"{report.tensor_bytes:,} bytes (source storages {report.source_bytes:,} bytes), {state}"
    )
    lines = [summary]
    for removed, kept in sorted(report.removed.items()):
        lines.append(f"  tied: {removed} -> {kept} (kept once, recorded in metadata)")
    if report.skipped:
        shown = first_names(report.skipped)
        lines.append(f"  skipped {len(report.skipped)} non-tensor entries: {shown}")
    lines.extend(f"  finding: {f}" for f in report.findings)
    return "\n".join(lines) + "\n"


def _gguf_source(path: str) -> Any:
    """An open source when ``path`` is a GGUF file (its magic first), else None."""
    if url_scheme(path) is None:
        try:
            with open(path, "rb") as f:
                if not is_gguf(f.read(4)):
                    return None
        except OSError:
            return None  # convert_file says what is wrong with it
    source = open_source(path, None, storage_options_for(path))
    try:
        prefix = bytearray(min(4, source.size))
        source.read_into(0, memoryview(prefix))
    except BaseException:
        source.close()
        raise
    if is_gguf(bytes(prefix)):
        return source
    source.close()
    return None


def render_gguf(report: GGUFConversion, source: str, version: int, *, as_json: bool = False) -> str:
    if as_json:
        d = {"source": source, "source_kind": "gguf", "gguf_version": version, **report.__dict__}
        d["destination"] = d.pop("output")
        return json.dumps(d, indent=2, ensure_ascii=False) + "\n"
    arch = f", {report.architecture}" if report.architecture else ""
    lines = [(f"{source} (GGUF v{version}{arch}) -> {report.output}: {report.tensors} tensors, "
              f"{report.bytes_written:,} bytes, --dtype {report.dtype}")]
    if report.renamed or report.unmapped:
        line = f"  names: {report.renamed} renamed to Hugging Face names"
        if report.unpermuted:
            line += f"; q/k rows put back in Hugging Face order in {len(report.unpermuted)}"
        lines.append(line)
    if report.unmapped:
        shown = first_names(report.unmapped)
        lines.append(f"  could not map {len(report.unmapped)} name(s), kept as they are: {shown}")
    return "\n".join(lines) + "\n"


def _run_gguf(args: argparse.Namespace, source: Any, as_json: bool) -> int:
    if args.key is not None:
        source.close()
        raise ValueError("--key selects a subtree of a pickle checkpoint; a GGUF file is converted whole")
    shown = redact_url(os.fspath(args.input))
    try:
        with GGUFFile(source) as gguf:
            dtype = args.dtype or "f32"
            total = 0
            for t in gguf.header.tensors:  # also refuses --dtype keep on a quantized tensor, before writing
                total += t.n_elements * BY_CODE[output_code(t.type_name, dtype, t.name)].bits // 8
            extra = parse_assignments(args.metadata, "--metadata")
            with progress(total, "converting", bar_enabled(args)) as bar:
                report = convert_gguf(gguf, args.output, dtype=dtype, hf=args.hf_names, progress=bar.update,
                                      durable=True, metadata=extra)
    except SafetensorError as e:
        if shown not in str(e):
            e.args = (f"{shown}: {e}",)
        raise
    sys.stdout.write(render_gguf(report, shown, gguf.version, as_json=as_json))
    return 0


def run(args: argparse.Namespace) -> int:
    """0 converted, 1 verification finding, 2 error (one line on stderr)."""
    as_json = bool(getattr(args, "json", False))
    try:
        source = _gguf_source(args.input)
        if source is not None:
            return _run_gguf(args, source, as_json)
        if args.dtype is not None or args.hf_names:
            raise ValueError("--dtype and --hf-names apply to GGUF inputs; this input is not a GGUF file")
    except (SafetensorError, OSError, ValueError) as e:
        return report_error(e, bool(getattr(args, "debug", False)))
    try:
        report = convert_file(
            args.input, args.output, key=args.key, verify=args.verify, metadata=parse_assignments(args.metadata, "--metadata")
        )
    except VerificationFailed as e:
        sys.stdout.write(render(e.report, as_json=as_json))  # type: ignore[attr-defined]
        return report_error(e, finding=True)
    except (SafetensorError, OSError, ValueError) as e:
        return report_error(e, bool(getattr(args, "debug", False)))
    sys.stdout.write(render(report, as_json=as_json))
    return 0
