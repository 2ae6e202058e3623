"""FsspecSource: a file behind any fsspec URL, read with ranged ``cat_file``/``cat_ranges`` calls;
:func:`filesystem`, the one way from an fsspec URL to its filesystem, for reading and writing.

Whatever a filesystem raises (a DNS failure of ``ftp://``, a bad zip in ``zip://…::memory://…``,
an unknown protocol, a dropped connection mid-read) leaves as ``FileNotFoundError`` with
upstream's wording, :class:`~pysafetensors.errors.MissingBackend`, or a
:class:`~pysafetensors.errors.RemoteError` naming the redacted URL (and the offset for reads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._optional import require
from ..errors import MissingBackend, RemoteError, SafetensorError
from ._ranged import PREFETCH, RangedSource, coalesce
from .redact import redact_text, redact_url
from .registry import url_scheme

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


def filesystem(
    url: str, storage_options: Mapping[str, Any] | None, fail: Callable[[BaseException, str | None], Exception]
) -> tuple[Any, str]:
    """``(fs, path)`` for an fsspec URL; ``storage_options`` go to the filesystem.

    A backend that is not installed raises MissingBackend naming the package to install.
    Anything else the filesystem raises becomes the caller's error, ``fail(error, scheme)``:
    ``scheme`` is the URL's scheme when fsspec knows no such protocol, else None.
    """
    fsspec = require("fsspec", "fsspec")
    scheme = url_scheme(url) or "file"
    try:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except ImportError as e:
        module = _BACKEND_MODULES.get(scheme) or str(getattr(e, "name", "") or "") or f"a backend for {scheme}"
        raise MissingBackend(module, "fsspec", scheme) from e
    except Exception as e:  # noqa: BLE001 - every filesystem has its own exceptions: the caller words them
        unknown = isinstance(e, ValueError) and "Protocol not known" in str(e)
        raise fail(e, scheme if unknown else None) from None
    return fs, str(path)


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
        self.url = url
        self.name = redact_url(url)
        self.coalesce_gap = coalesce_gap
        self.max_workers = 1  # cat_ranges does its own concurrency
        self._closed = False
        self._prefix = b""

        def fail(e: BaseException, unknown_scheme: str | None) -> Exception:
            if unknown_scheme is None:
                return self._error("cannot open this URL", e)
            return RemoteError(
                f"{self.name}: unsupported URL scheme {unknown_scheme!r}: not http(s), file, or a protocol fsspec knows",
                url=self.name,
            )

        self.fs, self.path = filesystem(url, {**dict(storage_options or {}), **options}, fail)
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
        return self._whole(data, start, end)

    def _whole(self, data: Any, start: int, end: int) -> bytes:
        """``data``, the bytes ``start``-``end`` the filesystem returned, when it is all of them."""
        if isinstance(data, BaseException):  # cat_ranges(on_error="return")
            raise self._error(f"read of bytes {start}-{end}", data, start) from None
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
        blobs = [self._whole(blob, start, end) for (start, end), blob in zip(spans, blobs)]
        for g, (start, _), blob in zip(groups, spans, blobs):
            for offset, buf in g:
                buf[:] = blob[offset - start : offset - start + len(buf)]

    def close(self) -> None:
        self._closed = True


__all__ = ["FsspecSource", "filesystem"]
