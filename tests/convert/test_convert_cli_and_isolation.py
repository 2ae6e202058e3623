"""The convert command (its registry parser and run) and conversion with torch blocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pysafetensors.cli import convert as convert_cli
from pysafetensors.cli._options import finish_args
from pysafetensors.cli.main import build_parser

from .convert_helpers import read_safetensors

torch = pytest.importorskip("torch")

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def run_cli(argv: list[str]) -> int:
    args = finish_args(build_parser("convert").parse_args(argv))  # the common options main() attaches
    return convert_cli.run(args)


def test_cli_converts_and_reports_json(tmp_path, capsys):
    torch.save({"model": {"w": torch.ones(2, 2)}, "step": 5}, tmp_path / "c.pt")
    out = tmp_path / "c.safetensors"
    assert run_cli(["convert", str(tmp_path / "c.pt"), str(out), "--key", "model", "--json",
                    "--metadata", "origin=test"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tensors"] == 1 and report["verified"] is True and report["source_kind"] == "torch-zip"
    assert report["metadata"] == {"format": "pt", "origin": "test"}
    assert set(read_safetensors(str(out))[0]) == {"w"}


def test_cli_text_output_and_tied_names(tmp_path, capsys):
    w = torch.ones(3)
    torch.save({"a": w, "b": w, "n": 1}, tmp_path / "t.pt")
    assert run_cli(["convert", str(tmp_path / "t.pt"), str(tmp_path / "t.safetensors")]) == 0
    text = capsys.readouterr().out
    assert "1 tensors" in text and "tied: b -> a" in text and "verified" in text and "skipped 1" in text


def test_cli_exit_codes(tmp_path, capsys):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    torch.save({"e": Evil()}, tmp_path / "evil.pt")
    assert run_cli(["convert", str(tmp_path / "evil.pt"), str(tmp_path / "o.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "posix.system" in err and not marker.exists()
    # a verification finding (views inflate the output past 1%) is exit 1; --no-verify is 0
    base = torch.arange(10.0)
    torch.save({"all": base, "part": base[2:8]}, tmp_path / "v.pt")
    assert run_cli(["convert", str(tmp_path / "v.pt"), str(tmp_path / "v.safetensors")]) == 1
    assert "more than the source" in capsys.readouterr().out
    assert run_cli(["convert", str(tmp_path / "v.pt"), str(tmp_path / "v.safetensors"), "--no-verify"]) == 0
    capsys.readouterr()
    assert run_cli(["convert", str(tmp_path / "missing.pt"), str(tmp_path / "m.safetensors")]) == 2
    assert "error" in capsys.readouterr().err


def test_conversion_works_with_torch_unimportable(tmp_path):
    sd = {"w": torch.randn(3, 4).to(torch.bfloat16), "t": torch.arange(6.0).reshape(2, 3).t(),
          "nested": {"f8": torch.randn(4).to(torch.float8_e5m2)}}
    torch.save(sd, tmp_path / "z.pt")
    torch.save(sd, tmp_path / "l.pt", _use_new_zipfile_serialization=False)
    np.savez(tmp_path / "n.npz", a=np.ones(3))
    script = textwrap.dedent(f"""
        import sys
        sys.modules["torch"] = None  # any `import torch` now raises ImportError
        from pysafetensors.convert import convert_file
        for name in ("z.pt", "l.pt", "n.npz"):
            convert_file({str(tmp_path)!r} + "/" + name, {str(tmp_path)!r} + "/" + name + ".safetensors",
                         verify=True)
        assert not any(m == "torch" or m.startswith("torch.") for m, v in sys.modules.items() if v is not None)
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(SRC))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
    zip_out = read_safetensors(str(tmp_path / "z.pt.safetensors"))
    assert zip_out == read_safetensors(str(tmp_path / "l.pt.safetensors"))
    assert set(zip_out[0]) == {"w", "t", "nested.f8"}
