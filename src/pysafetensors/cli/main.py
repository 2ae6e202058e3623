"""Command-line entry point (the commands land with the CLI issue)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("pysafetensors: no commands yet", file=sys.stderr)
    return 2
