"""Shared helpers for the conversion tests: compare a safetensors file with torch tensors,
and rewrite the pickle inside a torch zip checkpoint."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np

from pysafetensors.format.dtypes import all_dtypes
from pysafetensors.io.sources import open_source
from pysafetensors.reader import SafeFile

TORCH_TO_CODE = {d.torch: d.code for d in all_dtypes() if d.torch}


def read_safetensors(path: str) -> tuple[dict[str, tuple[str, tuple[int, ...], bytes]], dict[str, str]]:
    """name -> (dtype code, shape, raw bytes), and the metadata."""
    f = SafeFile(open_source(path, backend="pread"))
    try:
        out = {}
        for name in f.names():
            info = f.info(name)
            out[name] = (info.dtype.code, tuple(info.shape), bytes(f.raw(name).data))
        return out, f.metadata or {}
    finally:
        f.close()


def torch_facts(t: Any) -> tuple[str, tuple[int, ...], bytes]:
    """What a torch tensor should look like in a safetensors file."""
    import torch

    t = t.detach().resolve_conj().resolve_neg().contiguous()
    name = str(t.dtype).removeprefix("torch.")
    shape = tuple(t.shape)
    if name == "float4_e2m1fn_x2":
        shape = shape[:-1] + (shape[-1] * 2,)
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    return TORCH_TO_CODE[name], shape, raw


def flatten_torch(tree: Any, prefix: str = "") -> dict[str, Any]:
    """The dotted-name flattening the converter does, over a torch.load result."""
    import torch

    out: dict[str, Any] = {}
    if isinstance(tree, torch.Tensor):
        out[prefix or "tensor"] = tree
    elif isinstance(tree, dict):
        for k, v in tree.items():
            out.update(flatten_torch(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, (list, tuple)) and not isinstance(tree, torch.Size):
        for i, v in enumerate(tree):
            out.update(flatten_torch(v, f"{prefix}.{i}" if prefix else str(i)))
    return out


def assert_same_tensors(st_path: str, expected: dict[str, Any], removed: dict[str, str] | None = None) -> None:
    """The file holds exactly ``expected`` (torch tensors), minus tied names in ``removed``."""
    removed = removed or {}
    got, meta = read_safetensors(st_path)
    assert set(got) == set(expected) - set(removed)
    for name, tensor in expected.items():
        target = removed.get(name, name)
        assert got[target] == torch_facts(tensor), name
    for name, kept in removed.items():
        assert meta[name] == kept


def replace_entry(src: str, dst: str, entry_suffix: str, data: bytes | None) -> None:
    """Copy a zip archive, replacing (or with None, dropping) the entry ending in ``entry_suffix``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            if info.filename.endswith(entry_suffix):
                if data is not None:
                    zout.writestr(info.filename, data)
            else:
                zout.writestr(info.filename, zin.read(info))


def entry(path: str, suffix: str) -> bytes:
    with zipfile.ZipFile(path) as z:
        (name,) = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


def torch_pickle(obj: Any, storages: dict[int, tuple[Any, str, int]]) -> bytes:
    """Pickle ``obj`` as torch.save would, with ``storages`` mapping id(placeholder) to a
    persistent id (storage type, key, numel): lets a test forge any tensor record."""
    buf = io.BytesIO()

    class P(__import__("pickle").Pickler):
        def persistent_id(self, o: Any) -> Any:
            if id(o) in storages:
                stype, key, numel = storages[id(o)]
                return ("storage", stype, key, "cpu", numel)
            return None

    P(buf, protocol=2).dump(obj)
    return buf.getvalue()


def f32(values: list[float]) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()
