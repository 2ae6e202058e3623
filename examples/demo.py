"""make demo: write a small sample model, read it back lazily, and print its tensors."""

from __future__ import annotations

import os

import numpy as np

import pysafetensors as st
from pysafetensors.numpy import load_file, save_file

out_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo")
os.makedirs(out_dir, exist_ok=True)
path = os.path.join(out_dir, "sample.safetensors")

rng = np.random.default_rng(0)
tensors = {
    "embed.weight": rng.standard_normal((1000, 64), dtype=np.float32),
    "layer0.attn.qkv.weight": rng.standard_normal((192, 64), dtype=np.float32).astype(np.float16),
    "layer0.mlp.weight": rng.standard_normal((64, 256), dtype=np.float32),
    "layer0.mlp.bias": np.zeros(256, dtype=np.float32),
    "step": np.array(1234, dtype=np.int64),
}
save_file(tensors, path, metadata={"format": "np", "demo": "pysafetensors"})
print(f"wrote {path} ({os.path.getsize(path):,} bytes)")

with st.safe_open(path, framework="np") as f:
    print("metadata:", f.metadata())
    for name in f.offset_keys():
        sl = f.get_slice(name)
        print(f"  {name:28s} {sl.get_dtype():5s} {sl.get_shape()}")
    rows = f.get_slice("embed.weight")[10:12, :4]
    print("embed.weight[10:12, :4] =\n", rows)

loaded = load_file(path)
assert all(np.array_equal(loaded[k], v) for k, v in tensors.items())
print("round trip OK:", len(loaded), "tensors")
