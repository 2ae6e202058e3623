"""A sharded save killed (SIGKILL) at any file-system step, or stopped by a full disk, leaves a
directory that reads as the old checkpoint, the new one, or is refused: never a mix of the two,
and never half a set presented as a checkpoint.  The same holds for what a Hugging Face style
loader (index, else model.safetensors; no checkpoint ids) would read.

The saving process is a real subprocess; a wrapper around os.replace/remove/unlink/rmdir counts
every step and sends the process SIGKILL before step k, for every k.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from _reliability_helpers import ROOT

from pysafetensors.cli.validate import compute_validate
from pysafetensors.errors import CheckpointMismatch, SafetensorError
from pysafetensors.format.index import CHECKPOINT_ID_KEY
from pysafetensors.numpy import load_file, save_sharded

SIZES = {"one": "5GB", "two": 1200, "three": 1000}  # 6 tensors of 400 bytes: 1, 2 or 3 shards


def version(k: int) -> dict[str, np.ndarray]:
    return {f"w{i}": np.full(100, k * 100 + i, dtype=np.float32) for i in range(6)}


# The saver: prepares the old checkpoint in each directory, then saves version 1 over it (as
# save_sharded, or through `pysafetensors shard --force`) in a forked child that is killed with
# SIGKILL before its file-system step k.  Directory "k0" runs to the end and counts the steps;
# "k1" ... "kN" are then killed at each one.  Prints {"steps": N, "status": {k: waitpid status}}.
SAVER = r"""
import json, os, signal, sys
import numpy as np
from pysafetensors.cli.main import main
from pysafetensors.numpy import save_file, save_sharded

base, old, how = sys.argv[1], sys.argv[2], sys.argv[3]
old_size, new_size = (int(v) if v.isdigit() else v for v in sys.argv[4:6])
real = {name: getattr(os, name) for name in ("replace", "rename", "remove", "unlink", "rmdir")}

def version(k):
    return {f"w{i}": np.full(100, k * 100 + i, dtype=np.float32) for i in range(6)}

source = os.path.join(base, "source.safetensors")
save_file(version(1), source)

def save_killed_at(directory, kill_at):
    os.makedirs(directory)
    if old != "none":
        save_sharded(version(0), directory, max_shard_size=old_size)
    pid = os.fork()
    if pid == 0:
        steps = [0]
        def counted(fn):
            def step(*args, **kwargs):
                steps[0] += 1
                if steps[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                return fn(*args, **kwargs)
            return step
        for name, fn in real.items():
            setattr(os, name, counted(fn))
        if how == "cli":
            code = main(["shard", source, directory, "--max-shard-size", str(new_size), "--force", "--quiet"])
        else:
            save_sharded(version(1), directory, max_shard_size=new_size)
            code = 0
        with open(os.path.join(base, "steps"), "w") as f:
            f.write(str(steps[0]))
        os._exit(code)
    return os.waitpid(pid, 0)[1]

status = {0: save_killed_at(os.path.join(base, "k0"), 0)}
with open(os.path.join(base, "steps")) as f:
    steps = int(f.read())
for k in range(1, steps + 1):
    status[k] = save_killed_at(os.path.join(base, f"k{k}"), k)
print(json.dumps({"steps": steps, "status": status}))
"""


def run_saver(base: str, old: str, new: str, how: str) -> tuple[int, dict[int, int]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", SAVER, base, old, how, str(SIZES.get(old, 0)), str(SIZES[new])],
                       check=False, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["steps"], {int(k): v for k, v in out["status"].items()}


def ours(directory: str) -> str:
    """What pysafetensors reads from the directory: 'v0', 'v1' or 'refused'."""
    try:
        loaded = load_file(directory)
    except (SafetensorError, FileNotFoundError):
        return "refused"
    return which(loaded)


def huggingface_style(directory: str) -> str:
    """What a loader that trusts the index and knows no checkpoint ids reads (transformers'
    rule: the index if there is one, else model.safetensors)."""
    from safetensors.numpy import load_file as upstream_load

    index = os.path.join(directory, "model.safetensors.index.json")
    try:
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            loaded = {}
            for shard in sorted(set(weight_map.values())):
                part = upstream_load(os.path.join(directory, shard))
                loaded.update({k: v for k, v in part.items() if weight_map.get(k) == shard})
            if set(weight_map) - set(loaded):
                return "refused"
        else:
            loaded = upstream_load(os.path.join(directory, "model.safetensors"))
    except Exception:  # noqa: BLE001 - a missing file or upstream's SafetensorError: it would not load
        return "refused"
    return which(loaded)


def which(loaded: dict[str, np.ndarray]) -> str:
    for k in (0, 1):
        want = version(k)
        if sorted(loaded) == sorted(want) and all(np.array_equal(loaded[n], want[n]) for n in want):
            return f"v{k}"
    pytest.fail(f"a MIXED checkpoint was read: {[(n, float(v[0])) for n, v in sorted(loaded.items())]}")


def validate_agrees(directory: str, state: str) -> None:
    """`validate` says valid exactly when the directory reads as a whole checkpoint."""
    try:
        valid = compute_validate(directory).valid
    except (SafetensorError, FileNotFoundError):
        valid = False
    assert valid == (state != "refused"), (state, valid)


def snapshot(directory: str) -> dict[str, bytes]:
    out = {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = f.read()
    return out


@pytest.mark.parametrize(
    ("old", "new", "how"),
    [
        ("three", "three", "api"),  # same shard names: each new shard replaces an old one
        ("two", "three", "api"),  # other names: the old set stands until the index switches
        ("none", "three", "api"),  # an empty directory: never a lone shard read as a checkpoint
        ("one", "three", "api"),  # model.safetensors, then shards
        ("three", "one", "api"),  # shards, then model.safetensors
        ("three", "three", "cli"),  # pysafetensors shard --force
    ],
)
def test_sigkill_at_every_step_never_yields_a_mixed_checkpoint(tmp_path: Any, old: str, new: str, how: str) -> None:
    base = os.fspath(tmp_path)
    steps, status = run_saver(base, old, new, how)
    assert status[0] == 0 and steps >= 3
    assert ours(os.path.join(base, "k0")) == "v1" and huggingface_style(os.path.join(base, "k0")) == "v1"
    seen: set[str] = set()
    for k in range(1, steps + 1):
        directory = os.path.join(base, f"k{k}")
        assert os.WIFSIGNALED(status[k]) and os.WTERMSIG(status[k]) == signal.SIGKILL, (k, status[k])
        state = ours(directory)  # fails the test on a mixed read
        seen.add(state)
        huggingface_style(directory)  # the same for a loader without checkpoint ids
        validate_agrees(directory, state)
        # The next save completes the job and clears what the dead one left behind.
        save_sharded(version(1), directory, max_shard_size=SIZES[new])
        assert ours(directory) == "v1"
        assert not [n for n in os.listdir(directory) if n.startswith(".")], os.listdir(directory)
    if old != "none":
        assert "v0" in seen  # killed early, the old checkpoint is still there to read
    if new != "one":
        assert "v1" in seen  # killed while cleaning up, the new one is in place


def test_a_shard_from_another_save_is_detected(tmp_path: Any) -> None:
    # What checkpoint ids are for: two saves of the same shapes, one shard swapped between them
    # (a concurrent save, a partial copy), headers otherwise identical.
    a, b = tmp_path / "a", tmp_path / "b"
    save_sharded(version(0), a, max_shard_size=1000)
    save_sharded(version(1), b, max_shard_size=1000)
    shutil.copy(b / "model-00002-of-00003.safetensors", a / "model-00002-of-00003.safetensors")
    with pytest.raises(CheckpointMismatch, match="model-00002-of-00003.safetensors.*another save"):
        load_file(a)
    r = compute_validate(os.fspath(a))
    assert not r.valid and [p.code for p in r.problems] == ["checkpoint_mismatch"]
    assert r.problems[0].file == "model-00002-of-00003.safetensors"


def test_a_foreign_shard_under_a_huggingface_index_is_detected(tmp_path: Any) -> None:
    # An index without ids (transformers, huggingface_hub) and one shard of ours: mixed.
    hub = pytest.importorskip("huggingface_hub")
    torch = pytest.importorskip("torch")
    from pysafetensors.torch import save_sharded as torch_save_sharded

    state = {f"w{i}": torch.full((100,), float(i)) for i in range(6)}
    (tmp_path / "hub").mkdir()
    hub.save_torch_state_dict(state, tmp_path / "hub", max_shard_size=1000)
    torch_save_sharded({k: v + 1 for k, v in state.items()}, tmp_path / "ours", max_shard_size=1000)
    with open(tmp_path / "hub" / "model.safetensors.index.json") as f:
        assert CHECKPOINT_ID_KEY not in json.load(f)["metadata"]
    assert load_file(tmp_path / "hub")["w0"][0] == 0  # no ids on either side: fine
    shutil.copy(tmp_path / "ours" / "model-00001-of-00003.safetensors",
                tmp_path / "hub" / "model-00001-of-00003.safetensors")
    with pytest.raises(CheckpointMismatch):
        load_file(tmp_path / "hub")


# --- a full disk ------------------------------------------------------------------------------


def _mount_tmpfs(directory: str, size: str) -> bool:
    os.makedirs(directory)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", directory], check=False,
                       capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize("disk", ["file_size_limit", "small_tmpfs"])
def test_full_disk_midway_leaves_the_old_checkpoint(tmp_path: Any, disk: str) -> None:
    # A new set whose last shard does not fit: every earlier shard was written, none is visible.
    directory = os.path.join(os.fspath(tmp_path), "d")
    limit = 0  # no file size limit
    mounted = disk == "small_tmpfs" and _mount_tmpfs(directory, "1m")
    if not mounted:
        # No tmpfs here (not root): the kernel's per-process file size limit gives a real
        # EFBIG at the same point instead.
        os.makedirs(directory, exist_ok=True)
        limit = 600_000
    try:
        save_sharded(version(0), directory, max_shard_size=1000)
        before = snapshot(directory)
        code = (
            "import resource, signal, sys\n"
            "if int(sys.argv[2]):  # EFBIG past the limit, instead of SIGXFSZ\n"
            "    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "    resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]),) * 2)\n"
            "import numpy as np\n"
            "from pysafetensors.numpy import save_sharded\n"
            "big = {f'w{i}': np.full(100, 100 + i, dtype=np.float32) for i in range(6)}\n"
            "big['w9_big'] = np.ones(300_000, np.float32)\n"  # 1.2 MB: a shard of its own, last
            "save_sharded(big, sys.argv[1], max_shard_size=1000)\n"
        )
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run([sys.executable, "-c", code, directory, str(limit)], check=False, capture_output=True,
                           text=True, env=env, timeout=120)
        assert r.returncode == 1, r.stderr
        assert "WriteError" in r.stderr and ("no room" in r.stderr or "File too large" in r.stderr), r.stderr
        assert snapshot(directory) == before  # untouched, no staging directory left
        assert sorted(os.listdir(directory)) == sorted(before)
        assert ours(directory) == "v0"
    finally:
        if mounted:
            subprocess.run(["umount", directory], check=True)
