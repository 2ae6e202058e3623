"""``pysafetensors convert IN OUT [--key K] [--no-verify] [--metadata K=V ...] [--json]``.

Exit codes: 0 converted (and verified), 1 verification finding (output bytes differ, or the
output is more than 1% larger than the source storages), 2 error (unsafe or unreadable input).

The conversion is :func:`pysafetensors.tools.convert.convert_checkpoint`'s: a GGUF input
(recognised by its magic; a local file or a URL) is dequantized and written a chunk at a time,
``--dtype f32|f16|bf16|keep`` and ``--hf-names`` apply to it (and only to it), and the report
names what ``--hf-names`` could not map; anything else is a PyTorch or numpy file converted
without running pickle code.  IN may be a pipe (``/dev/stdin``): it is copied to a temporary
file first.  This module parses arguments and renders the report (what came from the input
escaped in text, exact in ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..convert import ConversionReport
from ..errors import SafetensorError, VerificationFailed
from ..gguf.convert import DTYPES
from ..tools.convert import GGUFConversionResult, convert_checkpoint
from ..tools.metadata import parse_assignments
from ._common import escape_json_controls, first_names, gguf_order_warning, plural, progress_factory, terminal_safe
from ._options import report_error

DESCRIPTION = ("Convert a PyTorch checkpoint (.pt/.bin/.pth, zip or legacy), .npy/.npz or a GGUF file to "
               "safetensors, running no pickle code.")


EXAMPLES = """\
examples:
  pysafetensors convert pytorch_model.bin model.safetensors
  pysafetensors convert checkpoint.pt model.safetensors --key state_dict --metadata format=pt
  pysafetensors convert model.gguf model.safetensors --hf-names --dtype bf16
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="IN", help="checkpoint or numpy file to convert (or a pipe: /dev/stdin)")
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
                   help="GGUF input: write the Hugging Face checkpoint transformers loads (names and the layout "
                        "changes llama.cpp made undone, by the architecture's table), reporting what it cannot map")


def render(report: ConversionReport, *, as_json: bool = False) -> str:
    """The report as text (or JSON with stable keys)."""
    if as_json:
        return escape_json_controls(json.dumps(report.to_dict(), indent=2, ensure_ascii=False)) + "\n"
    # Tensor names come from the pickle: a newline or escape sequence must not reach the terminal.
    report = terminal_safe(report)
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


def render_gguf(result: GGUFConversionResult, *, as_json: bool = False) -> str:
    if as_json:
        return escape_json_controls(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)) + "\n"
    result = terminal_safe(result)  # names and the architecture come from the file
    report = result.conversion
    arch = f", {report.architecture}" if report.architecture else ""
    lines = [(f"{result.source} (GGUF v{result.version}{arch}) -> {report.output}: {report.tensors} tensors, "
              f"{report.bytes_written:,} bytes, --dtype {report.dtype}")]
    if report.renamed or report.unmapped:
        line = f"  names: {report.renamed} renamed to Hugging Face names"
        if report.unpermuted:
            line += f"; q/k rows put back in Hugging Face order in {plural(len(report.unpermuted), 'tensor')}"
        lines.append(line)
    if report.layout_changes:
        ops = sorted(set(report.layout_changes.values()))
        lines.append(f"  layout: llama.cpp's changes undone in {plural(len(report.layout_changes), 'tensor')} "
                     f"({', '.join(ops)}; --json lists them)")
    if report.dropped:
        lines.append(f"  left out {plural(len(report.dropped), 'tensor')} llama.cpp generated: "
                     f"{first_names(list(report.dropped))}")
    if report.unmapped:
        shown = first_names(report.unmapped)
        lines.append(f"  warning: could not map {len(report.unmapped)} name(s), kept as they are: {shown}")
    if report.warning:
        lines.append(f"  warning: {report.warning}")
    if report.left_in_gguf_order:
        lines.append("  " + gguf_order_warning(list(report.left_in_gguf_order)))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """0 converted, 1 verification finding, 2 error (one line on stderr)."""
    as_json = bool(getattr(args, "json", False))
    try:
        result = convert_checkpoint(
            args.input, args.output, key=args.key, verify=args.verify,
            metadata=parse_assignments(args.metadata, "--metadata"), dtype=args.dtype, hf_names=args.hf_names,
            progress=progress_factory(args), storage_options=args.remote.for_path(args.input) or None,
            max_input_size=args.remote.max_input_size,
        )
    except VerificationFailed as e:
        sys.stdout.write(render(e.report, as_json=as_json))  # type: ignore[attr-defined]
        return report_error(e, finding=True, secrets=args.remote.secrets())
    except (SafetensorError, OSError, ValueError) as e:
        return report_error(e, bool(getattr(args, "debug", False)), secrets=args.remote.secrets())
    if isinstance(result, GGUFConversionResult):
        sys.stdout.write(render_gguf(result, as_json=as_json))
    else:
        sys.stdout.write(render(result, as_json=as_json))
    return 0
