"""The pysafetensors command line."""
