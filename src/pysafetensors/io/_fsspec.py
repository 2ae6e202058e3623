"""FsspecSource: a file behind any fsspec URL, read with ranged ``cat_file``/``cat_ranges`` calls.

Whatever a filesystem raises (a DNS failure of ``ftp://``, a bad zip in ``zip://…::memory://…``,
an unknown protocol, a dropped connection mid-read) leaves as ``FileNotFoundError`` with
upstream's wording, :class:`~pysafetensors.errors.MissingBackend`, or a
:class:`~pysafetensors.errors.RemoteError` naming the redacted URL (and the offset for reads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._optional import require
from ..errors import MissingBackend, RemoteError, SafetensorError
from ._ranged import PREFETCH, RangedSource, coalesce
from .redact import redact_text, redact_url

# Install hints for fsspec protocols whose implementation lives in another package.
_BACKEND_MODULES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "adl": "adlfs",
    "hf": "huggingface_hub",
    "oci": "ocifs",
    "ssh": "paramiko",
    "sftp": "paramiko",
}


class FsspecSource(RangedSource):
    """A file behind any fsspec URL (``s3://``, ``gs://``, ``memory://``, ``hf://``...).

    ``storage_options`` go to the filesystem (credentials, endpoint_url, anon=True...).
    Ranged reads use ``fs.cat_file`` / ``fs.cat_ranges``, so async filesystems fetch
    coalesced ranges concurrently.
    """

    def __init__(
        self,
        url: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        coalesce_gap: int = 256 * 1024,
        **options: Any,
    ) -> None:
        fsspec = require("fsspec", "fsspec")
        self.url = url
        self.name = redact_url(url)
        self.coalesce_gap = coalesce_gap
        self.max_workers = 1  # cat_ranges does its own concurrency
        self._closed = False
        self._prefix = b""
        opts = {**dict(storage_options or {}), **options}
        scheme = url.split("://", 1)[0].split("::", 1)[0].lower() if "://" in url else "file"
        try:
            self.fs, self.path = fsspec.core.url_to_fs(url, **opts)
        except ImportError as e:
            module = str(getattr(e, "name", "") or "") or _BACKEND_MODULES.get(scheme, f"a backend for {scheme}")
            raise MissingBackend(_BACKEND_MODULES.get(scheme, module), "fsspec", scheme) from e
        except ValueError as e:
            if "Protocol not known" in str(e):
                raise RemoteError(
                    f"{self.name}: unsupported URL scheme {scheme!r}: not http(s), file, or a protocol fsspec knows",
                    url=self.name,
                ) from None
            raise self._error("cannot open this URL", e) from None
        except Exception as e:  # noqa: BLE001 - every filesystem has its own exceptions: translated here
            raise self._error("cannot open this URL", e) from None
        try:
            self.size = int(self.fs.size(self.path))
        except Exception as e:  # noqa: BLE001
            raise self._error("cannot stat", e) from None
        self._prefix = self._cat(0, min(self.size, PREFETCH))

    def _error(self, what: str, e: BaseException, offset: int | None = None) -> Exception:
        if isinstance(e, FileNotFoundError):
            return FileNotFoundError(f"No such file or directory: {self.name}")
        if isinstance(e, SafetensorError):
            return e
        where = f" at offset {offset}" if offset is not None else ""
        detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return RemoteError(redact_text(f"{self.name}: {what}{where}: {detail}"), url=self.name, offset=offset)

    def _cat(self, start: int, end: int) -> bytes:
        try:
            data = self.fs.cat_file(self.path, start=start, end=end)
        except Exception as e:  # noqa: BLE001
            raise self._error(f"read of bytes {start}-{end}", e, start) from None
        if len(data) != end - start:
            raise RemoteError(
                f"{self.name}: short read at offset {start}: wanted {end - start} bytes, got {len(data)}",
                url=self.name,
                offset=start,
            )
        return bytes(data)

    def _fetch(self, offset: int, view: memoryview) -> None:
        view[:] = self._cat(offset, offset + len(view))

    def _fetch_parallel(self, requests: Sequence[tuple[int, memoryview]]) -> None:
        groups = coalesce(requests, self.coalesce_gap)
        if len(groups) <= 1:
            for g in groups:
                self._fetch_group(g)
            return
        spans = [(g[0][0], max(o + len(b) for o, b in g)) for g in groups]
        try:
            blobs = self.fs.cat_ranges(
                [self.path] * len(spans), [s for s, _ in spans], [e for _, e in spans], on_error="return"
            )
        except Exception as e:  # noqa: BLE001
            raise self._error("ranged read", e, spans[0][0]) from None
        for (start, end), blob in zip(spans, blobs):
            if isinstance(blob, BaseException):
                raise self._error(f"read of bytes {start}-{end}", blob, start) from None
            if len(blob) != end - start:
                raise RemoteError(
                    f"{self.name}: short read at offset {start}: wanted {end - start} bytes, got {len(blob)}",
                    url=self.name,
                    offset=start,
                )
        for g, (start, _), blob in zip(groups, spans, blobs):
            for offset, buf in g:
                buf[:] = blob[offset - start : offset - start + len(buf)]

    def close(self) -> None:
        self._closed = True


__all__ = ["FsspecSource"]
