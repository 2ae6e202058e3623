"""Which filesystem a path lives on, and the safe default read backend for it.

A mapped file that shrinks under the reader (another client truncates or rewrites it in
place) kills the process with SIGBUS when a page past the new end is touched.  On a local
disk only a process on this machine can do that; on a network or FUSE filesystem any client
can, and a server or network error on a page fault is also a SIGBUS instead of an ``EIO``.
``pread`` turns both into a clean ``SourceError``, so it is the default there.

The type comes from the mount table (``/proc/self/mountinfo``), matched by path.  For a file
on a disk whose filesystem registers itself in sysfs by device name (``/sys/fs/ext4/sda1``,
``/sys/fs/xfs/nvme0n1p2``: ``SYSFS_TYPES``), the type is read there instead, from the file's
device number, without reading the table: a block device holds one filesystem while it is
mounted, and a file reporting that device number has its bytes on it (a path through an
overlay, whose type the table would give, is local either way).  Anything else, FUSE on a
disk (``fuseblk``) and cluster filesystems on shared disks (``ocfs2``, ``gfs2``) included, is
looked up in the table.

``PYSAFETENSORS_MOUNTINFO`` names a file in mountinfo format to read instead of
``/proc/self/mountinfo``: it shows what every loader would choose on another machine's
mount table, and lets tests place a directory on "NFS".
"""

from __future__ import annotations

import functools
import os

# Kernel fs type names (mountinfo field 9) of network, cluster and FUSE filesystems.
NETWORK_FS_TYPES = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "9p", "afs", "ceph", "glusterfs", "lustre",
    "gpfs", "beegfs", "ocfs2", "gfs2", "davfs", "sshfs", "fuse", "fuseblk",
})
MOUNTINFO = "/proc/self/mountinfo"
MOUNTINFO_ENV = "PYSAFETENSORS_MOUNTINFO"
# Local disk filesystems that list each mounted device under /sys/fs/<type>/<device name>.
SYSFS_TYPES = ("ext4", "xfs")


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1 : i + 4]) == 3 and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[tuple[str, str]]:
    """(mount point, fs type) pairs from /proc/self/mountinfo text, in file order."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        mounts.append((_unescape(fields[4]), right.split()[0]))
    return mounts


def read_mountinfo() -> str | None:
    """The mount table's text: the file ``PYSAFETENSORS_MOUNTINFO`` names, else
    ``/proc/self/mountinfo``; None where there is none (not Linux, no /proc)."""
    # Raw bytes through one descriptor, decoded once: a text-mode file object costs more than
    # the kernel's writing of the table.  splitlines() then breaks lines where text mode's
    # newline translation would (a raw CR in a mount point included).
    try:
        fd = os.open(os.environ.get(MOUNTINFO_ENV) or MOUNTINFO, os.O_RDONLY)
    except (OSError, ValueError):
        return None
    try:
        chunks = []
        while chunk := os.read(fd, _READ_STEP):  # /proc hands its text over in pieces
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


_READ_STEP = 1 << 16


@functools.lru_cache(maxsize=8)
def _lookup_order(mountinfo: str) -> tuple[tuple[str, str, str], ...]:
    """(mount point, the point as a directory prefix, fs type), in the order a path is matched:
    longest mount point first and, of equally long ones, the later in the table first (a later
    mount hides an earlier one).  Keyed by the table's text, so a changed table is parsed anew."""
    mounts = parse_mountinfo(mountinfo)
    order = sorted(range(len(mounts)), key=lambda i: (-len(mounts[i][0]), -i))
    return tuple((mounts[i][0], mounts[i][0].rstrip("/") + "/", mounts[i][1]) for i in order)


def filesystem_type(path: str | os.PathLike[str], mountinfo: str | None = None) -> str | None:
    """The fs type of the mount holding ``path`` (``"ext4"``, ``"nfs4"``...), or None if unknown.

    ``mountinfo`` is the mount table's text; by default :func:`read_mountinfo`'s.
    """
    if mountinfo is None:
        mountinfo = read_mountinfo()
        if mountinfo is None:
            return None
    real = os.path.realpath(os.fspath(path))
    for point, prefix, fstype in _lookup_order(mountinfo):
        if real == point or real.startswith(prefix):
            return fstype
    return None


def is_network_fs(fstype: str | None) -> bool:
    if fstype is None:
        return False
    return fstype in NETWORK_FS_TYPES or fstype.startswith("fuse.")


def default_backend(path: str | os.PathLike[str], mountinfo: str | None = None) -> str:
    """``"pread"`` for files on network/FUSE filesystems, else ``"mmap"``."""
    try:
        return "pread" if is_network_fs(filesystem_type(path, mountinfo)) else "mmap"
    except (OSError, ValueError):
        return "mmap"


# This machine's decisions for filesystems on block devices, by device number, kept for the
# process's life: such a number names one disk (partition), so it keeps its filesystem while the
# process runs, and a local open then reads no mount table (reading /proc/self/mountinfo costs
# as much as parsing a small header).  Anonymous device numbers (major 0: NFS, FUSE, tmpfs,
# overlay, btrfs subvolumes) go to the next filesystem mounted once one is unmounted, so those
# are decided afresh for each ``BackendsByDevice``.
_BLOCK_DEVICES: dict[int, str] = {}
_major = getattr(os, "major", None)  # absent on Windows, which has no mount table to read


class BackendsByDevice:
    """``default_backend`` for many paths under one reading of the mount table (the shards of a
    checkpoint).  With this machine's own table, decided once per filesystem (``st_dev``: one
    filesystem, one type) rather than resolving every path and matching it against the table,
    and once per process for a block device's filesystem; with another table
    (``PYSAFETENSORS_MOUNTINFO``), whose mounts the local device numbers say nothing about,
    path by path.  The table is read when a decision first needs it."""

    def __init__(self) -> None:
        self._mountinfo: str | None = None
        self._live = not os.environ.get(MOUNTINFO_ENV)
        self._by_device: dict[int, str] = {}

    @property
    def mountinfo(self) -> str:
        if self._mountinfo is None:
            self._mountinfo = read_mountinfo() or ""
        return self._mountinfo

    def __call__(self, path: str | os.PathLike[str]) -> str:
        if not self._live:
            return default_backend(path, self.mountinfo)
        try:
            device = os.stat(path).st_dev
        except (OSError, ValueError):
            return default_backend(path, self.mountinfo)  # opening it gives the real error
        block = _major is not None and _major(device) != 0
        known = _BLOCK_DEVICES if block else self._by_device
        chosen = known.get(device)
        if chosen is None:
            fstype = block_device_type(device) if block else None
            if fstype is None:
                chosen = default_backend(path, self.mountinfo)
            else:
                chosen = "pread" if is_network_fs(fstype) else "mmap"
            known[device] = chosen
        return chosen


def block_device_type(device: int) -> str | None:
    """The type of the filesystem mounted from block device ``device`` (an ``st_dev``) when it
    is one of ``SYSFS_TYPES``, found in sysfs; None when not found (another type, no sysfs)."""
    try:
        name = os.path.basename(os.readlink(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}"))
    except (OSError, AttributeError):
        return None
    for fstype in SYSFS_TYPES:
        if os.path.isdir(f"/sys/fs/{fstype}/{name}"):
            return fstype
    return None


def local_backend(path: str) -> str:
    """``default_backend`` for one local file, with this machine's decisions per block device
    (see ``BackendsByDevice``)."""
    return BackendsByDevice()(path)
