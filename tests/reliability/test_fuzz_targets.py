"""The fuzz targets on a fixed batch of seeds, the runner end to end, and regression tests
for every bug the fuzzer found."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys

import numpy as np
import pytest
from _reliability_helpers import ROOT, run_python
from fuzz.gen import random_input
from fuzz.targets import TARGETS, classify

from pysafetensors import SafetensorError, deserialize, safe_open
from pysafetensors.errors import InvalidHeaderJson, UnsupportedShape
from pysafetensors.format import parse_header


def frame(header: dict | str, data: bytes = b"") -> bytes:
    h = (header if isinstance(header, str) else json.dumps(header)).encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize("target", sorted(t for t in TARGETS if not t.startswith("_")))
def test_targets_survive_a_fixed_batch(target: str) -> None:
    """Seeds 0..399 through each target: only SafetensorError may escape, and oracles agree."""
    bugs = [(seed, report) for seed in range(400) if (report := classify(target, random_input(random.Random(seed)), seed))]
    assert not bugs, f"{len(bugs)} bug(s); first (seed {bugs[0][0]}):\n{bugs[0][1]}"


@pytest.mark.slow
def test_runner_reports_no_bugs_and_a_summary() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), "--seconds", "4", "--seed", "7"],
        check=False, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "first seed 7" in proc.stdout and "no bugs" in proc.stdout


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), *args], check=False, capture_output=True, text=True, timeout=120
    )


def test_runner_reports_a_crash_with_its_seed(tmp_path: object) -> None:
    proc = _run("--target", "_selftest_crash", "--seconds", "30", "--seed", "5", "--count", "2", "--crash-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "CRASH (signal 11) on seed 5" in proc.stderr and "on seed 6" in proc.stderr


def test_runner_reports_a_hang(tmp_path: object) -> None:
    proc = _run("--target", "_selftest_hang", "--hang-seconds", "1", "--seconds", "30", "--seed", "3", "--count", "1", "--crash-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Hang" in proc.stdout and "seed 3" in proc.stderr
    assert (tmp_path / "_selftest_hang-3.safetensors").exists()  # type: ignore[operator]


def test_runner_warms_targets_up_before_the_hang_alarm(tmp_path: object) -> None:
    """A target whose warm-up (its first imports) outlasts the hang limit is not reported as
    hanging: the alarm times only the inputs.  (A slow first ``import torch`` under load once
    tripped the alarm and left torch half-imported for every later input.)"""
    proc = _run("--target", "_selftest_slow_start", "--hang-seconds", "1", "--seconds", "30", "--seed", "3",
                "--count", "2", "--crash-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 inputs" in proc.stdout and "no bugs" in proc.stdout


def test_warm_up_imports_what_the_differential_target_loads_lazily() -> None:
    pytest.importorskip("safetensors")
    pytest.importorskip("torch")
    code = (
        "import sys\n"
        "from fuzz.targets import DIFFERENTIAL_COUNTS, warm_up\n"
        "lazy = ('torch', 'safetensors', 'ml_dtypes', 'pysafetensors._adapters.torch')\n"
        "print(sorted(m for m in lazy if m in sys.modules))\n"
        "print(warm_up('differential'), sorted(m for m in lazy if m in sys.modules), sum(DIFFERENTIAL_COUNTS.values()))\n"
    )
    proc = run_python(code, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[]",
        "None ['ml_dtypes', 'pysafetensors._adapters.torch', 'safetensors', 'torch'] 0",  # and counted nothing
    ]


def test_help_lists_every_target() -> None:
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    listed = " ".join(proc.stdout.split()).split("comma list of: ")[1].split(" --")[0]
    assert listed.split(", ") == [t for t in TARGETS if not t.startswith("_")]
    assert "gguf" in listed  # the one a hand-written list had left out


# --- regressions ---------------------------------------------------------------------------

HUGE_DIM_ZERO_ELEMENTS = frame({"t": {"dtype": "F32", "shape": [2**63, 0], "data_offsets": [0, 0]}})


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_zero_element_tensor_with_a_dimension_over_int64(framework: str) -> None:
    """Found by the fuzzer (seed 4744): the header is valid, numpy/torch cannot build the
    array and raised ValueError/TypeError; now a SafetensorError (UnsupportedShape, a ValueError)."""
    if framework == "pt":
        pytest.importorskip("torch")
    assert deserialize(HUGE_DIM_ZERO_ELEMENTS)[0][1]["shape"] == [2**63, 0]  # bytes API: fine
    with safe_open(HUGE_DIM_ZERO_ELEMENTS, framework=framework) as f:
        assert f.keys() == ["t"]
        assert f.get_slice("t").get_shape() == [2**63, 0]
        with pytest.raises(UnsupportedShape, match="dimension #0"):
            f.get_tensor("t")
        with pytest.raises(UnsupportedShape):
            f.get_tensors()
        with pytest.raises(UnsupportedShape):
            f.get_slice("t")[:]
        assert tuple(f.get_slice("t")[0:3].shape) == (3, 0)  # a slice that fits is fine


@pytest.mark.parametrize(
    "shape", [[8738023609470716661, 0], [2**62, 0, 4], [0, 2**63 - 1]], ids=["ci-seed-302342157074", "3-axes", "zero-first"]
)
@pytest.mark.parametrize("framework", ["np", "flax", "tf", "mlx"])
def test_empty_tensor_whose_other_dims_overflow_numpy(framework: str, shape: list[int]) -> None:
    """Found by CI's fuzz run (seed 302342157074): every dim fits int64 and the tensor is empty,
    but numpy also refuses when the non-zero dims times the item size overflow, and raised
    ValueError('array is too big'). Now UnsupportedShape naming the tensor; torch, whose rule
    is per-dimension only, still builds it."""
    module = {"flax": "jax", "tf": "tensorflow", "mlx": "mlx.core"}.get(framework)
    if module:
        pytest.importorskip(module)
    data = frame({"t": {"dtype": "F64", "shape": shape, "data_offsets": [0, 0]}})
    with safe_open(data, framework=framework) as f:
        assert f.get_slice("t").get_shape() == shape
        with pytest.raises(UnsupportedShape, match="'t'.*numpy cannot represent"):
            f.get_tensor("t")
        with pytest.raises(UnsupportedShape):
            f.get_slice("t")[:]
    with pytest.raises(UnsupportedShape):
        __import__("pysafetensors.numpy").numpy.load(data)


def test_empty_tensor_whose_other_dims_overflow_numpy_is_fine_in_torch() -> None:
    torch = pytest.importorskip("torch")
    data = frame({"t": {"dtype": "F64", "shape": [2**62, 0, 4], "data_offsets": [0, 0]}})
    with safe_open(data, framework="pt") as f:
        assert f.get_tensor("t").shape == torch.Size([2**62, 0, 4])
        assert f.get_slice("t")[1:3].shape == torch.Size([2, 0, 4])


def test_more_axes_than_numpy_supports() -> None:
    data = frame({"t": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}, b"\0" * 4)
    with safe_open(data, framework="np") as f, pytest.raises(UnsupportedShape, match="65 dimensions"):
        f.get_tensor("t")
    torch = pytest.importorskip("torch")
    with safe_open(data, framework="pt") as f:
        assert f.get_tensor("t").shape == torch.Size([1] * 65)


T = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}


@pytest.mark.parametrize(
    "header",
    [
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":' + "[" * 126 + "]" * 126 + "}}",
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1e400}}',
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":' + "1" * 310 + "}}",
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":"\\ud800"}}',
        '{"a":{"dtype":"X"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
        '{"__metadata__":{"k":1,"k":"v"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
        "[" * 100_000 + "]" * 100_000,
    ],
    ids=["depth-128", "1e400", "310-digit-int", "surrogate-in-ignored", "bad-replaced-duplicate", "bad-replaced-metadata", "depth-100000"],
)
def test_serde_rejections_found_by_differential_testing(header: str) -> None:
    """Each of these was accepted before the header fix; upstream (serde_json) rejects it."""
    data = frame(header, b"\0" * 4)
    with pytest.raises(InvalidHeaderJson):
        parse_header(data[8 : len(data) - 4], len(data))


@pytest.mark.parametrize(
    "header",
    [
        '{"a":{"dtype":{"F32":null},"shape":[1],"data_offsets":[0,4]}}',
        '{"a":[{"F32":null},[1],[0,4]]}',
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":' + "[" * 125 + "]" * 125 + "}}",
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[1e308,1e-400,' + "1" * 309 + "]}}",
    ],
    ids=["dtype-map", "dtype-map-list-form", "depth-127", "numbers-in-range"],
)
def test_serde_acceptances_found_by_differential_testing(header: str) -> None:
    data = frame(header, b"\0" * 4)
    h = parse_header(data[8 : len(data) - 4], len(data))
    assert h.tensors[0].dtype.code == "F32" and h.tensors[0].shape == (1,)


def test_slices_of_random_files_match_numpy_indexing() -> None:
    """The open_bytes target's oracle on a known-good file, so a regression is obvious."""
    arr = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4)
    from pysafetensors.numpy import save

    with safe_open(save({"a": arr}), framework="np") as f:
        sl = f.get_slice("a")
        for index in [(0,), (1, slice(None, None, 2)), (Ellipsis, 3), (slice(0, 2), 1, slice(1, 4, 2)), ()]:
            assert np.array_equal(sl[index], arr[index]), index
        with pytest.raises(SafetensorError):
            sl[0, 0, 0, 0]


def test_torch_slices_of_an_empty_tensor_whose_strides_overflow() -> None:
    """Found by the fuzzer (seed 398532224781): torch builds an empty [2**63 - 1, 0, 2] tensor,
    but its own indexing computes wrapped int64 offsets ("invalid storage offset -14",
    "negative strides").  get_slice answers the indexes it plans itself and refuses the rest
    with UnsupportedShape instead of handing them to torch."""
    torch = pytest.importorskip("torch")
    data = frame({"t": {"dtype": "F8_E4M3", "shape": [2**63 - 1, 0, 2], "data_offsets": [0, 0]}})
    with safe_open(data, framework="pt") as f:
        s = f.get_slice("t")
        assert s[-6, 1:-7:2].shape == torch.Size([0, 2])
        assert s[1:3].shape == torch.Size([2, 0, 2])
        assert s[..., 1].shape == torch.Size([2**63 - 1, 0])
        with pytest.raises(UnsupportedShape, match="offsets would overflow"):
            s[None, -6]
        with pytest.raises(UnsupportedShape, match="offsets would overflow"):
            s[::-1]


def test_torch_shapes_whose_strides_overflow_and_huge_steps() -> None:
    """Found by the fuzzer (seeds 813976640797, 813976502671, and a segfault inside torch
    indexing at 813976630996): torch.empty([0, 6659647550359193781, 2]) raises RuntimeError
    ("Stride calculation overflowed"); [0, 2**63 - 1][9::2] makes torch compute a negative
    stride.  Ours: UnsupportedShape, and our own slice plan where it has one."""
    torch = pytest.importorskip("torch")
    data = frame({"t": {"dtype": "F8_E5M2", "shape": [0, 6659647550359193781, 2], "data_offsets": [0, 0]}})
    with safe_open(data, framework="pt") as f, pytest.raises(UnsupportedShape, match="torch cannot represent"):
        f.get_tensor("t")
    data = frame({"t": {"dtype": "F32", "shape": [0, 2**63 - 1], "data_offsets": [0, 0]}})
    with safe_open(data, framework="pt") as f:
        assert f.get_tensor("t").shape == torch.Size([0, 2**63 - 1])
        assert f.get_slice("t")[9::2].shape == torch.Size([0, 2**63 - 1])
        with pytest.raises(UnsupportedShape):
            f.get_slice("t")[None, 9::2]
    # A real tensor with a step so large that torch's stride x step wraps: refused, not garbage.
    data = frame({"t": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}, bytes(64))
    with safe_open(data, framework="pt") as f:
        assert f.get_slice("t")[:: 2**62].shape == torch.Size([1, 4])  # our plan: one row
        with pytest.raises(UnsupportedShape):
            f.get_slice("t")[None, :: 2**62]


def test_torch_get_slice_never_hands_torch_an_out_of_range_multi_ellipsis_index() -> None:
    """The fuzzer's rare, unreplayable open_torch segfault (caught under gdb at seed
    555000328559): with several "...", torch's fast path for an int index reads the size of a
    dim past the last one (at::indexing::impl::applySelect) before checking it, so whether it
    crashes depends on memory contents.  get_slice now expands the "..."s itself and answers
    an item past the end with torch's own IndexError ("Dimension out of range"), except a ':'
    there, which torch treats as a no-op (CI's hypothesis run found (..., ..., :) working in
    torch); multi-ellipsis indexes that stay in range keep torch's semantics."""
    torch = pytest.importorskip("torch")
    data = frame({"t": {"dtype": "U64", "shape": [0, 2, 1, 4], "data_offsets": [0, 0]},
                  "u": {"dtype": "F32", "shape": [2, 3, 4], "data_offsets": [0, 96]}}, bytes(96))
    with safe_open(data, framework="pt") as f:
        with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-4, 3\], but got 12\)"):
            f.get_slice("t")[(Ellipsis,) * 4 + (-3,)]
        with pytest.raises(IndexError, match="Dimension out of range"):
            f.get_slice("u")[..., 0, ..., 1]
        with pytest.raises(IndexError, match="Dimension out of range"):
            f.get_slice("u")[..., ..., 1:]
        with pytest.raises(IndexError, match="Dimension out of range"):
            f.get_slice("u")[..., ..., :, None]
        with pytest.raises(IndexError, match="may only hold ints, slices, bools and None"):
            f.get_slice("u")[..., [0], ...]
        full = f.get_tensor("u")
        # numpy integers are ints to torch, there too
        assert torch.equal(f.get_slice("u")[..., np.int64(1), ...], full[..., 1, ...])
        with pytest.raises(IndexError, match="Dimension out of range"):
            f.get_slice("u")[..., ..., np.int32(0)]
        # ':' past the end: torch's no-op, kept (what CI's hypothesis run found torch doing).
        assert torch.equal(f.get_slice("u")[..., ..., :], full)
        assert torch.equal(f.get_slice("u")[..., 1, ..., :], full[:, 1])
        assert f.get_slice("t")[..., ..., :].shape == torch.Size([0, 2, 1, 4])
        for index in [(Ellipsis, 0, Ellipsis), (Ellipsis, Ellipsis), (None, Ellipsis, 1, Ellipsis),
                      (Ellipsis, True, Ellipsis), (Ellipsis, None, 2, Ellipsis), (1, Ellipsis, -1, Ellipsis)]:
            assert torch.equal(f.get_slice("u")[index], full[index]), index


def test_f4_last_dimension_of_2_63_fits_torch_once_halved() -> None:
    """Found by the differential target (seed 158099651964): an empty F4 tensor whose last
    dimension is 2**63 is a float4_e2m1fn_x2 tensor of last dimension 2**62 in torch, which
    upstream gives; ours refused it, checking the file's shape instead of torch's."""
    torch = pytest.importorskip("torch")
    data = frame({"t": {"dtype": "F4", "shape": [0] * 65 + [2**63], "data_offsets": [0, 0]}})
    with safe_open(data, framework="pt") as f:
        t = f.get_tensor("t")
    assert t.dtype == torch.float4_e2m1fn_x2 and t.shape == torch.Size([0] * 65 + [2**62])
    from fuzz.differential import compare

    assert compare(data) in ("both_accept", "ours_extends", "expected_better")
    with safe_open(frame({"t": {"dtype": "F4", "shape": [2**63, 0], "data_offsets": [0, 0]}}), framework="pt") as f, \
            pytest.raises(UnsupportedShape):
        f.get_tensor("t")  # the first dimension does not halve


def test_empty_torch_tensor_whose_strides_wrap_is_refused_not_built() -> None:
    """Found by the long differential run (seed 45531069488): upstream's torch face returns an
    empty [0, 5, 2**63 - 1] tensor with strides wrapped around int64 (torch.empty refuses the
    shape); ours raises UnsupportedShape.  The differential target counts it as expected-better."""
    pytest.importorskip("torch")
    data = frame({"t": {"dtype": "F8_E4M3FNUZ", "shape": [0, 5, 2**63 - 1], "data_offsets": [0, 0]}})
    with safe_open(data, framework="pt") as f, pytest.raises(UnsupportedShape, match="strides overflow"):
        f.get_tensor("t")
    from fuzz.differential import compare

    assert compare(data) == "expected_better"
