"""A URL prefix (an S3 prefix, a ``memory://`` directory) as a directory: the target of a
sharded save (:class:`RemotePrefix`, :class:`RemoteStage`), a checkpoint to read
(:meth:`RemotePrefix.names`), and the place to clean up after killed writers
(:func:`remove_stale_uploads`, :func:`pending_uploads`).

Single files are written by :mod:`pysafetensors.io.remote_sinks`.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from ..errors import WriteError
from .redact import redact_url
from .remote_sinks import _MULTIPART, _NO_DIRECTORIES, _protocols, _write_error, writable_filesystem
from .sinks import _STAGING, staging_name


class RemotePrefix:
    """A directory on a store (an S3 prefix, a ``memory://`` directory) as the target of a
    sharded save, and as a checkpoint to read (:meth:`names`).

    Shares :class:`~pysafetensors.io.sinks.LocalDirectory`'s interface; :meth:`stage` gives
    a :class:`RemoteStage`.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        base = url.split("?", 1)[0]
        self.url = base.rstrip("/") if not base.endswith("://") else base
        self.name = redact_url(self.url)
        self.storage_options = dict(storage_options or {})
        self.fs, path = writable_filesystem(self.url, storage_options)
        self.path = path.rstrip("/")

    def join(self, name: str) -> str:
        return f"{self.url}/{name}"

    def key(self, name: str) -> str:
        return f"{self.path}/{name}"

    def ensure(self) -> None:
        """Create the directory on stores that have directories (object stores have none, and
        creating a bucket is never done here)."""
        if _protocols(self.fs) & _NO_DIRECTORIES:
            return
        try:
            self.fs.makedirs(self.path, exist_ok=True)
        except Exception as e:  # noqa: BLE001
            raise _write_error("creating", self.name, e) from None

    def check_names(self, replace: Iterable[str], remove: Iterable[str] = ()) -> None:
        """Nothing to refuse: a store holds plain objects only (no FIFOs, devices or sockets)."""

    def names(self) -> list[str]:
        """The names directly under the prefix now (files and sub-prefixes); [] when none."""
        try:
            self.fs.invalidate_cache(self.path)
            entries = self.fs.ls(self.path, detail=False)
        except FileNotFoundError:
            return []
        except Exception as e:  # noqa: BLE001
            raise _write_error("listing", self.name, e) from None
        out = []
        for entry in entries:
            name = posixpath.basename(str(entry).rstrip("/"))
            if name and str(entry).rstrip("/") != self.path:
                out.append(name)
        return sorted(set(out))

    def is_directory(self) -> bool:
        """Whether the URL names a directory (a prefix with something under it)."""
        try:
            return bool(self.fs.isdir(self.path))
        except Exception:  # noqa: BLE001 - cannot tell: open it as a file, which says what is wrong
            return False

    def remove(self, names: Iterable[str]) -> None:
        """Delete ``names`` under the prefix; missing ones are skipped."""
        for n in names:
            try:
                self.fs.rm(self.key(n))
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001
                raise _write_error("removing", self.join(n), e) from None

    def stage(self, label: str, *, durable: bool | None = None, names: Sequence[str] = ()) -> RemoteStage:
        """The staging of one save that will write ``names`` (the shards, then the index)."""
        return RemoteStage(self, label, names)


class RemoteStage:
    """The files of one sharded save to a URL prefix, published as a set.

    An object store has no rename: moving a file is a server-side copy.  So a file whose name
    is free is written straight to its final key (each file is still all or nothing), and only
    a file that would replace one already there (overwriting an earlier save's shards) is
    staged under a hidden ``.{label}.staging.*`` prefix and moved in by :meth:`publish` (a copy
    per staged file); when any shard is staged, the index is staged too, so it goes in last.
    The interface and the publishing order are :class:`~pysafetensors.io.sinks.StagedDirectory`'s
    (see :func:`pysafetensors.sharded.write_sharded`).  :meth:`abort` removes the staged files
    and the new files written straight to their keys.
    """

    def __init__(self, prefix: RemotePrefix, label: str, names: Sequence[str]) -> None:
        self.prefix = prefix
        self.before = set(prefix.names())
        self.staging = staging_name(label)
        shards = [n for n in names if not _is_index(n)]
        colliding = {n for n in shards if n in self.before}
        self._staged = colliding | ({n for n in names if _is_index(n)} if colliding else set())
        self._written: list[str] = []

    def file(self, name: str) -> str:
        """The URL to write file ``name`` at: its final URL, or a staging URL (see the class)."""
        if name in self._staged:
            return self.prefix.join(f"{self.staging}/{name}")
        self._written.append(name)
        return self.prefix.join(name)

    def exists(self, name: str) -> bool:
        """Whether ``name`` was under the prefix before this save began."""
        return name in self.before

    def set_aside(self, name: str) -> None:
        """Take ``name`` out of the prefix (the old index, before a staged shard replaces a
        shard of the old set): readers see no checkpoint until the new index is in."""
        self.prefix.remove([name])

    def publish(self, order: Iterable[str], remove: Iterable[str] = ()) -> None:
        """Move the staged files in, in ``order``, then delete ``remove`` and the staging prefix."""
        fs = self.prefix.fs
        for name in order:
            if name not in self._staged:
                continue
            try:
                fs.mv(self.prefix.key(f"{self.staging}/{name}"), self.prefix.key(name))
            except Exception as e:  # noqa: BLE001
                raise _write_error(f"moving {name} into", self.prefix.name, e) from None
        try:
            self.prefix.remove(remove)
        except WriteError:
            pass  # best effort: the new set is in place; a leftover is not part of it
        self._remove_staging()

    def _remove_staging(self) -> None:
        if not self._staged:
            return
        with contextlib.suppress(Exception):  # nothing was staged yet, or already gone
            self.prefix.fs.rm(self.prefix.key(self.staging), recursive=True)

    def abort(self) -> None:
        """Remove what this save wrote: staged files, and new files at names that were free."""
        self._remove_staging()
        try:
            self.prefix.remove(n for n in self._written if n not in self.before)
        except WriteError:
            pass


def _is_index(name: str) -> bool:
    return name.endswith(".json")


# --- what a killed writer leaves --------------------------------------------------------

_TEMP = re.compile(r"\..+\.[0-9a-f]{8}\.[0-9]+\.[0-9a-f]{12}\.tmp")
_STAGED = re.compile(r"\..+" + re.escape(_STAGING) + r"\.[0-9a-f]{8}\.[0-9]+\.[0-9a-f]{12}")


def _age_cutoff(older_than: timedelta | float) -> datetime:
    seconds = older_than.total_seconds() if isinstance(older_than, timedelta) else float(older_than)
    return datetime.now(timezone.utc) - timedelta(seconds=seconds)


def _modified(info: Mapping[str, Any]) -> datetime | None:
    for key in ("LastModified", "mtime", "updated", "last_modified", "created"):
        v = info.get(key)
        if isinstance(v, datetime):
            return v if v.tzinfo else v.replace(tzinfo=timezone.utc)
        if isinstance(v, (int, float)):
            return datetime.fromtimestamp(v, timezone.utc)
    return None


def remove_stale_uploads(
    url: str,
    *,
    older_than: timedelta | float = timedelta(days=1),
    storage_options: Mapping[str, Any] | None = None,
) -> list[str]:
    """Remove what killed writers left under the URL prefix ``url``; returns what was removed.

    * S3: multipart uploads of keys under the prefix begun more than ``older_than`` ago
      (a timedelta or seconds) are aborted (their parts are billed until then);
    * any store: pysafetensors' hidden temp objects (``.NAME.TAG.PID.TOKEN.tmp``) and staging
      prefixes (``.LABEL.staging.TAG.PID.TOKEN/``) directly under the prefix, last modified
      more than ``older_than`` ago (an object whose age the store does not report is kept,
      unless ``older_than`` is 0).

    A live save is never touched as long as it started less than ``older_than`` ago: keep it
    longer than your longest save.  The default, one day, matches a common lifecycle rule.
    """
    prefix = RemotePrefix(url, storage_options)
    cutoff = _age_cutoff(older_than)
    keep_unknown = (older_than.total_seconds() if isinstance(older_than, timedelta) else float(older_than)) > 0
    removed: list[str] = []
    if _protocols(prefix.fs) & _MULTIPART:
        removed += _abort_uploads(prefix, cutoff)
    for name in prefix.names():
        if not (_TEMP.fullmatch(name) or _STAGED.fullmatch(name)):
            continue
        key = prefix.key(name)
        infos = _infos(prefix.fs, key)
        if infos is None:
            continue
        ages = [_modified(i) for i in infos.values()]
        if any(a is None for a in ages) and keep_unknown:
            continue
        if any(a is not None and a > cutoff for a in ages):
            continue
        with contextlib.suppress(Exception):
            prefix.fs.rm(key, recursive=True)
            removed.append(prefix.join(name))
    return removed


def _infos(fs: Any, key: str) -> dict[str, Any] | None:
    """What is at ``key`` (an object, or every object under a prefix); None when unreadable."""
    try:
        return dict(fs.find(key, detail=True, withdirs=False) or {key: fs.info(key)})
    except Exception:  # noqa: BLE001 - gone meanwhile, or not ours to read: left alone
        return None


def pending_uploads(url: str, storage_options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The S3 multipart uploads in progress (or orphaned) for keys under the URL prefix ``url``:
    ``[{"Key", "UploadId", "Initiated"...}]`` as S3 lists them; [] on other stores."""
    prefix = RemotePrefix(url, storage_options)
    if not _protocols(prefix.fs) & _MULTIPART:
        return []
    return _list_uploads(prefix)


def _split(prefix: RemotePrefix) -> tuple[str, str]:
    bucket, _, key = prefix.path.partition("/")
    return bucket, (key + "/" if key else "")


def _list_uploads(prefix: RemotePrefix) -> list[dict[str, Any]]:
    bucket, key_prefix = _split(prefix)
    uploads: list[dict[str, Any]] = []
    kw: dict[str, Any] = {"Bucket": bucket, "Prefix": key_prefix}
    while True:
        try:
            page = prefix.fs.call_s3("list_multipart_uploads", **kw)
        except Exception as e:  # noqa: BLE001
            raise _write_error("listing the multipart uploads of", prefix.name, e) from None
        uploads += page.get("Uploads") or []
        if not page.get("IsTruncated"):
            return uploads
        kw["KeyMarker"] = page.get("NextKeyMarker")
        kw["UploadIdMarker"] = page.get("NextUploadIdMarker")


def _abort_uploads(prefix: RemotePrefix, cutoff: datetime) -> list[str]:
    bucket, _ = _split(prefix)
    removed = []
    for up in _list_uploads(prefix):
        initiated = up.get("Initiated")
        if isinstance(initiated, datetime):
            initiated = initiated if initiated.tzinfo else initiated.replace(tzinfo=timezone.utc)
            if initiated > cutoff:
                continue
        try:
            prefix.fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=up["Key"], UploadId=up["UploadId"])
        except Exception as e:  # noqa: BLE001
            raise _write_error(f"aborting upload {up['UploadId']} of", f"s3://{bucket}/{up['Key']}", e) from None
        removed.append(f"multipart upload {up['UploadId']} of s3://{bucket}/{up['Key']}")
    return removed


__all__ = ["RemotePrefix", "RemoteStage", "pending_uploads", "remove_stale_uploads"]
