"""mkdocs hook: files kept at the repository root become pages, so each has one source.

SECURITY.md, CHANGELOG.md, benchmarks/RESULTS.md and the scale benchmark's
benchmarks/scale/RESULTS.md are read where they live (GitHub shows them there, the benchmarks
write them there, and the wheel's metadata and other tools point at them) and handed to mkdocs
as generated pages; the scale benchmark's PNG plots go beside its page, so the page and the
performance guide show the committed plots without a copy under docs/.  The benchmark run logs,
benchmarks/runs/*.md, become pages under runs/ that are not in the nav: RESULTS.md links each
one, and runs/ sits beside RESULTS.md's page as it sits beside the file, so the same relative
links work on GitHub, on the site and in the headline section docs/index.md includes from
RESULTS.md (pymdownx.snippets).  Relative links between these files are rewritten to the pages
they became.

CHANGELOG.md is optional so the site builds in a checkout that has none: the page then says
so instead of failing the build.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

log = logging.getLogger("mkdocs.hooks.include_files")

# page in the site -> (file in the repository, required)
INCLUDES: dict[str, tuple[str, bool]] = {
    "security-policy.md": ("SECURITY.md", True),
    "benchmarks.md": ("benchmarks/RESULTS.md", True),
    "changelog.md": ("CHANGELOG.md", True),
    "scale/index.md": ("benchmarks/scale/RESULTS.md", True),
}
# Folders whose PNG files are published under a folder of the site: (repository, site).
IMAGES = (("benchmarks/scale", "scale"),)
# Folders whose Markdown files become pages outside the nav: (repository, site).
NOT_IN_NAV = (("benchmarks/runs", "runs"),)
# Repository paths those files may link to, and the page each one is in the site.
LINK_TARGETS = {source: page for page, (source, _) in INCLUDES.items()}
LINK_TARGETS["README.md"] = "index.md"

_LINK = re.compile(r"(\]\()([^)#\s]+)(#[^)\s]*)?(\))")

NO_CHANGELOG = """# Changelog

This checkout has no `CHANGELOG.md` at the repository root; the site shows it here when it exists.
"""


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _rewrite_links(text: str, source: str, page: str) -> str:
    """Links in ``source`` (a repository path) to files that became pages, made relative to
    ``page`` (the site path it became)."""
    base = Path(source).parent
    here = posixpath.dirname(page) or "."

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        if "://" in target or target.startswith(("mailto:", "/")):
            return match.group(0)
        resolved = (base / target).as_posix()
        parts: list[str] = []
        for part in resolved.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        target_page = LINK_TARGETS.get("/".join(parts))
        if target_page is None:
            return match.group(0)  # left as written: mkdocs --strict reports it if it is broken
        relative = posixpath.relpath(target_page, here)
        return f"{match.group(1)}{relative}{match.group(3) or ''}{match.group(4)}"

    return _LINK.sub(fix, text)


def on_files(files: Files, config: Any) -> Files:
    root = _root(config)
    hidden: dict[str, str] = {}  # site page -> repository file, for the pages outside the nav
    for folder, site in NOT_IN_NAV:
        for md in sorted((root / folder).glob("*.md")):
            hidden[f"{site}/{md.name}"] = f"{folder}/{md.name}"
    LINK_TARGETS.update({source: page for page, source in hidden.items()})
    for page, source in hidden.items():
        content = _rewrite_links((root / source).read_text(encoding="utf-8"), source, page)
        files.append(File.generated(config, page, content=content, inclusion=InclusionLevel.NOT_IN_NAV))
    for page, (source, required) in INCLUDES.items():
        path = root / source
        if path.is_file():
            content = _rewrite_links(path.read_text(encoding="utf-8"), source, page)
        elif required:
            raise FileNotFoundError(f"{source} is missing: the docs page {page} is built from it")
        else:
            log.info("%s not found: %s says so", source, page)
            content = NO_CHANGELOG
        files.append(File.generated(config, page, content=content))
    for folder, site in IMAGES:
        for png in sorted((root / folder).glob("*.png")):
            files.append(File.generated(config, f"{site}/{png.name}", abs_src_path=str(png)))
    return files
