"""The one place the CLI opens its inputs: :func:`pysafetensors.tools.checkpoint.open_checkpoint`
with the options the command line gave (``args.remote``: ``--timeout`` and ``-H`` headers for
http(s) URLs, ``-o`` storage options for fsspec URLs, ``--max-input-size`` for streams).

An input is a local file, an ``http(s)://`` or fsspec URL, a ``*.safetensors.index.json``
(local or URL), a local directory holding a checkpoint, or a pipe (``/dev/stdin``); the
commands see one logical checkpoint (the tools' Checkpoint).  The commands that
read GGUF too (inspect, id, diff, stats) open with ``gguf=True`` and hand what they get to the
tools, which take either kind.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, overload

from ..tools.checkpoint import Checkpoint, GGUFCheckpoint, open_checkpoint
from ._options import RemoteOptions


@overload
def open_input(path: str | os.PathLike[str], remote: RemoteOptions | None = None,
               storage_options: Mapping[str, Any] | None = None, *,
               gguf: Literal[False] = False, gguf_layout: bool = True) -> Checkpoint: ...
@overload
def open_input(path: str | os.PathLike[str], remote: RemoteOptions | None = None,
               storage_options: Mapping[str, Any] | None = None, *,
               gguf: bool, gguf_layout: bool = True) -> Checkpoint | GGUFCheckpoint: ...
def open_input(path: str | os.PathLike[str], remote: RemoteOptions | None = None,
               storage_options: Mapping[str, Any] | None = None, *,
               gguf: bool = False, gguf_layout: bool = True) -> Checkpoint | GGUFCheckpoint:
    """Open a file, URL, index JSON, checkpoint directory or pipe as one Checkpoint
    (with ``gguf``, a GGUF file as a GGUFCheckpoint; without, a GGUF file is refused;
    ``gguf_layout=False``: a GGUF's header alone, its data layout unchecked, for ``id``).

    ``remote`` is the command line's :class:`RemoteOptions` (``args.remote``); ``storage_options``
    are added on top of what it gives ``path``."""
    remote = remote or RemoteOptions()
    options = {**remote.for_path(path), **(storage_options or {})}
    return open_checkpoint(path, options or None, gguf=gguf, gguf_layout=gguf_layout,
                           max_input_size=remote.max_input_size)


__all__ = ["open_input"]
