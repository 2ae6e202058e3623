"""``pysafetensors convert IN OUT [--key K] [--no-verify] [--metadata K=V ...] [--json]``.

Exit codes: 0 converted (and verified), 1 verification finding (output bytes differ, or the
output is more than 1% larger than the source storages), 2 error (unsafe or unreadable input).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..convert import ConversionReport, convert_file
from ..errors import SafetensorError, VerificationFailed
from .main import report_error
from .metadata import parse_assignments

HELP = "convert a PyTorch checkpoint (.pt/.bin/.pth, zip or legacy) or .npy/.npz to safetensors, running no pickle code"


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
        shown = ", ".join(report.skipped[:8]) + (" ..." if len(report.skipped) > 8 else "")
        lines.append(f"  skipped {len(report.skipped)} non-tensor entries: {shown}")
    lines.extend(f"  finding: {f}" for f in report.findings)
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """0 converted, 1 verification finding, 2 error (one line on stderr)."""
    as_json = bool(getattr(args, "json", False))
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
