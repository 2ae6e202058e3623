"""Run a Python program with ``import safetensors`` resolving to pysafetensors.

    python -m pysafetensors.run SCRIPT [ARGS...]
    python -m pysafetensors.run -m MODULE [ARGS...]
    python -m pysafetensors.run -c CODE [ARGS...]

The program runs unchanged, as ``python SCRIPT`` / ``python -m MODULE`` / ``python -c`` would
run it (``sys.argv``, ``__name__ == "__main__"``, ``sys.path[0]``), after
``pysafetensors.install_as_safetensors()``.  Child processes started with the ``spawn`` or
``forkserver`` methods, or as new interpreters, start without the alias.
"""

from __future__ import annotations

import os
import runpy
import sys
import types

from ._alias import install_as_safetensors

USAGE = """\
python -m pysafetensors.run SCRIPT [ARGS...]
python -m pysafetensors.run -m MODULE [ARGS...]
python -m pysafetensors.run -c CODE [ARGS...]"""


def main(argv: list[str] | None = None) -> None:
    """Install the alias, then run the program ``argv`` names (default: ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(f"usage:\n{USAGE}", file=sys.stdout if args else sys.stderr)
        raise SystemExit(0 if args else 2)
    if args[0] in ("-m", "-c") and len(args) < 2:
        print(f"Argument expected for the {args[0]} option\nusage:\n{USAGE}", file=sys.stderr)
        raise SystemExit(2)
    install_as_safetensors()
    if args[0] == "-m":
        # sys.path[0] is already the working directory, as for python -m (we were started so).
        sys.argv = args[1:]  # run_module sets argv[0] to the module's file, as python -m does
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
        main_module = types.ModuleType("__main__")
        sys.modules["__main__"] = main_module
        exec(compile(args[1], "<string>", "exec"), main_module.__dict__)  # noqa: S102 - what python -c does
    else:
        script = args[0]
        if not os.path.exists(script):
            print(f"{sys.executable}: can't open file {os.path.abspath(script)!r}: [Errno 2] No such file or directory",
                  file=sys.stderr)
            raise SystemExit(2)
        sys.argv = args
        if os.path.isfile(script) and not _is_zip(script):
            sys.path[0] = os.path.dirname(os.path.realpath(script))
        else:
            del sys.path[0]  # run_path puts a directory or zip archive itself first, as python does
        runpy.run_path(script, run_name="__main__")


def _is_zip(path: str) -> bool:
    import zipfile

    return zipfile.is_zipfile(path)


if __name__ == "__main__":
    main()
