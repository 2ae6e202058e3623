"""``python -m pysafetensors`` runs the command line."""

from .cli.main import main

raise SystemExit(main())
