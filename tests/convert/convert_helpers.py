"""Shared helpers for the conversion tests: compare a safetensors file with torch tensors,
and rewrite the pickle inside a torch zip checkpoint."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np

from pysafetensors.format.dtypes import all_dtypes
from pysafetensors.io.registry import open_source
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


def rezip(src: Any, dst: Any) -> Any:
    """``src`` (a torch zip checkpoint) copied to ``dst`` with every member deflated; returns ``dst``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
    return dst


def outcome(src: Any, dst: Any) -> str:
    """Convert ``src``: "ok", or the name of the SafetensorError it was refused with (anything else raises)."""
    from pysafetensors.convert import convert_file
    from pysafetensors.errors import SafetensorError

    try:
        convert_file(src, dst)
    except SafetensorError as e:
        return type(e).__name__
    return "ok"


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


def deflated_zeros(prefix: bytes, zeros: int, suffix: bytes = b"") -> tuple[bytes, int, int]:
    """A raw deflate stream of ``prefix + bytes(zeros) + suffix`` built in milliseconds:
    (stream, inflated size, CRC-32).  Once the window holds only zeros, every fully flushed
    MiB of zeros compresses to the same ~1 KB, so the middle is one block repeated; the CRC
    is still computed over every inflated byte."""
    import zlib

    mib = 1 << 20
    assert zeros % mib == 0 and zeros >= 3 * mib
    chunk = bytes(mib)
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = co.compress(prefix + chunk) + co.flush(zlib.Z_FULL_FLUSH)
    middle = co.compress(chunk) + co.flush(zlib.Z_FULL_FLUSH)
    again = co.compress(chunk) + co.flush(zlib.Z_FULL_FLUSH)
    assert again == middle  # the repeat the construction relies on
    last = co.compress(chunk + suffix) + co.flush(zlib.Z_FINISH)
    stream = first + middle * (zeros // mib - 2) + last
    crc = zlib.crc32(prefix)
    for _ in range(zeros // mib):
        crc = zlib.crc32(chunk, crc)
    crc = zlib.crc32(suffix, crc)
    return stream, len(prefix) + zeros + len(suffix), crc


def write_zip(path: Any, members: list[tuple[str, bytes, int, int, int]]) -> int:
    """Write a zip archive by hand from (name, payload, method, inflated size, crc) members,
    payloads as given (already deflated for method 8); returns the file size."""
    import struct

    out, central = bytearray(), bytearray()
    for name, payload, method, size, crc in members:
        encoded = name.encode()
        offset = len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(payload), size,
                           len(encoded), 0) + encoded + payload
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc,
                               len(payload), size, len(encoded), 0, 0, 0, 0, 0, offset) + encoded
    start = len(out)
    out += central + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members), len(members),
                                 len(central), start, 0)
    with open(path, "wb") as f:
        f.write(out)
    return len(out)


def stored(name: str, payload: bytes) -> tuple[str, bytes, int, int, int]:
    import zlib

    return name, payload, 0, len(payload), zlib.crc32(payload)
