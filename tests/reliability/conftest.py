"""Reliability tests: the repo root goes on sys.path so the fuzz generator (fuzz/) is importable."""

from __future__ import annotations

import sys

from _reliability_helpers import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
