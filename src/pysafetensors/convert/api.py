"""``convert_file``: a PyTorch checkpoint or numpy file in, a verified safetensors file out."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import closing, nullcontext
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .._incremental import open_writer
from ..errors import (
    ConversionError,
    ConversionLimitExceeded,
    CorruptCheckpoint,
    InvalidMetadata,
    UnsupportedCheckpoint,
    VerificationFailed,
)
from ..io.locate import spool_stream
from ..io.redact import redact_url
from ..io.registry import open_source
from ..io.targets import is_url_target, local_target, remove_target
from ..reader import SafeFile
from .checkpoint import Checkpoint, SourceBytes, Unconvertible
from .limits import Budget
from .numpy_files import load_npy, load_npz
from .torch_legacy import load_torch_legacy
from .torch_zip import load_torch_zip
from .tree import drop_tied, flatten, is_leaf, select

# Output tensor bytes may exceed the source's storage bytes by at most this fraction
# (upstream's convert.py check): more means views were expanded into copies.
SIZE_TOLERANCE = 0.01
# Stride-0 and overlapping views let a tiny pickle describe terabytes: refuse before writing
# when the output would exceed the source storages (at most the file's real size) by this
# factor (plus a small allowance).
EXPANSION_LIMIT = 64
EXPANSION_ALLOWANCE = 64 << 20


@dataclass
class ConversionReport:
    """What a conversion did; ``findings`` is empty when verification passed (or was skipped)."""

    source: str
    destination: str
    source_kind: str  # "torch-zip", "torch-legacy", "npz", "npy"
    tensors: int = 0
    tensor_bytes: int = 0
    source_bytes: int = 0
    removed: dict[str, str] = field(default_factory=dict)  # tied copy -> kept name
    skipped: list[str] = field(default_factory=list)  # non-tensor entries left out
    metadata: dict[str, str] = field(default_factory=dict)
    verified: bool = False
    findings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect_kind(fileobj: Any, label: str) -> str:
    """Sniff the format from the first bytes, never from the file name."""
    fileobj.seek(0)
    head = fileobj.read(512)
    fileobj.seek(0)
    if not head:
        raise CorruptCheckpoint(f"{label}: the file is empty")
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        import zipfile

        try:
            names = zipfile.ZipFile(fileobj).namelist()
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
            raise CorruptCheckpoint(f"{label}: not a readable zip archive (truncated?): {e}") from e
        finally:
            fileobj.seek(0)
        if names and not any(n.endswith("data.pkl") for n in names) and all(n.endswith(".npy") for n in names):
            return "npz"
        return "torch-zip"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if len(head) > 262 and head[257:262] == b"ustar":
        raise UnsupportedCheckpoint(
            f"{label}: the pre-1.0 torch tar format is not supported; load and re-save it with torch >= 1.6"
        )
    if head[0] == 0x80 or head[:1] in (b"(", b"L", b"I", b"J", b"K", b"M", b"\x8a"):
        return "torch-legacy"
    raise CorruptCheckpoint(f"{label}: not a PyTorch checkpoint, .npy or .npz file (starts with {head[:8]!r})")


_LOADERS = {"torch-zip": load_torch_zip, "torch-legacy": load_torch_legacy, "npz": load_npz, "npy": load_npy}


def load_checkpoint(path: str | os.PathLike[str], fileobj: Any = None) -> Checkpoint:
    """Open ``path`` with the reader its content calls for.

    The file's bytes come from :func:`pysafetensors.io.open_source` (its backend rule), from
    ``fileobj`` instead when given (an already open binary file of ``path``).  Everything the
    source can make the loader allocate or walk is charged to one :class:`~.limits.Budget` sized
    by the file's real size (kept on the checkpoint).  Closing the checkpoint closes the source.
    """
    path = os.fspath(path)
    shown = redact_url(path)  # a signed URL's query or a password never reaches a message
    label = os.path.basename(shown.rstrip("/")) or shown
    data = SourceBytes(open_source(path if fileobj is None else fileobj), label)
    try:
        stream = data.file()
        kind = detect_kind(stream, label)
        checkpoint = _LOADERS[kind](data, stream, label, Budget(label, data.size))
    except BaseException:
        data.close()
        raise
    checkpoint._closers.insert(0, data.close)  # closers run last to first: the source goes last
    return checkpoint


def _select_tensors(checkpoint: Checkpoint, key: str | None) -> tuple[dict[str, Any], list[str]]:
    node = checkpoint.tree if key is None else select(checkpoint.tree, key)
    if key is not None and is_leaf(node):
        return {key: node}, []
    return flatten(node, checkpoint.budget)


def _check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    if metadata is None:
        return {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise InvalidMetadata("metadata must map str to str")
    return dict(metadata)


def convert_file(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    key: str | None = None,
    verify: bool = True,
    metadata: Mapping[str, str] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    fileobj: Any = None,
    max_input_size: int | None = None,
) -> ConversionReport:
    """Convert a ``torch.save`` checkpoint (zip or legacy) or a ``.npy``/``.npz`` file to safetensors.

    Nothing in the source is executed: pickles go through an allowlist unpickler and torch is
    never imported.  Nested containers are flattened with dotted names; ``key`` picks one
    subtree (e.g. ``"state_dict"``).  Tied tensors (identical views of one storage) are written
    once and each dropped name is recorded in the metadata as ``dropped -> kept``; torch sources
    get ``format: pt``.  ``metadata`` entries are added last (they win).  With ``verify`` the
    output is re-read and compared bit for bit; problems raise :class:`VerificationFailed`
    (whose ``report`` lists them).  ``dst`` may be a store URL (``s3://...``;
    ``storage_options`` for its filesystem): staged locally, uploaded all or nothing, and
    verified by reading it back from the store.  ``src`` may be a pipe or other stream
    (``/dev/stdin``): it is copied to a temporary file first, at most ``max_input_size`` bytes
    (:mod:`pysafetensors.io.spool`; None: its default cap, which a longer stream exceeds with
    :class:`~pysafetensors.errors.InputTooLarge`).  ``fileobj``, an open binary file holding ``src``'s bytes (such a copy),
    is read instead of ``src``, which then only names the source in the report and errors.
    """
    src, dst = os.fspath(src), os.fspath(dst)
    shown = redact_url(src)  # how the report and the messages name the source
    extra = _check_metadata(metadata)
    if _same_local_file(src, dst):
        raise ConversionError(f"refusing to overwrite the source {src!r} with its conversion")
    # A pipe or other stream is read once into a temporary file, since the readers seek.
    copy = None if fileobj is not None else spool_stream(src, max_input_size=max_input_size,
                                                         wanted="checkpoint to convert")
    spool = nullcontext(fileobj) if copy is None else copy
    with spool as readable, closing(load_checkpoint(src, readable)) as checkpoint:
        tensors, skipped = _select_tensors(checkpoint, key)
        for name, leaf in tensors.items():
            if isinstance(leaf, Unconvertible):
                raise leaf.error(name)
        if not tensors:
            raise ConversionError(f"{shown}: no tensors to convert" + (f" under --key {key!r}" if key else ""))
        kept, removed = drop_tied(tensors)
        out_meta = {"format": checkpoint.format_tag} if checkpoint.format_tag else {}
        out_meta.update(removed)
        out_meta.update(extra)
        report = ConversionReport(
            source=shown, destination=redact_url(dst), source_kind=checkpoint.kind, tensors=len(kept),
            tensor_bytes=sum(t.nbytes for t in kept.values()),
            source_bytes=checkpoint.storage_bytes(list(tensors.values())),
            removed=removed, skipped=skipped, metadata=out_meta,
        )
        real = min(report.source_bytes, checkpoint.budget.source_size)
        limit = real * EXPANSION_LIMIT + EXPANSION_ALLOWANCE
        if report.tensor_bytes > limit:
            raise ConversionLimitExceeded(
                f"{shown}: the tensors would expand {real:,} bytes of storage into "
                f"{report.tensor_bytes:,} bytes (over {EXPANSION_LIMIT}x): refusing to write "
                "(stride-0 or overlapping views?)",
                limit="output expansion",
                requested=report.tensor_bytes,
                allowed=limit,
                tensor_bytes=report.tensor_bytes,
                source_bytes=report.source_bytes,
            )
        # The incremental writer: the header goes out first, then each tensor is rebuilt
        # from its storage and written at its planned offset, one tensor in memory at a time.
        declared = {name: (t.dtype, t.out_shape) for name, t in kept.items()}
        with open_writer(dst, declared, out_meta or None, durable=True, storage_options=storage_options) as writer:
            for name, t in kept.items():
                writer.write(name, t.read())
        if verify:
            _verify(kept, out_meta, report, dst, storage_options)
    return report


_COMPARE_CHUNK = 16 << 20


def _same_local_file(src: str, dst: str) -> bool:
    """Whether ``dst`` is the local file ``src`` (a store URL on either side never is)."""
    if is_url_target(src) or is_url_target(dst):
        return False
    try:
        return os.path.samefile(local_target(src), local_target(dst))
    except OSError:  # either one missing: not the same file
        return False


def _same_bytes(written: memoryview, source: np.ndarray) -> bool:
    """Bit-for-bit equality, in chunks so the comparison never allocates a tensor-sized mask."""
    a = np.frombuffer(written, dtype=np.uint8)
    if a.size != source.size:
        return False
    return all(
        np.array_equal(a[i : i + _COMPARE_CHUNK], source[i : i + _COMPARE_CHUNK])
        for i in range(0, a.size, _COMPARE_CHUNK)
    )


def _verify(
    kept: Mapping[str, Any], metadata: Mapping[str, str], report: ConversionReport, dst: str, storage_options: Any
) -> None:
    findings = report.findings
    out = SafeFile(open_source(dst, None, storage_options))  # local: mapped, viewed not copied
    try:
        names = set(out.names())
        if names != set(kept):
            findings.append(f"tensor names differ: missing {sorted(set(kept) - names)}, extra {sorted(names - set(kept))}")
        if (out.metadata or {}) != dict(metadata):
            findings.append("metadata differs from what was written")
        for name in sorted(names & set(kept)):
            leaf, info = kept[name], out.info(name)
            if info.dtype != leaf.dtype or tuple(info.shape) != tuple(leaf.out_shape):
                findings.append(
                    f"{name}: written as {info.dtype.code} {list(info.shape)}, source is "
                    f"{leaf.dtype.code} {list(leaf.out_shape)}"
                )
                continue
            if not _same_bytes(out.raw(name).data, leaf.read()):
                findings.append(f"{name}: written bytes differ from the source")
    finally:
        out.close()
    mismatch = bool(findings)
    if report.source_bytes and report.tensor_bytes > report.source_bytes * (1 + SIZE_TOLERANCE):
        findings.append(
            f"output tensors take {report.tensor_bytes} bytes, {report.tensor_bytes / report.source_bytes - 1:.1%} "
            f"more than the source's {report.source_bytes} storage bytes (more than "
            f"{SIZE_TOLERANCE:.0%}): views of shared storage were expanded into copies"
        )
    report.verified = not findings
    if findings:
        if mismatch:
            # A file that does not match its source must not be left looking valid.
            remove_target(dst, storage_options)
        raise VerificationFailed(
            f"verification of {report.destination} failed: " + "; ".join(findings)
            + (" (output removed)" if mismatch else " (output kept)"),
            report=report,
        )
