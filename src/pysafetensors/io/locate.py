"""Locate and open: from anything a user names as a checkpoint to what it is and an open source.

:func:`locate` is the one place an input is resolved (zarr's ``make_store_path`` is the model):

- a local path, a ``file://``, ``http(s)://`` or fsspec URL names a file;
- a local directory or an fsspec URL prefix names its index, or its only ``.safetensors`` file
  (:func:`resolve_location`);
- a ``*.safetensors.index.json`` (local or URL) names a sharded checkpoint: it is not opened here,
  the sharded reader opens it and each shard with :func:`backend_chooser`'s backends;
- a pipe, FIFO or character device (``/dev/stdin``) is copied once to an anonymous temporary
  file (:mod:`.spool`, the one stream policy, bounded by ``max_input_size``);
- a single file is opened (:func:`io.open_source <pysafetensors.io.registry.open_source>` with
  the backend :func:`backend_chooser` picks) and its format told by its magic (:func:`sniff`),
  never by its name.

What it found is a :class:`Located`; the callers above (the reader, the tools, convert) build
their checkpoint from it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from ..errors import CheckpointNotFound, InvalidIndex, SourceError
from ..format._frame import GGUF_MAGIC, INDEX_SUFFIX
from . import fstype
from .protocols import ByteSource
from .registry import open_source, url_scheme
from .regular import is_stream

#: what a single file is, by its first bytes: GGUF's magic, or anything else (read as safetensors)
Format = Literal["safetensors", "gguf"]


def sniff(source: ByteSource) -> Format:
    """``"gguf"`` when ``source`` starts with GGUF's magic, else ``"safetensors"`` (the reader
    then says what is wrong with a file that is neither)."""
    if source.size < len(GGUF_MAGIC):
        return "safetensors"
    prefix = bytearray(len(GGUF_MAGIC))
    source.read_into(0, memoryview(prefix))
    return "gguf" if bytes(prefix) == GGUF_MAGIC else "safetensors"


def backend_chooser(backend: str | None, remote: bool = False) -> Callable[[str], str | None]:
    """The backend for each file of one checkpoint: ``backend`` when given, else chosen per file
    by the filesystem it is on (``fstype.default_backend``: ``pread`` on network and FUSE
    filesystems, ``mmap`` elsewhere), the mount table read once for all of them and each
    filesystem decided once (``fstype.BackendsByDevice``)."""
    local = None if remote or backend is not None else fstype.BackendsByDevice()

    def backend_for(where: str) -> str | None:
        if local is None or url_scheme(where) is not None:
            return backend
        return local(where)

    return backend_for


def is_index_name(obj: Any) -> bool:
    """Whether ``obj`` (a path or URL) names a sharded checkpoint's index JSON."""
    if isinstance(obj, os.PathLike):
        obj = os.fspath(obj)
    if not isinstance(obj, str):
        return False
    path = obj.split("?", 1)[0] if url_scheme(obj) else obj
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return base.endswith(".json") and ".safetensors.index" in base or base.endswith(INDEX_SUFFIX)


def is_sharded_path(path: str) -> bool:
    """Whether ``path`` names a sharded checkpoint (an index JSON, or a local directory)."""
    return is_index_name(path) or (url_scheme(path) is None and os.path.isdir(path))


def find_in_directory(directory: str) -> str:
    """The file to load in a checkpoint directory: its index, or its only ``.safetensors`` file."""
    return os.path.join(directory, pick_checkpoint_file(os.listdir(directory), directory))


def pick_checkpoint_file(names: Sequence[str], directory: str) -> str:
    """Which of ``names`` (a directory's listing) to load: the index, or the only ``.safetensors`` file.

    ``directory`` names the place in errors (a path, or a redacted URL prefix)."""
    from ..format.index import index_file_name, shard_position  # a directory's rules: not needed for a file

    names = sorted(names)
    indexes = [n for n in names if is_index_name(n)]
    if len(indexes) > 1:
        preferred = [n for n in indexes if n == index_file_name()]
        if not preferred:
            raise InvalidIndex(f"{directory}: several index files ({', '.join(indexes)}); open one of them")
        indexes = preferred
    if indexes:
        return indexes[0]
    files = [n for n in names if n.endswith(".safetensors")]
    if len(files) == 1:
        position = shard_position(files[0])
        if position is not None and position[1] > 1:
            # One shard of a set and no index: half a checkpoint (an interrupted save, a partial
            # copy), not a checkpoint of its own.  The file itself can still be opened by name.
            raise InvalidIndex(
                f"{directory}: holds only {files[0]}, shard {position[0]} of {position[1]}, and no index; "
                "the checkpoint is incomplete (open the file by its name to read it alone)"
            )
        return files[0]
    if not files:
        raise CheckpointNotFound(
            f"No such file or directory: {directory}: no *.safetensors.index.json or .safetensors file in it",
            errno=errno.ENOENT, strerror="No such file or directory", filename=directory,
        )
    raise InvalidIndex(f"{directory}: several .safetensors files and no index ({', '.join(files)}); open one of them")


def resolve_location(path: str, storage_options: Mapping[str, Any] | None = None) -> str:
    """The file a checkpoint location names: a local directory or an fsspec URL prefix
    (``s3://bucket/ckpt/``) gives its index, or its only file; anything else is itself."""
    if url_scheme(path) is None and os.path.isdir(path):
        return find_in_directory(path)
    found = _url_directory_file(path, storage_options)
    return path if found is None else found


def _url_directory_file(url: str, storage_options: Mapping[str, Any] | None) -> str | None:
    """For an fsspec URL naming a directory (a trailing ``/``, or an extension-less name that
    is a prefix with objects under it): the URL of the checkpoint file in it; else None."""
    if url_scheme(url) in (None, "file", "http", "https"):
        return None
    path = url.split("?", 1)[0]
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if not path.endswith("/") and base.endswith((".safetensors", ".json")):
        return None  # a file name: no listing request
    from .remote_prefix import RemotePrefix

    try:
        prefix = RemotePrefix(url, storage_options)
        listed = path.endswith("/") or prefix.is_directory()
    except Exception:  # noqa: BLE001 - opening it as a file gives the real error (missing backend...)
        return None
    if not listed:
        return None
    return prefix.join(pick_checkpoint_file(prefix.names(), prefix.name + "/"))


def sibling(location: str, name: str) -> str:
    """``location`` (a path or URL) with its file name replaced by ``name`` (a split GGUF's
    other files; the query string, a signature for the set, is kept)."""
    parts = urlsplit(location)
    if parts.scheme and len(parts.scheme) > 1:
        head = parts.path.rsplit("/", 1)[0] if "/" in parts.path else ""
        return urlunsplit(parts._replace(path=f"{head}/{name}"))
    return os.path.join(os.path.dirname(location), name)


@dataclass
class Located:
    """What :func:`locate` found.

    ``location`` is the file (or index JSON) the input names; ``shown`` the input as messages
    name it (a URL without credentials or query string).  For a single file, ``source`` is it,
    open (``format`` by its magic); for an index, ``source`` and ``format`` are None.  A
    ``stream`` input's source reads its temporary copy, and it has no other files beside it.
    Whoever takes ``source`` closes it; :meth:`close` closes it when nobody did.
    """

    target: str
    shown: str
    location: str
    source: ByteSource | None
    format: Format | None
    stream: bool = False
    storage_options: Mapping[str, Any] | None = None
    backend_for: Callable[[str], str | None] = field(default=lambda where: None)

    @property
    def index(self) -> bool:
        return self.source is None

    def take_source(self) -> ByteSource:
        """The open source, now the caller's to close."""
        source, self.source = self.source, None
        if source is None:
            raise ValueError(f"{self.shown} is a sharded checkpoint's index; it has no single source")
        return source

    def open_sibling(self, name: str) -> ByteSource:
        """A file beside this one (a split GGUF's other parts), opened as this one was."""
        if self.stream:
            raise SourceError(f"{self.shown}: a stream has no files beside it ({name})", source=self.shown)
        where = sibling(self.location, name)
        return open_source(where, self.backend_for(where), self.storage_options)

    def sibling_opener(self) -> Callable[[str], ByteSource] | None:
        """:meth:`open_sibling`, or None for a stream (a split set cannot be read from one)."""
        return None if self.stream else self.open_sibling

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
            self.source = None


def locate(
    target: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    backend: str | None = None,
    max_input_size: int | None = None,
) -> Located:
    """Resolve ``target`` (see the module docstring) and open it when it is a single file.

    ``storage_options`` go to remote sources; ``backend`` (None: chosen per file) to local
    ones; ``max_input_size`` caps what is copied of a stream (:mod:`.spool`; None: its default).
    A local path that is neither a regular file, a directory nor a stream (a socket, a block
    device) is a SourceError naming it.
    """
    path = os.fspath(target)
    from .redact import redact_url  # here: safe_open's path (resolve_location) never shows a name

    shown = redact_url(path)
    if url_scheme(path) is None:
        try:
            mode: int | None = os.stat(path).st_mode
        except OSError:
            mode = None  # missing: opening it says so
        if mode is not None and is_stream(path):
            from .spool import spooled_source

            source = spooled_source(path, max_input_size=max_input_size)
            return Located(path, shown, path, source, _sniffed(source), stream=True)
        if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise SourceError(f"{path}: not a regular file or directory", path=path)
    location = resolve_location(path, storage_options)
    remote = url_scheme(location) not in (None, "file")
    backend_for = backend_chooser(backend, remote)
    if is_index_name(location):
        return Located(path, shown, location, None, None, storage_options=storage_options, backend_for=backend_for)
    source = open_source(location, backend_for(location), storage_options)
    return Located(path, shown, location, source, _sniffed(source), storage_options=storage_options,
                   backend_for=backend_for)


def _sniffed(source: ByteSource) -> Format:
    try:
        return sniff(source)
    except BaseException:
        source.close()
        raise


def spool_stream(path: str, *, max_input_size: int | None = None, wanted: str) -> IO[bytes] | None:
    """A local stream copied whole (:func:`.spool.spool`) for a reader that takes a file object
    (convert's pickle readers); None when ``path`` is not a local stream."""
    if url_scheme(path) is not None or not is_stream(path):
        return None
    from .spool import spool

    return spool(path, whole=True, max_input_size=max_input_size, wanted=wanted)


__all__ = [
    "Format",
    "Located",
    "backend_chooser",
    "find_in_directory",
    "is_index_name",
    "is_sharded_path",
    "locate",
    "pick_checkpoint_file",
    "resolve_location",
    "sibling",
    "sniff",
    "spool_stream",
]
