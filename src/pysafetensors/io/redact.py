"""How a URL is shown to people: without the secrets it may carry.

Every place that prints or records a source's name (errors, CLI output, JSON, progress bars)
goes through :func:`redact_url`, so a signed URL's query string or a ``user:pass@`` part never
reaches a terminal or a log.
"""

from __future__ import annotations

import re
import urllib.parse

_CHAIN = re.compile(r"::(?=[A-Za-z][A-Za-z0-9+.\-]*://)")  # not the "::" of an IPv6 host
_ROUGH = re.compile(r"^([^:/?#]+://)(?:[^@/?#]*@)?([^/?#]*)([^?#]*)")  # scheme, [userinfo@] host, path
# A URL in running text ends before whitespace, quotes, and trailing punctuation ("…/m.safetensors: boom").
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]+://[^\s'\"<>]*[^\s'\"<>:,.;)]")


def redact_url(url: str) -> str:
    """The URL without credentials, query string or fragment (signed URLs carry secrets there).

    Text that is not a URL (a local path) is returned unchanged.
    """
    if "://" not in url:
        return url
    parts = _CHAIN.split(url)
    if len(parts) > 1:  # an fsspec chain ("zip://member::s3://bucket/a.zip"): each link on its own
        return "::".join(redact_url(part) for part in parts)
    try:
        p = urllib.parse.urlsplit(url)
        host = p.hostname or ""
        if ":" in host:  # an IPv6 address keeps its brackets
            host = f"[{host}]"
        if p.port:
            host = f"{host}:{p.port}"
    except ValueError:  # an unparsable netloc (bad port, broken IPv6): cut it by hand
        m = _ROUGH.match(url)
        return m.group(1) + m.group(2) + m.group(3) if m else url.split("://", 1)[0] + "://…"
    # Built by hand: urlunsplit drops the "//" of an empty host for schemes it does not know
    # ("faulty:///tmp/m" would come back as "faulty:/tmp/m", no longer the URL given).
    return f"{p.scheme}://{host}{p.path}"


def redact_text(text: str) -> str:
    """``text`` with every URL inside it redacted (for messages that quote a URL)."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


__all__ = ["redact_text", "redact_url"]
