"""How much fresh memory this process can still have, and the check that refuses a read too big
for it before any of it is allocated.

Reads that copy (``pread``, HTTP, fsspec, file objects) allocate a buffer for what they read;
a map (``mmap``) allocates nothing, its pages are the page cache's and the kernel evicts them.
An allocation larger than memory does not fail cleanly: the anonymous map succeeds (Linux
overcommits) and the process is killed, or the machine swaps, part-way through the read.
:func:`check_allocation` compares the request with every limit that applies and raises
:class:`~pysafetensors.errors.InsufficientMemory` up front instead.  The limits, smallest
wins:

- the machine: Linux ``MemAvailable`` (free memory plus the page cache and slabs the kernel
  can reclaim without swapping), from ``/proc/meminfo``;
- the memory cgroup of the process and each of its ancestors with a limit (a container's
  memory limit): cgroup v2 ``memory.max - memory.current``, v1 ``memory.limit_in_bytes -
  memory.usage_in_bytes``, each plus the cgroup's file pages (page cache charged to it,
  which reclaim takes back before the limit is hit);
- the process's rlimits on address space (``RLIMIT_AS`` against ``VmSize``) and on private
  writable memory (``RLIMIT_DATA`` against ``VmData``; anonymous maps count since Linux 4.7):
  ``ulimit -v`` and the like make the allocation itself fail, which is refused here first.

Swap is not counted: a load that only fits by swapping is refused (set
``PYSAFETENSORS_MEMORY_CHECK=0`` to try it anyway).  Limits that cannot be read (another OS,
``/proc`` not mounted) are skipped, never guessed.  The file locations are module attributes
so tests can point them at files of their own.
"""

from __future__ import annotations

import os
from functools import cache
from typing import NamedTuple

from ..errors import InsufficientMemory

__all__ = ["Limit", "check_allocation", "limits", "mapping_refused", "mem_available"]

MEMINFO = "/proc/meminfo"
PROC_STATUS = "/proc/self/status"
PROC_CGROUP = "/proc/self/cgroup"
CGROUP_ROOT = "/sys/fs/cgroup"

# Requests below this are not checked: a probe reads a few /proc and /sys files, which
# would show on reads of many small tensors but not next to reading 16 MiB; and a
# process that cannot get a few MiB is past saving anyway.
CHECK_FROM = 16 << 20
# What must stay free beside the buffer: the tensor objects, the interpreter's own growth.
MARGIN = 64 << 20
# Address space a reading thread needs: its stack (8 MiB by default; a thread without it
# cannot start, while glibc's per-thread malloc arenas fall back to the main one).  Only the
# rlimits count it: reserved, hardly touched.
THREAD_RESERVE = 16 << 20
# A cgroup with no limit: v2 writes "max", v1 a page-rounded 2**63 - 1.
_UNLIMITED_V1 = 1 << 62
ENV_SWITCH = "PYSAFETENSORS_MEMORY_CHECK"


class Limit(NamedTuple):
    """One bound on a new allocation: what it is (``"MemAvailable"``, ``"RLIMIT_AS"``, a
    cgroup's path and file) and how many bytes may still be allocated under it."""

    name: str
    available: int
    address_space: bool  # an rlimit on reserved address space: reading threads count too


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii", "replace")
    except OSError:
        return None


def _fields(text: str | None, unit: int = 1) -> dict[str, int]:
    """``key value`` (memory.stat) or ``key: value kB`` (/proc/self/status) lines as
    ``{key: value * unit}``."""
    out: dict[str, int] = {}
    for line in (text or "").splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2:
            try:
                out[parts[0]] = int(parts[1]) * unit
            except ValueError:
                continue
    return out


def mem_available() -> int | None:
    """Linux ``MemAvailable`` in bytes, or None where it cannot be read."""
    try:
        with open(MEMINFO, "rb") as f:
            text = f.read()
    except OSError:
        return None
    at = text.find(b"MemAvailable:")
    if at < 0:
        return None
    try:
        return int(text[at + 13 : text.index(b"k", at)]) << 10
    except ValueError:
        return None


def _number(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None  # int() takes the surrounding whitespace
    except ValueError:
        return None  # "max", or unreadable


@cache
def _cgroup_dirs(proc_cgroup: str, root: str) -> tuple[tuple[str, str], ...]:
    """(version, directory) of this process's memory cgroup and each ancestor, innermost first
    (looked up once per process: it joined its cgroup when it started)."""
    text = _read(proc_cgroup)
    if text is None:
        return ()
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hid == "0" and controllers == "":
            version, base = "v2", root
            if not os.path.exists(os.path.join(base, "cgroup.controllers")):
                base = os.path.join(root, "unified")  # a hybrid layout
        elif "memory" in controllers.split(","):
            version, base = "v1", os.path.join(root, "memory")
        else:
            continue
        # Inside a container without a cgroup namespace the path is the host's, and the
        # container sees its own cgroup at the root: start from the deepest part that exists.
        parts = [p for p in path.split("/") if p]
        while parts and not os.path.isdir(os.path.join(base, *parts)):
            parts.pop()
        while True:
            d = os.path.join(base, *parts)
            if os.path.exists(os.path.join(d, "memory.max" if version == "v2" else "memory.limit_in_bytes")):
                out.append((version, d))
            if not parts:
                break
            parts.pop()
    return tuple(out)


def _cgroup_limits() -> list[Limit]:
    out = []
    for version, d in _cgroup_dirs(PROC_CGROUP, CGROUP_ROOT):
        if version == "v2":
            name = os.path.join(d, "memory.max")
            limit = _number(_read(name))
            current = "memory.current"
        else:
            name = os.path.join(d, "memory.limit_in_bytes")
            limit = _number(_read(name))
            if limit is not None and limit >= _UNLIMITED_V1:
                limit = None
            current = "memory.usage_in_bytes"
        if limit is None:  # no limit here (the common case): memory.stat is not read
            continue
        usage = _number(_read(os.path.join(d, current)))
        if usage is None:
            continue
        stat = _fields(_read(os.path.join(d, "memory.stat")))
        if version == "v2":
            cache = stat.get("file", 0)
        else:
            cache = stat.get("total_inactive_file", 0) + stat.get("total_active_file", 0)
        out.append(Limit(f"cgroup limit {name}", max(0, limit - usage + min(cache, usage)), False))
    return out


def _rlimits() -> list[Limit]:
    try:
        import resource
    except ImportError:  # Windows
        return []
    status: dict[str, int] | None = None
    out = []
    for name, field in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            soft, _ = resource.getrlimit(which)
        except (OSError, ValueError):
            continue
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        if status is None:
            status = _fields(_read(PROC_STATUS), 1024)
        used = status.get(field)
        if used is None:
            continue
        out.append(Limit(f"{name} (ulimit: {_size(soft)} of {'address space' if field == 'VmSize' else 'data'})",
                         max(0, soft - used), True))
    return out


def limits() -> list[Limit]:
    """Every limit that applies to a new allocation in this process now."""
    out = []
    available = mem_available()
    if available is not None:
        out.append(Limit("MemAvailable in /proc/meminfo", available, False))
    out.extend(_cgroup_limits())
    out.extend(_rlimits())
    return out


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def check_allocation(nbytes: int, *, source: str, what: str, threads: int = 1, advice: str) -> None:
    """Raise InsufficientMemory when allocating ``nbytes`` (to read ``what`` from ``source``,
    with ``threads`` reading threads) would exceed a limit (see the module docstring), less
    ``MARGIN``.  ``advice`` ends the message: what the caller can do instead."""
    if nbytes < CHECK_FROM or os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "off", "false", "no"):
        return
    worst: tuple[int, Limit] | None = None
    for limit in limits():
        need = nbytes + MARGIN + (THREAD_RESERVE * threads if limit.address_space else 0)
        short = need - limit.available
        if short > 0 and (worst is None or short > worst[0]):
            worst = (short, limit)
    if worst is None:
        return
    limit = worst[1]
    raise InsufficientMemory(
        f"{source}: reading {what} needs {_size(nbytes)} ({nbytes} bytes) of new memory which, with "
        f"{_size(MARGIN)} kept free for the rest of the process, is more than the {_size(limit.available)} "
        f"({limit.available} bytes) available ({limit.name}); {advice} (or set {ENV_SWITCH}=0 to try anyway)",
        requested=nbytes,
        available=limit.available,
        limit=limit.name,
        source=source,
    )


def mapping_refused(nbytes: int, source: str, cause: OSError) -> InsufficientMemory:
    """The error for a file map the kernel refused (ENOMEM): it needs ``nbytes`` of address
    space, which ``RLIMIT_AS`` (``ulimit -v``) or ``RLIMIT_DATA`` (a copy-on-write map is
    private writable memory) may not leave."""
    short = [lim for lim in limits() if lim.address_space and lim.available < nbytes]
    limit = min(short, key=lambda lim: lim.available) if short else None
    why = f"{limit.name} leaves {_size(limit.available)}" if limit is not None else str(cause)
    return InsufficientMemory(
        f"{source}: mapping the file needs {_size(nbytes)} ({nbytes} bytes) of address space, which the "
        f"system refused ({why}); raise the limit, or load it with backend=\"pread\" and read tensors "
        "one at a time with get_tensor",
        requested=nbytes,
        available=limit.available if limit is not None else None,
        limit=limit.name if limit is not None else "mmap",
        source=source,
    )
