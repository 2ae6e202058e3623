"""The options of an ``http(s)://`` URL (its ``storage_options``) as one typed, checked object."""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import types
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# option -> (whole number?, least value, whether the least value itself is allowed)
_NUMBERS = {
    "timeout": (False, 0, False),
    "min_rate": (False, 0, True),
    "retries": (True, 0, True),
    "backoff": (False, 0, True),
    "coalesce_gap": (True, 0, True),
    "max_workers": (True, 1, True),
    "chunk_size": (True, 1, True),
}


@dataclass(frozen=True)
class HTTPOptions:
    """How an ``http://`` or ``https://`` file is read: the ``storage_options`` of such a URL.

    :meth:`parse` builds it once from the loose mapping (or keywords); an unknown option raises
    TypeError listing the known ones, a value of the wrong type TypeError and one out of range
    ValueError, each naming the option.

    Attributes:
        headers: extra request headers (for example ``{"Authorization": "Bearer ..."}``).
        token: shorthand for ``Authorization: Bearer <token>``.
        timeout: seconds (default 30).  Connecting, the reply's status line and headers (all of
            them together) and every wait for body bytes are each limited to it, and a reply's
            body must arrive within ``timeout + its size / min_rate`` seconds of the reply: a
            transfer that falls behind that schedule raises
            :class:`~pysafetensors.errors.RemoteTimeout` (naming the URL, the range and the
            elapsed time) instead of holding the reader.
        min_rate: bytes per second (default 4096) a reply body must keep up after the first
            ``timeout`` seconds; ``0`` makes ``timeout`` a hard deadline for every body.
        retries: retries of each kind of transient failure (connection errors, 408/425/429/5xx
            replies, replies late or bodies broken off or stalled for ``timeout``); the wait
            doubles from ``backoff`` seconds (jittered, at most 10 s; ``Retry-After``, capped at
            10 s, wins).
        allow_full_download: when the server ignores Range and sends the whole file (200),
            keep it in memory instead of raising RangeNotSupported.  A compressed reply
            (``Content-Encoding`` other than identity) is refused either way: its bytes are not
            the file's, and decompressing an unbounded stream into memory is not safe.
        allow_insecure_redirect: follow a redirect from ``https://`` to ``http://`` (without
            credentials).  Refused by default.
        verify: TLS certificate check: True (system CAs), False (none), or a CA bundle path
            (a file, or a directory of certificates).
        coalesce_gap: ranges closer than this many bytes are fetched in one request.
        max_workers: concurrent requests for independent ranges and for the ``chunk_size``
            pieces of a large read (and the connections kept alive).
        chunk_size: a read larger than this is fetched in pieces of this size.
    """

    headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    token: str | None = None
    timeout: float = 30.0
    min_rate: float = 4096.0
    retries: int = 4
    backoff: float = 0.25
    allow_full_download: bool = False
    allow_insecure_redirect: bool = False
    verify: bool | str = True
    coalesce_gap: int = 256 * 1024
    max_workers: int = 8
    chunk_size: int = 16 << 20

    @classmethod
    def parse(cls, options: HTTPOptions | Mapping[str, Any] | None = None, **more: Any) -> HTTPOptions:
        """``options`` (an HTTPOptions, or a mapping of option names) with ``more`` on top."""
        base = options if isinstance(options, HTTPOptions) else cls()
        loose = {**(options if isinstance(options, Mapping) else {}), **more}
        unknown = [k for k in loose if k not in _OPTION_NAMES]
        if unknown:
            raise TypeError(
                f"unknown storage option {unknown[0]!r} for http(s):// URLs; known options: {', '.join(_OPTION_NAMES)}"
            )
        return dataclasses.replace(base, **loose) if loose else base

    def __post_init__(self) -> None:
        for name, (whole, least, inclusive) in _NUMBERS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral if whole else numbers.Real):
                _mistyped(name, "a whole number" if whole else "a number", value)
            value = int(value) if whole else float(value)
            if not (value > least or (inclusive and value == least)) or math.isnan(value):
                raise ValueError(f"storage option {name!r} must be {'at least' if inclusive else 'over'} {least}, got {value}")
            object.__setattr__(self, name, value)
        for name in ("allow_full_download", "allow_insecure_redirect"):
            if not isinstance(getattr(self, name), bool):
                _mistyped(name, "True or False", getattr(self, name))
        verify = os.fspath(self.verify) if isinstance(self.verify, os.PathLike) else self.verify
        if not isinstance(verify, (bool, str)):
            _mistyped("verify", "True, False or a CA bundle path", verify)
        object.__setattr__(self, "verify", verify)
        if self.token is not None and not isinstance(self.token, str):
            _mistyped("token", "a string", self.token, show=False)
        headers = self.headers
        if not isinstance(headers, Mapping) or not all(isinstance(x, str) for kv in headers.items() for x in kv):
            _mistyped("headers", "a mapping of strings to strings", headers, show=False)
        object.__setattr__(self, "headers", types.MappingProxyType(dict(headers)))


_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(HTTPOptions))


def _mistyped(name: str, expected: str, value: Any, show: bool = True) -> None:
    got = f"{type(value).__name__} {value!r}" if show else type(value).__name__  # secrets are not echoed
    raise TypeError(f"storage option {name!r} for http(s):// URLs must be {expected}, got {got}")


__all__ = ["HTTPOptions"]


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in, as browsers compare them:
    credentials belong to one origin (redirects and the Hugging Face token are checked by it)."""
    p = urllib.parse.urlsplit(url)
    scheme = p.scheme.lower()
    try:
        port = p.port
    except ValueError:
        port = None
    return scheme, (p.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)
