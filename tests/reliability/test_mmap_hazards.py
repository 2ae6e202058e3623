"""What happens when someone else truncates a file we read, and the network-fs default."""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import run_python

from pysafetensors import safe_open
from pysafetensors.errors import SourceError
from pysafetensors.io.fstype import default_backend, filesystem_type, is_network_fs, parse_mountinfo
from pysafetensors.io.sources import MmapSource, PreadSource
from pysafetensors.numpy import save_file

TRUNCATE_THEN_TOUCH = r"""
import os, sys, numpy as np
from pysafetensors import safe_open
path, backend = sys.argv[1], sys.argv[2]
f = safe_open(path, framework="np", backend=backend)
arr = f.get_tensor("big")  # mmap: a view of the map, nothing read yet
os.truncate(path, 0)       # "someone else" shrinks the file
try:
    print("sum", float(arr.sum()), flush=True)  # mmap: touching pages past EOF -> SIGBUS
    f.get_tensor("big")                          # pread: a fresh read now fails cleanly
except Exception as e:
    print(type(e).__name__, e, flush=True)
    sys.exit(0)
print("no error", flush=True)
sys.exit(1)
"""


@pytest.fixture
def big(tmp_path: Any) -> str:
    path = os.fspath(tmp_path / "big.safetensors")
    save_file({"big": np.ones((256, 1024), np.float32)}, path)  # 1 MB: many pages
    return path


def test_mmap_truncated_under_the_reader_is_sigbus(big: str) -> None:
    """Documented hazard (SECURITY.md): a mapped file shrunk by another process kills the reader
    with SIGBUS when it touches a page past the new end.  No Python code can catch that."""
    proc = run_python(TRUNCATE_THEN_TOUCH, big, "mmap")
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stdout, proc.stderr)


def test_pread_truncated_under_the_reader_is_a_clean_source_error(big: str) -> None:
    proc = run_python(TRUNCATE_THEN_TOUCH, big, "pread")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"sum {256 * 1024.0}"  # tensors already read are private memory
    assert lines[1].startswith("SourceError") and "short read" in lines[1] and "truncated" in lines[1]


def test_pread_short_read_in_process(big: str) -> None:
    with safe_open(big, framework="np", backend="pread") as f:
        os.truncate(big, 100)
        with pytest.raises(SourceError, match="short read at offset"):
            f.get_tensor("big")


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /mnt/nfs rw,relatime shared:2 - nfs4 server:/export rw,vers=4.2
31 22 0:41 / /mnt/smb\\040share rw - cifs //host/share rw
32 22 0:42 / /mnt/sshfs rw - fuse.sshfs user@host: rw
33 30 8:2 / /mnt/nfs/local rw - xfs /dev/sdb1 rw
34 22 0:43 / /dev/shm rw - tmpfs tmpfs rw
"""


@pytest.mark.parametrize(
    ("path", "fstype", "backend"),
    [
        ("/home/u/model.safetensors", "ext4", "mmap"),
        ("/mnt/nfs/m.safetensors", "nfs4", "pread"),
        ("/mnt/nfs", "nfs4", "pread"),
        ("/mnt/nfsx/m.safetensors", "ext4", "mmap"),  # a prefix of the name is not the mount
        ("/mnt/smb share/m.safetensors", "cifs", "pread"),  # \040 unescaped
        ("/mnt/sshfs/a/b.safetensors", "fuse.sshfs", "pread"),
        ("/mnt/nfs/local/m.safetensors", "xfs", "mmap"),  # a local disk mounted inside NFS
        ("/dev/shm/m.safetensors", "tmpfs", "mmap"),
    ],
)
def test_default_backend_by_filesystem(path: str, fstype: str, backend: str) -> None:
    assert filesystem_type(path, MOUNTINFO) == fstype
    assert default_backend(path, MOUNTINFO) == backend


def test_mountinfo_parsing_is_robust() -> None:
    assert parse_mountinfo("garbage\n\n1 2 3\n") == []
    assert filesystem_type("/x", "") is None
    assert not is_network_fs(None) and is_network_fs("nfs") and is_network_fs("fuse.gcsfuse")
    assert not is_network_fs("ext4") and not is_network_fs("overlay")


def test_later_mount_over_the_same_point_wins() -> None:
    info = MOUNTINFO + "40 22 0:50 / /mnt/nfs rw - ext4 /dev/sdc1 rw\n"
    assert filesystem_type("/mnt/nfs/m.safetensors", info) == "ext4"


def test_safe_open_defaults_to_pread_on_a_network_filesystem(big: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A mount table that puts the file's directory on NFS (PYSAFETENSORS_MOUNTINFO; the
    # routing tests in tests/read/test_backend_routing.py cover every other loader).
    table = os.path.join(os.path.dirname(big), "mountinfo")
    with open(table, "w") as f:
        f.write(MOUNTINFO + f"50 22 0:60 / {os.path.dirname(big)} rw - nfs4 server:/x rw\n")
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", table)
    with safe_open(big, framework="np") as f:
        assert isinstance(f._file.source, PreadSource)
        assert f.get_tensor("big").flags.writeable  # pread arrays are fresh memory
    with safe_open(big, framework="np", backend="mmap") as f:  # an explicit choice is kept
        assert isinstance(f._file.source, MmapSource)


def test_safe_open_on_this_machine_uses_the_detected_default(big: str) -> None:
    with safe_open(big, framework="np") as f:
        expected = MmapSource if default_backend(big) == "mmap" else PreadSource
        assert type(f._file.source) is expected


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("backend", ["mmap", "pread"])
def test_one_descriptor_per_open_handle(big: str, backend: str) -> None:
    """An open handle holds one file descriptor (for mmap, the one the map keeps), and none
    once it is closed and no tensor views its map any more."""
    before = _fds()
    f = safe_open(big, framework="np", backend=backend)
    assert _fds() == before + 1
    arr = f.get_tensor("big")
    assert _fds() == before + 1
    f.close()
    # A view of the map keeps the map, and with it the map's descriptor, until it goes.
    assert _fds() == before + (backend == "mmap")
    assert float(arr.sum()) == 256 * 1024.0  # tensors outlive the handle
    del arr
    assert _fds() == before
    with safe_open(big, framework="np", backend=backend) as g:
        assert g.keys() == ["big"]
    assert _fds() == before
    h = safe_open(big, framework="np", backend=backend)
    del h  # never closed: collected, its descriptor goes too
    assert _fds() == before


def test_backends_by_device_decide_once_per_filesystem(tmp_path, monkeypatch) -> None:
    from pysafetensors.io import fstype

    monkeypatch.delenv("PYSAFETENSORS_MOUNTINFO", raising=False)
    paths = [tmp_path / f"{i}.safetensors" for i in range(4)]
    for p in paths:
        p.write_bytes(b"")
    calls = []
    real = fstype.default_backend
    monkeypatch.setattr(fstype, "default_backend", lambda p, m=None: calls.append(p) or real(p, m))
    choose = fstype.BackendsByDevice()
    assert [choose(p) for p in paths] == [real(p) for p in paths]
    # One filesystem: one lookup in the table (none when this process has decided it already,
    # see the next test).
    assert len(calls) <= 1
    # Another machine's table: device numbers say nothing about it, every path is looked up.
    table = tmp_path / "mountinfo"
    table.write_text(f"50 22 0:60 / {tmp_path} rw - nfs4 server:/x rw\n")
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", str(table))
    calls.clear()
    choose = fstype.BackendsByDevice()
    assert [choose(p) for p in paths] == ["pread"] * 4
    assert len(calls) == 4


def test_a_block_device_filesystem_is_decided_once_per_process(tmp_path, monkeypatch) -> None:
    from pysafetensors.io import fstype

    monkeypatch.delenv("PYSAFETENSORS_MOUNTINFO", raising=False)
    path = tmp_path / "m.safetensors"
    path.write_bytes(b"")
    expected = fstype.default_backend(path)
    reads = []
    real = fstype.read_mountinfo
    monkeypatch.setattr(fstype, "read_mountinfo", lambda: reads.append(1) or real())
    assert [fstype.local_backend(str(path)) for _ in range(3)] == [expected] * 3
    if os.major(os.stat(path).st_dev):  # a disk: its filesystem stays while the process runs
        assert len(reads) <= 1
    else:  # an anonymous device (tmpfs, overlay...): its number may be reused, asked every time
        assert len(reads) == 3


def test_a_disk_filesystem_known_to_sysfs_agrees_with_the_mount_table(tmp_path, monkeypatch) -> None:
    """A block device's filesystem read from sysfs (no mount table read) is the one the table
    gives the file's path, and so is the verdict; a device sysfs does not list is left to the table."""
    from pysafetensors.io import fstype

    monkeypatch.delenv("PYSAFETENSORS_MOUNTINFO", raising=False)
    path = tmp_path / "m.safetensors"
    path.write_bytes(b"")
    device = os.stat(path).st_dev
    found = fstype.block_device_type(device)
    table = fstype.read_mountinfo()
    if found is not None:
        assert found in fstype.SYSFS_TYPES
        assert fstype.filesystem_type(path, table) in (found, "overlay")
    fstype._BLOCK_DEVICES.pop(device, None)
    reads = []
    real = fstype.read_mountinfo
    monkeypatch.setattr(fstype, "read_mountinfo", lambda: reads.append(1) or real())
    assert fstype.local_backend(str(path)) == fstype.default_backend(path, table)
    assert len(reads) == (found is None)  # sysfs knew it: no table read
    assert fstype.block_device_type(0) is None  # major 0: an anonymous device, never in sysfs
