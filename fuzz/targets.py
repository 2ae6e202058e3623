"""Fuzz targets: each takes input bytes and a seeded RNG and raises only on a bug.

A target may let a ``SafetensorError`` (or ``FileNotFoundError``) escape: that is a clean
rejection.  Anything else escaping, a wrong answer caught by an oracle (``FuzzBug``), a crash
or a hang is a bug.  ``classify`` turns one run into ``None`` (fine) or a report string.
"""

from __future__ import annotations

import importlib
import os
import random
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pysafetensors import SafetensorError, deserialize, safe_open
from pysafetensors.format import Header, parse_header, parse_header_length
from pysafetensors.format import header as header_mod

from .differential import COUNTS as DIFFERENTIAL_COUNTS
from .differential import Disagreement, compare, differential_input, large_input
from .gen import random_index, random_input, sample_file

ALLOWED = (SafetensorError, FileNotFoundError)


class FuzzBug(AssertionError):
    """An oracle disagreed: the code under test gave a wrong answer without raising."""


def target_header(data: bytes, rng: random.Random) -> None:
    """The pure core: length prefix, then the header JSON and layout rules."""
    n = parse_header_length(data[:8], len(data))
    header = parse_header(data[8 : 8 + n], len(data))
    for t in header.tensors:
        if not 0 <= t.begin <= t.end <= header.data_size:
            raise FuzzBug(f"accepted tensor {t.name!r} with offsets outside the data: {t}")
        if t.nelements * t.dtype.bits != 8 * (t.end - t.begin):
            raise FuzzBug(f"accepted tensor {t.name!r} whose size does not match its shape: {t}")
    if header.data_start + header.data_size != len(data):
        raise FuzzBug("accepted a header that does not cover the file exactly")


def _verdict(parse: Callable[[], Header]) -> Header | tuple[type, str]:
    """The Header, or the SafetensorError's class and message."""
    try:
        return parse()
    except SafetensorError as e:
        return type(e), str(e)


def target_fast_path(data: bytes, rng: random.Random) -> None:
    """parse_header's private fast paths against the rule set alone (``_careful_header``).

    parse_header gives the rules' Header or raises the rules' error (same class, same message),
    whichever path it took; and each fast path, json's and msgspec's (the ``fast`` extra, used
    by parse_header from ``TYPED_FROM`` on), either steps aside (None) or returns exactly the
    rules' Header, never a Header where the rules refuse.  Its inputs (``fast_path_input``)
    include headers of 512 KiB and more, so msgspec's path is explored through parse_header.
    """
    n = parse_header_length(data[:8], len(data))  # a bad prefix: a clean rejection
    header, size = data[8 : 8 + n], len(data)
    careful = _verdict(lambda: header_mod._careful_header(header, size))
    parsed = _verdict(lambda: parse_header(header, size))
    if parsed != careful:
        raise FuzzBug(f"parse_header gives {parsed!r:.300}, the rules {careful!r:.300}")
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError:
        return  # neither fast path sees a header that is not UTF-8
    paths: list[tuple[str, Callable[[], Any]]] = [("json", lambda: header_mod._fast_header(text, n, size))]
    typed = header_mod._typed_entries()
    if typed is not None:
        paths.append(("msgspec", lambda: header_mod._typed_header.fast_header(text, n, size, typed, Header)))
    for path, fast in paths:
        try:
            answer = fast()
        except Exception as e:  # a fast path steps aside: it never raises, not even a SafetensorError
            raise FuzzBug(f"the {path} fast path raised {type(e).__name__}: {e}") from e
        if answer is not None and answer is not header_mod._typed_header.NOT_CANONICAL and answer != careful:
            raise FuzzBug(f"the {path} fast path gives {answer!r:.300}, the rules {careful!r:.300}")


def target_deserialize(data: bytes, rng: random.Random) -> None:
    out = deserialize(data)
    for name, info in out:
        if not isinstance(info["data"], bytes):
            raise FuzzBug(f"deserialize gave {type(info['data'])} data for {name!r}")


def _exercise(handle: Any, rng: random.Random) -> None:
    """keys/metadata, every tensor, and random slices checked against numpy indexing."""
    keys = handle.keys()
    if keys != sorted(handle.offset_keys()):
        raise FuzzBug("keys() is not the sorted offset_keys()")
    handle.metadata()
    for name in keys:
        full = handle.get_tensor(name)
        # Index the raw bytes (void items), so e.g. BOOL bytes other than 0/1 compare as stored.
        raw = full.view(np.dtype((np.void, full.itemsize)))
        sl = handle.get_slice(name)
        if list(full.shape) != sl.get_shape():
            raise FuzzBug(f"{name!r}: get_tensor shape {full.shape} != get_slice shape {sl.get_shape()}")
        for _ in range(3):
            index = random_index(rng, full.ndim)
            try:
                got = sl[index]
            except SafetensorError:
                continue
            # Upstream reads a bool index as the int it is (True is 1), not as numpy's new axis.
            items = index if isinstance(index, tuple) else (index,)
            as_numpy = tuple(int(i) if isinstance(i, bool) else i for i in items)
            try:
                want = raw[as_numpy if isinstance(index, tuple) else as_numpy[0]]
            except (IndexError, TypeError, ValueError) as e:
                raise FuzzBug(f"{name!r}{list(full.shape)}[{index!r}] accepted but numpy rejects it: {e}") from None
            if got.shape != np.shape(want) or got.tobytes() != np.asarray(want).tobytes():
                raise FuzzBug(f"{name!r}{list(full.shape)}[{index!r}]: slice differs from numpy indexing")
    try:
        handle.get_tensor("\x00no such tensor")
    except KeyError:
        pass
    else:
        raise FuzzBug("get_tensor of a missing name did not raise")


def target_open_bytes(data: bytes, rng: random.Random) -> None:
    with safe_open(data, framework="np") as f:
        _exercise(f, rng)


def _with_file(data: bytes, body: Callable[[str], None]) -> None:
    fd, path = tempfile.mkstemp(suffix=".safetensors", prefix="fuzz-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        body(path)
    finally:
        os.unlink(path)


def target_open_file(data: bytes, rng: random.Random) -> None:
    def body(path: str) -> None:
        backend = rng.choice(["mmap", "pread"])
        with safe_open(path, framework="np", backend=backend) as f:
            _exercise(f, rng)
        f.close()  # idempotent
        try:
            f.keys()
        except SafetensorError:
            pass
        else:
            raise FuzzBug("keys() after close did not raise")

    _with_file(data, body)


def target_faces(data: bytes, rng: random.Random) -> None:
    """The bytes and file-object entry points: numpy.load, torch.load, safe_open(BytesIO)."""
    import io

    from pysafetensors.numpy import load as np_load

    arrays = np_load(data)
    with safe_open(io.BytesIO(data), framework="np") as f:
        if f.keys() != sorted(arrays):
            raise FuzzBug("safe_open(BytesIO) keys differ from numpy.load")
        for name, arr in arrays.items():
            if f.get_tensor(name).tobytes() != arr.tobytes():
                raise FuzzBug(f"{name!r}: safe_open(BytesIO) data differs from numpy.load")
    try:
        from pysafetensors.torch import load as pt_load
    except ImportError:
        return
    tensors = pt_load(data)
    if list(tensors) != list(arrays):
        raise FuzzBug("torch.load and numpy.load disagree on the tensor names")


def _torch_bytes(t: Any) -> Any:
    import torch

    if not t.numel():
        return torch.zeros(0, dtype=torch.uint8)
    # A fresh C-order copy: torch calls a size-1 dim with any stride "contiguous".
    flat = torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1).view(torch.uint8)
    # BOOL bytes other than 0/1 are all "true"; indexing may normalise them.
    return flat != 0 if t.dtype == torch.bool else flat


def target_open_torch(data: bytes, rng: random.Random) -> None:
    """framework="pt": get_slice must behave exactly like torch indexing of the whole tensor
    (same result, or the same builtin error type: torch's rules are the documented semantics)."""
    try:
        import torch

        from pysafetensors._adapters.torch import _expand_ellipses as expand_ellipses
        from pysafetensors._adapters.torch import _torch_index_may_overflow as torch_may_overflow
    except ImportError:
        return
    warnings.simplefilter("ignore", UserWarning)  # torch: list-as-tuple index deprecation
    with safe_open(data, framework="pt") as f:
        for name in f.keys():  # noqa: SIM118 - a handle, not a dict
            full = f.get_tensor(name)
            if not isinstance(full, torch.Tensor):
                raise FuzzBug(f"get_tensor({name!r}) returned {type(full)}")
            sl = f.get_slice(name)
            for _ in range(3):
                index = random_index(rng, full.ndim)
                if torch_may_overflow(tuple(full.shape), index):
                    # Torch computes strides and offsets in wrapping int64 here: its indexing
                    # gives e.g. "invalid storage offset -14", negative strides or worse, so it
                    # is no oracle.  get_slice must still answer cleanly.
                    try:
                        got = sl[index]
                    except (SafetensorError, IndexError, TypeError):
                        continue
                    if got.numel() > full.numel():
                        raise FuzzBug(f"{name!r}{list(full.shape)}[{index!r}]: a slice has more elements than the tensor")
                    continue
                try:
                    # Several "...": torch itself may read past the last dim (and segfault), so
                    # it is asked the in-range expansion instead; one past the end must be
                    # refused cleanly.  (tests/frameworks/test_torch.py checks the expansion
                    # against an independent replay of torch's indexing loop.)
                    torch_index = expand_ellipses(index, full.ndim)
                except IndexError:
                    try:
                        sl[index]
                    except (SafetensorError, IndexError):
                        continue
                    raise FuzzBug(f"{name!r}{list(full.shape)}[{index!r}]: accepted an index torch reads out of bounds") from None
                try:
                    want, want_err = full[torch_index], None
                except (IndexError, TypeError, ValueError, RuntimeError) as e:
                    want, want_err = None, e
                try:
                    got, got_err = sl[index], None
                except SafetensorError:
                    continue  # a clean rejection is always allowed
                except (IndexError, TypeError, ValueError, RuntimeError) as e:
                    got, got_err = None, e
                if (want_err is None) != (got_err is None) or (want_err and type(want_err) is not type(got_err)):
                    raise FuzzBug(f"{name!r}{list(full.shape)}[{index!r}]: torch gives {want_err!r}, get_slice {got_err!r}")
                if want is not None and (
                    got.shape != want.shape or got.dtype != want.dtype or not torch.equal(_torch_bytes(got), _torch_bytes(want))
                ):
                    raise FuzzBug(f"{name!r}{list(full.shape)}[{index!r}]: slice differs from torch indexing")


def target_gguf(data: bytes, rng: random.Random) -> None:
    """GGUF files, valid and broken: fuzz/gguf_target.py."""
    from .gguf_target import target_gguf as run

    run(data, rng)


_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None  # the temp files upstream opens by path


def target_differential(data: bytes, rng: random.Random) -> None:
    """Against upstream safetensors: the same verdict at safe_open and in deserialize, and the
    same keys, metadata, dtypes, shapes and bytes wherever both accept (fuzz/differential.py).
    Its inputs come from ``differential_input``; the categories are counted in
    ``DIFFERENTIAL_COUNTS``.

    ``compare`` sorts every refusal itself, so anything escaping it (a SafetensorError of ours
    included: it would otherwise pass for a clean rejection, counted nowhere) is a bug.  Such an
    input, or one cut short by the hang alarm, counts as a disagreement, so the categories
    always add up to the inputs."""
    try:
        compare(data, _SCRATCH)
    except Disagreement as e:
        DIFFERENTIAL_COUNTS["disagreements"] += 1
        raise FuzzBug(str(e)) from None
    except Exception as e:
        DIFFERENTIAL_COUNTS["disagreements"] += 1
        raise FuzzBug(f"compare() raised {type(e).__name__}: {e}") from e
    except BaseException:  # the runner's hang alarm: reported by the runner as a hang
        DIFFERENTIAL_COUNTS["disagreements"] += 1
        raise


_SLOW_START: list[bool] = []  # set once _selftest_slow_start is warmed up


def _slow_start() -> None:
    """The warm-up of ``_selftest_slow_start``: a first import slower than the test's hang limit."""
    time.sleep(2)
    _SLOW_START.append(True)


def _selftest_slow_start(data: bytes, rng: random.Random) -> None:
    """Checks the runner warms a target up before it starts the hang alarm: run with
    ``--hang-seconds 1``, the 2 s warm-up must not be reported as a hang."""
    if not _SLOW_START:
        raise FuzzBug("the runner ran the target before its warm-up")


def _selftest_crash(data: bytes, rng: random.Random) -> None:
    """Kills its process, as a segfault in an extension would: checks the runner notices."""
    import signal

    os.kill(os.getpid(), signal.SIGSEGV)


def _selftest_hang(data: bytes, rng: random.Random) -> None:
    """Never returns, though it swallows every Exception as the differential oracle does:
    checks the runner's hang alarm still ends it."""
    while True:
        try:
            time.sleep(1)
        except Exception:  # noqa: BLE001, S110 - on purpose: the alarm must not be one of these
            pass


TARGETS: dict[str, Callable[[bytes, random.Random], None]] = {
    "header": target_header,
    "deserialize": target_deserialize,
    "open_bytes": target_open_bytes,
    "open_file": target_open_file,
    "open_torch": target_open_torch,
    "faces": target_faces,
    "gguf": target_gguf,
    "differential": target_differential,
    "fast_path": target_fast_path,
    # Names starting with "_" are not part of "all"; they test the runner itself.
    "_selftest_crash": _selftest_crash,
    "_selftest_hang": _selftest_hang,
    "_selftest_slow_start": _selftest_slow_start,
}


def fast_path_input(rng: random.Random) -> bytes:
    """The fast_path target's inputs: the differential generator's and the mutators', and one
    in 16 a header of 512 KiB or more (msgspec's path in parse_header)."""
    which = rng.randrange(16)
    if which == 0:
        return large_input(rng)
    return differential_input(rng) if which % 2 else random_input(rng)


# The input generator of each target (seeded by the input's seed); the others share random_input.
INPUTS: dict[str, Callable[[random.Random], bytes]] = {"differential": differential_input, "fast_path": fast_path_input}

# Modules targets import on their first input (frameworks, upstream, gguf-py, msgspec): slow
# to import on a loaded machine.  The runner warms each target up before it starts timing
# inputs, so such an import is never taken for a hang, nor cut short by the hang alarm (which
# would leave the module half-imported and every later input failing).
_LAZY_MODULES = {
    "open_torch": ("torch",),
    "faces": ("torch",),
    "gguf": ("gguf",),
    "differential": ("numpy", "ml_dtypes", "torch", "safetensors"),
    "fast_path": ("msgspec",),
}
_WARM_UPS: dict[str, Callable[[], None]] = {"_selftest_slow_start": _slow_start}


def warm_up(name: str) -> str | None:
    """Make target ``name``'s first input as cheap as its others: import the modules it loads
    lazily, then run it once on a small valid file of every dtype, for the lazy imports no list
    names (our framework adapters, torch's float8 paths...), leaving the differential counts as
    they were.  The runner's selftests have their own warm-up (or none).  Returns a report
    when that run found a bug, as ``classify`` does."""
    if name.startswith("_"):
        _WARM_UPS.get(name, lambda: None)()
        return None
    for module in _LAZY_MODULES.get(name, ()):
        try:
            importlib.import_module(module)
        except ImportError:
            pass  # an optional package: the target does without it
    if name == "fast_path":
        header_mod._typed_entries()  # builds msgspec's decoder, once per process
    counts = DIFFERENTIAL_COUNTS.copy()
    try:
        return classify(name, sample_file(), 0)
    finally:
        DIFFERENTIAL_COUNTS.clear()
        DIFFERENTIAL_COUNTS.update(counts)


def input_for(name: str, seed: int) -> bytes:
    """The input target ``name`` gets for ``seed`` (``--seed S --count 1`` replays it)."""
    return INPUTS.get(name, random_input)(random.Random(seed))


def classify(name: str, data: bytes, seed: int) -> str | None:
    """Run one target on one input; None when it behaved, else a report with the traceback."""
    try:
        TARGETS[name](data, random.Random(seed))
    except ALLOWED:
        return None
    except Exception:  # noqa: BLE001 - any other exception is exactly what the fuzzer hunts
        return traceback.format_exc()
    return None
