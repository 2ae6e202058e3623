"""Fuzz pysafetensors for a time budget: ``python fuzz/run.py --seconds 60``.

The parent process runs the fuzz loop in a child so that a crash (a signal such as SIGSEGV
or SIGBUS) is caught too: the child writes the seed it is on to a progress file before each
input, so the parent can name the input that killed it.  Each input also runs under an alarm;
one that takes longer than ``--hang-seconds`` is reported as a hang.  Inputs are drawn from
``fuzz.gen.random_input(Random(seed))``, so ``--seed S --count 1`` replays input S exactly.

Exit status: 0 when no bug was found, 1 when one was (reports on stderr and the failing
inputs under ``--crash-dir``), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:  # the worktree's package first, then fuzz/ as a package
    sys.path.insert(0, str(ROOT / "src"))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Hang("input took longer than the hang limit")


def worker(args: argparse.Namespace) -> int:
    from fuzz.targets import DIFFERENTIAL_COUNTS, INPUTS, TARGETS, classify, input_for

    targets = [t for t in TARGETS if not t.startswith("_")] if args.target == "all" else args.target.split(",")
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        print(f"unknown target(s) {unknown}; known: {sorted(TARGETS)}", file=sys.stderr)
        return 2
    if "differential" in targets and importlib.util.find_spec("safetensors") is None:
        if args.target != "all":
            print("the differential target needs upstream safetensors (pip install safetensors==0.8.0)", file=sys.stderr)
            return 2
        print("fuzz: upstream safetensors is not installed: skipping the differential target", file=sys.stderr)
        targets.remove("differential")
    signal.signal(signal.SIGALRM, _alarm)
    deadline = time.monotonic() + args.seconds
    crash_dir = Path(args.crash_dir)
    failures: dict[str, int] = {}  # last traceback line -> count, so one bug is reported once
    done = 0
    progress = Path(args.progress)
    seed = args.seed
    while time.monotonic() < deadline and (args.count is None or done < args.count):
        progress.write_text(str(seed))
        shared: bytes | None = None
        for name in targets:
            signal.alarm(args.hang_seconds)
            try:
                if name in INPUTS:
                    data = input_for(name, seed)
                else:
                    shared = data = shared if shared is not None else input_for(name, seed)
            except Exception:  # noqa: BLE001 - a broken generator is a bug too (of the fuzzer)
                report, data = "in the input generator:\n" + traceback.format_exc(), b""
            else:
                report = None
            try:
                report = report or classify(name, data, seed)
            except Hang:
                report = "Hang: input took longer than the hang limit\n"
            finally:
                signal.alarm(0)
            if report is not None:
                # One bug, one report: the exception line with numbers and quoted parts blanked.
                last = report.strip().splitlines()[-1]
                key = f"{name}: " + re.sub(r"'[^']*'|-?[0-9]+", "_", last)[:160]
                failures[key] = failures.get(key, 0) + 1
                if failures[key] == 1:
                    crash_dir.mkdir(parents=True, exist_ok=True)
                    (crash_dir / f"{name}-{seed}.safetensors").write_bytes(data)
                    print(f"BUG in target {name!r}, seed {seed}, input {data[:200]!r}\n{report}", file=sys.stderr)
        done += 1
        seed += 1
    summary = {"inputs": done, "first_seed": args.seed, "last_seed": seed - 1, "bugs": failures,
               "differential": dict(DIFFERENTIAL_COUNTS)}
    print(json.dumps(summary))
    return 1 if failures else 0


def parent(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 40)
    remaining = args.seconds
    total = 0
    status = 0
    start = time.monotonic()
    print(f"fuzz: target {args.target}, first seed {seed}, budget {args.seconds:.0f}s")
    with tempfile.TemporaryDirectory(prefix="pysafetensors-fuzz-") as tmp:
        progress = os.path.join(tmp, "progress")
        while remaining > 0 and (args.count is None or total < args.count):
            cmd = [
                sys.executable, __file__, "--worker", "--seconds", str(remaining), "--seed", str(seed),
                "--target", args.target, "--hang-seconds", str(args.hang_seconds), "--progress", progress,
                "--crash-dir", args.crash_dir,
            ]
            if args.count is not None:
                cmd += ["--count", str(args.count - total)]
            env = dict(os.environ, PYTHONFAULTHANDLER="1")
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, env=env, timeout=remaining + 120, check=False)
            out = proc.stdout.decode().strip().splitlines()
            if proc.returncode >= 0 and out:
                summary = json.loads(out[-1])
                total += summary["inputs"]
                print(f"fuzz: {summary['inputs']} inputs, seeds {summary['first_seed']}..{summary['last_seed']}, "
                      f"{len(summary['bugs'])} distinct bug(s)")
                for key, count in summary["bugs"].items():
                    print(f"  {count}x {key}")
                if summary["differential"]:
                    from fuzz.differential import summary as differential_summary

                    print(f"fuzz: differential vs upstream: {differential_summary(summary['differential'])}")
                status = max(status, proc.returncode)
                break
            if proc.returncode >= 0:
                print(f"fuzz: the worker failed (exit {proc.returncode}) without a summary", file=sys.stderr)
                return 2
            # The child died from a signal: name the input, then go on after it.
            crashed = int(Path(progress).read_text()) if os.path.exists(progress) else seed
            print(f"fuzz: CRASH (signal {-proc.returncode}) on seed {crashed}; replay with "
                  f"python fuzz/run.py --seed {crashed} --count 1", file=sys.stderr)
            status = 1
            total += crashed - seed + 1
            seed = crashed + 1
            remaining = args.seconds - (time.monotonic() - start)
    print(f"fuzz: {total} inputs in {time.monotonic() - start:.0f}s, {'BUGS FOUND' if status else 'no bugs'}")
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    p.add_argument("--seed", type=int, default=None, help="first seed (default: random, printed)")
    p.add_argument("--count", type=int, default=None, help="stop after this many inputs")
    p.add_argument("--target", default="all",
                   help="all, or a comma list of: header, deserialize, open_bytes, open_file, open_torch, faces, differential, gguf")
    p.add_argument("--hang-seconds", type=int, default=10)
    p.add_argument("--crash-dir", default=str(ROOT / "fuzz" / "crashes"))
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--progress", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
