"""Tests for the pysafetensors command line."""
