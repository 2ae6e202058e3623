"""The one version number (``pysafetensors.__version__``): pyproject.toml reads it from here."""

__version__ = "0.2.0.dev0"
