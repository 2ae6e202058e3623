"""Library functions behind the CLI and the viewer.

Each module computes one thing (summary, tree, identity, diff, stats, validate, metadata
edits) and returns dataclasses; ``cli/`` renders them as text or JSON and ``view/`` serves
them to the page, so every number has one implementation.
"""
