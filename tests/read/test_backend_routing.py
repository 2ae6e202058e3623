"""Every loader opens files through the one ``io.open_source``: a file on a network or FUSE
filesystem is read with pread (a map of it would SIGBUS when another client shrinks it), and a
mistyped backend is refused everywhere.

The mount table comes from ``PYSAFETENSORS_MOUNTINFO``: the tests put a directory on "NFS"
(or sshfs, or SMB) and look at which source class each caller constructed.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import sys
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pysafetensors import safe_open
from pysafetensors.errors import InvalidBackend
from pysafetensors.io.sources import MmapSource, PreadSource
from pysafetensors.numpy import save_file, save_sharded

# paddle segfaults when imported after tensorflow (their native libraries clash; the other order
# works): as in tests/frameworks/_fw_cases.py, paddle goes first when both are installed.
if "tensorflow" not in sys.modules and importlib.util.find_spec("paddle") and importlib.util.find_spec("tensorflow"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import paddle  # noqa: F401

ARRAYS = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(5, np.int64)}
LOCAL_ROOT = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
FACES = ["numpy", "torch", "flax", "tensorflow", "paddle", "mlx"]


def _mount_table(tmp_path: Path, mounts: dict[str | Path, str]) -> str:
    table = tmp_path / "mountinfo"
    lines = [LOCAL_ROOT]
    for i, (point, fstype) in enumerate(mounts.items()):
        lines.append(f"{40 + i} 22 0:{60 + i} / {os.path.realpath(point)} rw - {fstype} server:/export rw\n")
    table.write_text("".join(lines))
    return str(table)


@pytest.fixture(params=["nfs4", "fuse.sshfs", "cifs"])
def remote_dir(request: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory the mount table says is on a network/FUSE filesystem, holding m.safetensors."""
    d = tmp_path / "shared"
    d.mkdir()
    save_file(ARRAYS, d / "m.safetensors")
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", _mount_table(tmp_path, {d: request.param}))
    return d


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(source class, file name) of every local source constructed."""
    log: list[tuple[str, str]] = []
    for cls in (MmapSource, PreadSource):
        real = cls.__init__

        def init(self: Any, path: Any, name: str | None = None, _real: Any = real, _cls: type = cls) -> None:
            log.append((_cls.__name__, os.path.basename(os.fspath(path))))
            _real(self, path, name)

        monkeypatch.setattr(cls, "__init__", init)
    return log


def _only_pread(log: list[tuple[str, str]], *names: str) -> None:
    assert log, "no local source was opened"
    assert {cls for cls, _ in log} == {"PreadSource"}, log
    assert set(names) <= {n for _, n in log}, log


def test_safe_open(remote_dir: Path, opened: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    with safe_open(remote_dir / "m.safetensors", "np") as f:
        assert isinstance(f._file.source, PreadSource)
        np.testing.assert_array_equal(f.get_tensor("a"), ARRAYS["a"])
    _only_pread(opened, "m.safetensors")
    with safe_open(remote_dir / "m.safetensors", "np", backend="mmap") as f:  # an explicit choice is kept
        assert isinstance(f._file.source, MmapSource)
    # The same file with the real mount table (tmp is local here): mapped.
    monkeypatch.delenv("PYSAFETENSORS_MOUNTINFO")
    with safe_open(remote_dir / "m.safetensors", "np") as f:
        assert isinstance(f._file.source, MmapSource)


def test_file_objects_follow_their_file(remote_dir: Path, opened: list[tuple[str, str]]) -> None:
    with open(remote_dir / "m.safetensors", "rb") as fobj, safe_open(fobj, "np") as f:
        assert not isinstance(f._file.source, MmapSource)  # read through the object, not mapped
        np.testing.assert_array_equal(f.get_tensor("b"), ARRAYS["b"])
    assert not any(cls == "MmapSource" for cls, _ in opened)


@pytest.mark.parametrize("face", FACES)
def test_every_face_load_file(face: str, remote_dir: Path, opened: list[tuple[str, str]]) -> None:
    module = importlib.import_module(f"pysafetensors.{face}")
    out = module.load_file(remote_dir / "m.safetensors")
    assert set(out) == set(ARRAYS)
    _only_pread(opened, "m.safetensors")


def test_torch_load_model(remote_dir: Path, opened: list[tuple[str, str]], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from pysafetensors.torch import load_model, save_model

    model = torch.nn.Linear(3, 2)
    save_model(model, remote_dir / "model.safetensors")
    opened.clear()
    load_model(torch.nn.Linear(3, 2), remote_dir / "model.safetensors")
    _only_pread(opened, "model.safetensors")


def test_sharded_checkpoint_decides_per_shard(tmp_path: Path, opened: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = tmp_path / "ckpt"
    arrays = {f"t{i}": np.full((64, 64), i, np.float32) for i in range(4)}
    index = save_sharded(arrays, ckpt, max_shard_size="40KB")
    shards = sorted(n for n in os.listdir(ckpt) if n.endswith(".safetensors"))
    assert len(shards) >= 2
    # The whole directory on NFS: every shard is pread.
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", _mount_table(tmp_path, {ckpt: "nfs4"}))
    with safe_open(index, "np") as f:
        for name in f.offset_keys():
            np.testing.assert_array_equal(f.get_tensor(name), arrays[name])
    _only_pread(opened, *shards)
    # Only the second shard's file on FUSE (a file can be a mount point): only it is pread.
    opened.clear()
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", _mount_table(tmp_path, {ckpt / shards[1]: "fuse.gcsfuse"}))
    with safe_open(ckpt, "np") as f:  # the directory: its index
        assert len(f.get_tensors()) == len(arrays)
    by_shard = {n: cls for cls, n in opened if n.endswith(".safetensors")}
    assert by_shard == {s: "PreadSource" if s == shards[1] else "MmapSource" for s in shards}


def test_a_sharded_checkpoint_reads_the_mount_table_once(
    tmp_path: Path, opened: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading /proc/self/mountinfo costs about as much as opening a small shard; a checkpoint of
    # N shards reads it once (not N + 1 times) and still decides per shard (test above).
    from pysafetensors.io import fstype

    ckpt = tmp_path / "ckpt"
    arrays = {f"t{i}": np.full((64, 64), i, np.float32) for i in range(6)}
    index = save_sharded(arrays, ckpt, max_shard_size="40KB")
    shards = [n for n in os.listdir(ckpt) if n.endswith(".safetensors")]
    assert len(shards) >= 3
    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", _mount_table(tmp_path, {ckpt: "nfs4"}))
    reads = []
    real = fstype.read_mountinfo
    monkeypatch.setattr(fstype, "read_mountinfo", lambda: reads.append(1) or real())
    with safe_open(index, "np") as f:
        assert len(f.get_tensors()) == len(arrays)
    _only_pread(opened, *shards)
    assert len(reads) == 1
    reads.clear()
    with safe_open(index, "np", backend="mmap") as f:  # a backend asked for: no table at all
        f.get_tensors()
    assert reads == []


def _cli(*args: str) -> tuple[int, str, str]:
    from pysafetensors.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", [
    ["inspect", "{}"], ["stats", "{}"], ["id", "{}"], ["validate", "{}"], ["metadata", "{}", "get"],
    ["diff", "{}", "{}"], ["merge", "{}", "{out}/merged.safetensors"], ["shard", "{}", "{out}/sharded"],
])
def test_cli(command: list[str], remote_dir: Path, opened: list[tuple[str, str]]) -> None:
    path = str(remote_dir / "m.safetensors")
    args = [a.replace("{}", path).replace("{out}", str(remote_dir)) for a in command]
    code, _, err = _cli(*args)
    assert code == 0, err
    _only_pread(opened, "m.safetensors")


# --- convert: its inputs too ------------------------------------------------------------------


@pytest.fixture
def mapped(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file name behind every ``mmap.mmap`` made (the real map is still made)."""
    import mmap

    log: list[str] = []
    real = mmap.mmap

    def spy(fileno: int, *args: Any, **kwargs: Any) -> Any:
        log.append(os.path.basename(os.readlink(f"/proc/self/fd/{fileno}")) if fileno >= 0 else "<anonymous>")
        return real(fileno, *args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", spy)
    return log


def _checkpoints(d: Path) -> dict[str, Path]:
    """The same tensors as every kind convert reads: .npy, .npz, torch zip and torch legacy."""
    files = {"npy": d / "a.npy", "npz": d / "m.npz"}
    np.save(files["npy"], ARRAYS["a"])
    np.savez(files["npz"], **ARRAYS)
    if importlib.util.find_spec("torch"):
        import torch

        state = {k: torch.from_numpy(v) for k, v in ARRAYS.items()}
        files["torch-zip"], files["torch-legacy"] = d / "zip.pt", d / "legacy.pt"
        torch.save(state, files["torch-zip"])
        torch.save(state, files["torch-legacy"], _use_new_zipfile_serialization=False)
    return files


def test_convert(remote_dir: Path, opened: list[tuple[str, str]], mapped: list[str]) -> None:
    from pysafetensors.convert import convert_file

    for kind, src in _checkpoints(remote_dir).items():
        opened.clear()
        mapped.clear()
        report = convert_file(src, remote_dir / f"{kind}.safetensors")
        assert report.source_kind == kind and report.verified
        _only_pread(opened, src.name, f"{kind}.safetensors")  # the input, then the output read back
        assert src.name not in mapped, (kind, mapped)
        with safe_open(remote_dir / f"{kind}.safetensors", "np") as f:
            np.testing.assert_array_equal(f.get_tensor("tensor" if kind == "npy" else "a"), ARRAYS["a"])


def test_convert_is_mapped_on_a_local_disk(tmp_path: Path, opened: list[tuple[str, str]], mapped: list[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the same conversions on a local disk still map the input (zero copy)."""
    from pysafetensors.convert import convert_file

    monkeypatch.setenv("PYSAFETENSORS_MOUNTINFO", _mount_table(tmp_path, {}))
    for kind, src in _checkpoints(tmp_path).items():
        opened.clear()
        convert_file(src, tmp_path / f"{kind}.safetensors")
        assert ("MmapSource", src.name) in opened, (kind, opened)


def test_cli_convert(remote_dir: Path, opened: list[tuple[str, str]], mapped: list[str]) -> None:
    src = _checkpoints(remote_dir)["npz"]
    code, out, err = _cli("convert", str(src), str(remote_dir / "out.safetensors"))
    assert code == 0, err
    assert "verified" in out
    _only_pread(opened, "m.npz")
    assert "m.npz" not in mapped


def test_cli_in_a_subprocess(remote_dir: Path, tmp_path: Path) -> None:
    """The environment variable reaches a fresh interpreter too (how the CLI really runs)."""
    import subprocess

    code = (
        "import sys; from pysafetensors.io import sources; seen = []\n"
        "for cls in (sources.MmapSource, sources.PreadSource):\n"
        "    real = cls.__init__\n"
        "    def init(self, path, name=None, _r=real, _c=cls): seen.append(_c.__name__); _r(self, path, name)\n"
        "    cls.__init__ = init\n"
        "from pysafetensors.cli.main import main\n"
        "rc = main(['stats', sys.argv[1]]); print(sorted(set(seen))); sys.exit(rc)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code, str(remote_dir / "m.safetensors")], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "['PreadSource']"


def test_staging(remote_dir: Path, opened: list[tuple[str, str]]) -> None:
    pytest.importorskip("torch")
    from pysafetensors.staging import load_to_device

    out = load_to_device(remote_dir / "m.safetensors", "cpu")
    assert set(out) == set(ARRAYS)
    _only_pread(opened, "m.safetensors")


def test_distributed_loaders(remote_dir: Path, opened: list[tuple[str, str]], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    from pysafetensors.distributed import load_file_cooperative, load_partition, load_tensor_parallel

    path = remote_dir / "m.safetensors"
    assert set(load_partition(path, framework="np", rank=0, world_size=1)) == set(ARRAYS)
    _only_pread(opened, "m.safetensors")
    opened.clear()
    assert set(load_tensor_parallel(path, {"a": 0}, framework="np", rank=0, world_size=1)) == set(ARRAYS)
    _only_pread(opened, "m.safetensors")
    opened.clear()
    dist.init_process_group("gloo", init_method=(tmp_path / "store").as_uri(), rank=0, world_size=1)
    try:
        got = load_file_cooperative(path)
    finally:
        dist.destroy_process_group()
    assert torch.equal(got["a"], torch.from_numpy(ARRAYS["a"]))
    _only_pread(opened, "m.safetensors")


# --- a mistyped backend -----------------------------------------------------------------------


def _callers(path: Path) -> dict[str, Any]:
    from pysafetensors.distributed import load_partition, load_tensor_parallel
    from pysafetensors.handle import open_file

    calls: dict[str, Any] = {
        "safe_open": lambda b: safe_open(path, "np", backend=b),
        "handle.open_file": lambda b: open_file(path, b),
        "load_partition": lambda b: load_partition(path, framework="np", rank=0, world_size=1, backend=b),
        "load_tensor_parallel": lambda b: load_tensor_parallel(path, {}, framework="np", rank=0, world_size=1, backend=b),
    }
    for face in FACES:
        calls[f"{face}.load_file"] = lambda b, face=face: importlib.import_module(f"pysafetensors.{face}").load_file(
            path, backend=b
        )
    return calls


@pytest.mark.parametrize("backend", ["mmaap", "Pread", "", 0])
def test_a_mistyped_backend_is_refused_by_every_caller(tmp_path: Path, backend: Any) -> None:
    path = tmp_path / "m.safetensors"
    save_file(ARRAYS, path)
    for caller, call in _callers(path).items():
        with pytest.raises(InvalidBackend, match="is invalid"):
            call(backend)
            pytest.fail(f"{caller} accepted backend={backend!r}")
    index = save_sharded({f"t{i}": np.zeros(3000, np.float32) for i in range(3)}, tmp_path / "ckpt", max_shard_size="20KB")
    with pytest.raises(InvalidBackend):
        safe_open(index, "np", backend=backend)
