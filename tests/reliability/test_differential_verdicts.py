"""Our accept/reject verdict equals upstream safetensors 0.8.0's on valid files and mutants.

Upstream's ``deserialize`` is the oracle (its ``safe_open`` runs the same checks).  A
disagreement fails with the input bytes that show it.
"""

from __future__ import annotations

import os
import random
import struct

import pytest
from fuzz.gen import random_input

from pysafetensors import SafetensorError, deserialize, safe_open

safetensors = pytest.importorskip("safetensors")


def upstream_accepts(data: bytes) -> bool:
    try:
        safetensors.deserialize(data)
    except safetensors.SafetensorError:
        return False
    return True


def ours_accepts(data: bytes) -> bool:
    try:
        deserialize(data)
    except SafetensorError:
        return False
    return True  # any other exception propagates and fails the test


def frame(header: str, data: bytes = b"\0" * 4) -> bytes:
    h = header.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(h)) + h + data


T = '"dtype":"F32","shape":[1],"data_offsets":[0,4]'
TENSOR = "{" + T + "}"


def deep(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


# Hand-picked inputs: each is a way a JSON parser other than serde_json could disagree.
CASES: dict[str, bytes] = {
    "plain": frame('{"a":' + TENSOR + "}"),
    "leading/trailing JSON whitespace": frame(' \t\n\r{"a":' + TENSOR + "}\r\n\t "),
    "form feed": frame('\f{"a":' + TENSOR + "}"),
    "vertical tab": frame('{"a":' + TENSOR + "}\v"),
    "NUL padding": frame('{"a":' + TENSOR + "}\x00"),
    "no-break space": frame('{"a":' + TENSOR + "}\u00a0"),
    "UTF-8 BOM": frame('\ufeff{"a":' + TENSOR + "}"),
    "non-UTF-8 byte": b"\x10\0\0\0\0\0\0\0" + b'{"a\xff":{}}     ',
    "UTF-8 encoded surrogate": frame('{"\udc80":' + TENSOR + "}"),
    "overlong UTF-8": b"\x0c\0\0\0\0\0\0\0" + b'{"\xc0\x80":1}  ',
    "lone surrogate name": frame('{"\\ud800":' + TENSOR + "}"),
    "surrogate pair name": frame('{"\\ud83d\\ude00":' + TENSOR + "}"),
    "reversed surrogates": frame('{"a":{' + T + ',"x":"\\udc00\\ud800"}}'),
    "lone surrogate metadata": frame('{"__metadata__":{"k":"\\udfff"},"a":' + TENSOR + "}"),
    "lone surrogate in unknown field": frame('{"a":{' + T + ',"x":"\\ud800"}}'),
    "lone surrogate as unknown key": frame('{"a":{' + T + ',"\\udbff":1}}'),
    "escaped backslash then u": frame('{"a":{' + T + ',"x":"\\\\ud800"}}'),
    "NUL escape in name": frame('{"a\\u0000":' + TENSOR + "}"),
    "-0 in shape": frame('{"a":{"dtype":"F32","shape":[-0],"data_offsets":[0,0]}}', b""),
    "-0 in offsets": frame('{"a":{"dtype":"F32","shape":[0],"data_offsets":[-0,0]}}', b""),
    "1e2 in shape": frame('{"a":{"dtype":"U8","shape":[1e2],"data_offsets":[0,100]}}', b"\0" * 100),
    "1.0 in shape": frame('{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}', b"\0"),
    "leading zero": frame('{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}'),
    "plus sign": frame('{"a":{"dtype":"F32","shape":[+1],"data_offsets":[0,4]}}'),
    "u64 max dim, zero elements": frame('{"a":{"dtype":"F32","shape":[18446744073709551615,0],"data_offsets":[0,0]}}', b""),
    "2**64 dim": frame('{"a":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}}', b"\0"),
    "overflowing element count": frame('{"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}}'),
    "overflowing bits": frame('{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,4]}}'),
    "NaN": frame('{"a":{"dtype":"F32","shape":[NaN],"data_offsets":[0,4]}}'),
    "Infinity in unknown": frame('{"a":{' + T + ',"x":Infinity}}'),
    "1e400 in unknown": frame('{"a":{' + T + ',"x":1e400}}'),
    "1e-400 in unknown": frame('{"a":{' + T + ',"x":1e-400}}'),
    "400-digit int in unknown": frame('{"a":{' + T + ',"x":' + "1" * 400 + "}}"),
    "309-digit int in unknown": frame('{"a":{' + T + ',"x":' + "1" * 309 + "}}"),
    "5000-digit int in unknown": frame('{"a":{' + T + ',"x":' + "1" * 5000 + "}}"),
    "f64 max written as an integer": frame('{"a":{' + T + ',"x":17976931348623157' + "0" * 292 + "}}"),
    "1.7976931348623157e308": frame('{"a":{' + T + ',"x":1.7976931348623157e308}}'),
    "0e99999999999": frame('{"a":{' + T + ',"x":0e99999999999}}'),
    "1e-99999999999": frame('{"a":{' + T + ',"x":1e-99999999999}}'),
    "nested arrays in unknown field": frame('{"a":{' + T + ',"x":[[[[1]]]]}}'),
    "depth 127 (serde's limit)": frame('{"a":{' + T + ',"x":' + deep(125) + "}}"),
    "depth 128": frame('{"a":{' + T + ',"x":' + deep(126) + "}}"),
    "depth 128 of objects": frame('{"a":{' + T + ',"x":' + '{"k":' * 126 + "1" + "}" * 126 + "}}"),
    "depth 5000": frame(deep(5000)),
    "depth 100000": frame(deep(100_000)),
    "deep value of a replaced duplicate": frame('{"a":{' + T + ',"x":' + deep(126) + '},"a":' + TENSOR + "}"),
    "tensor as 3-element list": frame('{"a":["F32",[1],[0,4]]}'),
    "tensor as 4-element list": frame('{"a":["F32",[1],[0,4],1]}'),
    "tensor as 2-element list": frame('{"a":["F32",[1]]}'),
    "dtype as {CODE: null}": frame('{"a":{"dtype":{"F32":null},"shape":[1],"data_offsets":[0,4]}}'),
    "dtype as {CODE: []}": frame('{"a":{"dtype":{"F32":[]},"shape":[1],"data_offsets":[0,4]}}'),
    "dtype as {}": frame('{"a":{"dtype":{},"shape":[1],"data_offsets":[0,4]}}'),
    "dtype as two-key map": frame('{"a":{"dtype":{"F32":null,"F16":null},"shape":[1],"data_offsets":[0,4]}}'),
    "dtype as duplicated-key map": frame('{"a":{"dtype":{"F32":null,"F32":null},"shape":[1],"data_offsets":[0,4]}}'),
    "dtype map in list form": frame('{"a":[{"F32":null},[1],[0,4]]}'),
    "lowercase dtype": frame('{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}'),
    "empty name": frame('{"":' + TENSOR + "}"),
    "tensor named __metadata__": frame('{"__metadata__":' + TENSOR + "}"),
    "metadata only": frame('{"__metadata__":{"k":"v"}}', b""),
    "metadata null": frame('{"__metadata__":null}', b""),
    "metadata non-string value": frame('{"__metadata__":{"k":1},"a":' + TENSOR + "}"),
    "metadata duplicate key": frame('{"__metadata__":{"k":"a","k":"b"},"a":' + TENSOR + "}"),
    "metadata replaced non-string": frame('{"__metadata__":{"k":1,"k":"b"},"a":' + TENSOR + "}"),
    "duplicate __metadata__": frame('{"__metadata__":{},"__metadata__":{},"a":' + TENSOR + "}"),
    "duplicate tensor (same)": frame('{"a":' + TENSOR + ',"a":' + TENSOR + "}"),
    "duplicate tensor, last wins": frame('{"a":' + TENSOR + ',"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', b"\0" * 8),
    "duplicate tensor, first wins?": frame('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":' + TENSOR + "}", b"\0" * 8),
    "duplicate tensor, replaced one malformed": frame('{"a":{"dtype":"X"},"a":' + TENSOR + "}"),
    "duplicate field": frame('{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}'),
    "unknown field": frame('{"a":{' + T + ',"x":1}}'),
    "missing field": frame('{"a":{"dtype":"F32","shape":[1]}}'),
    "three offsets": frame('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}'),
    "trailing comma": frame('{"a":' + TENSOR + ",}"),
    "top-level array": frame("[]", b""),
    "empty object": frame("{}", b""),
    "empty header": frame("", b""),
    "only spaces": frame("        ", b""),
    "extra data after JSON": frame('{"a":' + TENSOR + "}{}"),
    "hole between tensors": frame('{"a":' + TENSOR + ',"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}', b"\0" * 12),
    "overlapping tensors": frame('{"a":' + TENSOR + ',"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}', b"\0" * 6),
    "end before begin": frame('{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}'),
    "zero-size tensors sharing offset 0": frame('{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}', b""),
    "F4 odd count": frame('{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"\0\0"),
    "F6 four elements": frame('{"a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}', b"\0" * 3),
    "data longer than header says": frame('{"a":' + TENSOR + "}", b"\0" * 5),
    "data shorter than header says": frame('{"a":' + TENSOR + "}", b"\0" * 3),
    "header length 0": b"\0" * 8,
    "file shorter than 8 bytes": b"\x02\0\0\0",
    "header length over the cap": struct.pack("<Q", 100_000_001) + b"{}",
    "header length at the cap, file short": struct.pack("<Q", 100_000_000) + b"{}",
    "header length 2**64-1": b"\xff" * 8 + b"{}",
    "header length past the end": struct.pack("<Q", 3) + b"{}",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_handpicked_verdicts_match_upstream(name: str) -> None:
    data = CASES[name]
    assert ours_accepts(data) == upstream_accepts(data), f"{name}: input {data[:300]!r}"


def test_random_mutants_match_upstream() -> None:
    """Thousands of generated valid files and mutants (seeded: failures reproduce)."""
    disagreements = []
    accepted = 0
    for seed in range(4000):
        data = random_input(random.Random(seed))
        up = upstream_accepts(data)
        accepted += up
        if ours_accepts(data) != up:
            disagreements.append(f"seed {seed}: upstream {'accepts' if up else 'rejects'}, input {data[:400]!r}")
    assert not disagreements, f"{len(disagreements)} disagreement(s):\n" + "\n".join(disagreements[:10])
    assert 400 < accepted < 3600, "the generator should give a real mix of valid and invalid files"


def test_file_verdicts_match_upstream_safe_open(tmp_path: os.PathLike[str]) -> None:
    """safe_open on a path (both backends) agrees with upstream safe_open."""
    path = os.path.join(os.fspath(tmp_path), "m.safetensors")
    for seed in range(300):
        data = random_input(random.Random(10_000 + seed))
        with open(path, "wb") as f:
            f.write(data)
        try:
            with safetensors.safe_open(path, framework="np"):
                up = True
        except safetensors.SafetensorError:
            up = False
        for backend in ("mmap", "pread"):
            try:
                with safe_open(path, framework="np", backend=backend):
                    ours = True
            except SafetensorError:
                ours = False
            assert ours == up, f"seed {10_000 + seed}, backend {backend}: input {data[:400]!r}"


def test_mutants_of_upstream_written_files_match_upstream() -> None:
    """Valid files written by upstream itself (its own layout and padding), then mutated."""
    import numpy as np
    from fuzz.gen import mutate_bytes
    from safetensors.numpy import save as upstream_save

    disagreements = []
    for seed in range(1500):
        rng = random.Random(seed)
        nprng = np.random.default_rng(seed)
        tensors = {
            f"t{i}": nprng.integers(0, 255, size=[rng.randint(0, 4) for _ in range(rng.randint(0, 3))]).astype(
                rng.choice([np.float32, np.float16, np.uint8, np.int64, np.bool_])
            )
            for i in range(rng.randint(0, 4))
        }
        data = upstream_save(tensors, metadata={"k": "v"} if rng.random() < 0.5 else None)
        for _ in range(rng.choice([1, 1, 2, 3])):
            data = mutate_bytes(data, rng)
        up = upstream_accepts(data)
        if ours_accepts(data) != up:
            disagreements.append(f"seed {seed}: upstream {'accepts' if up else 'rejects'}, input {data[:400]!r}")
    assert not disagreements, f"{len(disagreements)} disagreement(s):\n" + "\n".join(disagreements[:10])


# Regression (fuzzer, 2026-11-22): the fast header path called math.prod on a shape holding a
# string and a huge int, which repeats the string (OverflowError, or a giant allocation).
@pytest.mark.parametrize(
    "shape",
    ['["ab", 99999999999999999999]', '["a", 1000000000]', "[[1], 4]", "[true, 4]", "[4, 1.0]", "[" + ",".join(["1"] * 70) + "]"],
)
def test_shape_of_mixed_types_gets_upstreams_verdict(shape: str) -> None:
    data = frame('{"t":{"dtype":"U8","shape":' + shape + ',"data_offsets":[0,4]}}')
    assert ours_accepts(data) == upstream_accepts(data)
