"""What the viewer's page shows, as JSON: built from the same ``tools`` functions as the CLI.

:class:`ViewSession` holds the inputs named on the command line, opened once
(:func:`~pysafetensors.tools.checkpoint.open_checkpoint`), and answers the page:

* :meth:`ViewSession.document`: the checkpoint document, built from the headers (and, for a
  diff of two local inputs, their tensor bytes): per input the ``inspect`` summary (:func:`~pysafetensors.tools.summary.summarize`),
  the metadata, the ModelSpec entries and a validated thumbnail, the tensor list as columns (one
  array per field, so a 100,000-tensor header stays a few compact arrays), the dotted tree
  (:func:`~pysafetensors.tools.tree.prefix_groups`, the grouping ``inspect --tree`` uses) as
  flat arrays too: ``nodes`` in depth-first order (a tensor as its index in the columns, group
  ``g`` as ``-1 - g``) and per group its ``label``, ``params``, ``tensors``, ``bytes`` and
  ``end`` (where its subtree ends in ``nodes``), and its repeated blocks
  (:func:`~pysafetensors.tools.blocks.find_blocks`, by group number: :func:`block_entries`);
  the live page's document leaves those three out, and :meth:`ViewSession.tensors_json` sends
  them in a second answer; for two inputs, the ``diff`` result
  (:func:`~pysafetensors.tools.diff.diff_files`, as the ``diff`` command computes it: tensor
  bytes compared for two local inputs, the structure only for a URL; the page shows its
  verdicts as they are).  An exported report with stats also carries every tensor's stats and
  histogram and, for two inputs, the ``diff --values`` numbers and verdicts, from one streamed
  pass per input.
* :meth:`ViewSession.values`: one tensor's stats, histogram and (two or more dimensions) heatmap.
* :meth:`ViewSession.value_diff`: one tensor's ``diff --values`` numbers and the histogram of
  its differences.

Only tensor *names* and input *numbers* reach these methods, never a path: nothing but the
inputs given to the session can be read.  A tensor read over the network (no memory map) is
fetched once and held in memory while its numbers are computed, up to
:data:`~pysafetensors.tools.pairing.HOLD_CAP` bytes (:func:`~pysafetensors.tools.pairing.hold`),
so the stats, histogram and heatmap of a remote tensor cost one read of that tensor's bytes.

A GGUF file (llama.cpp's format) opens as a :class:`GGUFCheckpoint` and is shown the same way:
its ``inspect`` summary (:class:`~pysafetensors.tools.summary.GGUFSummary`: version, alignment,
GGML types), its typed key/value metadata with long arrays (a tokenizer's vocabulary) shown as
their length and first items (:func:`~pysafetensors.tools.summary.gguf_value_text`, the text
``inspect`` prints), each tensor's dims in GGUF's order beside PyTorch's shape, and its values as
the GGUF front reads them (quantized types dequantized by gguf-py).  A tensor whose type cannot
be read (a GGML type unknown to this version, or one gguf-py cannot dequantize) answers with the
GGUF front's error, shown on the page for that tensor.  Two inputs of either format are compared
by :func:`~pysafetensors.tools.diff.diff_files`, GGUF names shown as the diff maps them.

Integers JavaScript cannot hold exactly (beyond 2**53, e.g. the min/max of a U64 tensor) are sent
as decimal strings, so the page shows the exact number the CLI prints.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import GGUFUnsupported
from ..tools import Progress, no_progress, to_jsonable
from ..tools.blocks import RepeatedBlock, find_blocks, index_ranges
from ..tools.checkpoint import (
    AnyCheckpoint,
    GGUFCheckpoint,
    TensorAccess,
    TensorBytes,
    ValueTensor,
    open_checkpoint,
    stream_tensors,
)
from ..tools.pairing import HOLD_CAP, hold
from ..tools.stats import stats_of, tensor_stats
from ..tools.summary import (
    MODELSPEC_PREFIX,
    Summary,
    gguf_value_text,
    shorten,
    summarize_columns,
    summarize_gguf,
)
from ..tools.tree import PrefixGroups, prefix_groups
from ..tools.values import difference_histogram, heatmap, histogram

# tools.diff (and numpy, gguf-py's converter... under it) is imported where two inputs are
# compared: one input's page is served without it, sooner.

# Heatmap cells per side on the page: the finest the tools give (a matrix up to 512 x 512 is shown whole).
PAGE_HEATMAP_CELLS = 512
HISTOGRAM_BINS = 64
THUMBNAIL_KEY = MODELSPEC_PREFIX + "thumbnail"
# A thumbnail larger than this is shown as text, not decoded into an image.
THUMBNAIL_CAP = 8 << 20
JS_SAFE_INT = 2**53 - 1

_THUMBNAIL = re.compile(r"data:image/(png|jpeg|webp);base64,([A-Za-z0-9+/]+={0,2})")
_MAGIC = {
    "png": lambda b: b.startswith(b"\x89PNG\r\n\x1a\n"),
    "jpeg": lambda b: b.startswith(b"\xff\xd8\xff"),
    "webp": lambda b: b[:4] == b"RIFF" and b[8:12] == b"WEBP",
}


def thumbnail(metadata: dict[str, str] | None) -> str | None:
    """``modelspec.thumbnail`` when it is an image the page may show, else None.

    Accepted: ``data:image/(png|jpeg|webp);base64,`` followed by strict base64 whose bytes begin
    with that format's signature, at most THUMBNAIL_CAP characters.  Anything else (another
    scheme, SVG, a URL, text) stays a metadata string shown as text.
    """
    value = (metadata or {}).get(THUMBNAIL_KEY)
    if not isinstance(value, str) or len(value) > THUMBNAIL_CAP:
        return None
    m = _THUMBNAIL.fullmatch(value)
    if m is None:
        return None
    try:
        raw = base64.b64decode(m.group(2), validate=True)
    except (binascii.Error, ValueError):
        return None
    return value if _MAGIC[m.group(1)](raw) else None


def js_safe(obj: Any) -> Any:
    """``obj`` (JSON-able) with integers beyond 2**53 as decimal strings (JavaScript numbers are
    doubles: 2**64 - 1 would show as 18446744073709552000)."""
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        return str(obj) if abs(obj) > JS_SAFE_INT else obj
    if isinstance(obj, dict):
        return {k: js_safe(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [js_safe(v) for v in obj]
    return obj


def _pairs(mapping: dict[str, str] | None) -> list[list[str]] | None:
    # Key/value pairs, not an object: a JavaScript object reorders integer-like keys.
    return None if mapping is None else [[k, v] for k, v in mapping.items()]


def tree_columns(columns: dict[str, Any]) -> dict[str, list[Any]]:
    """The tensors' tree (:func:`~pysafetensors.tools.tree.prefix_groups`) as the page's arrays."""
    return _tree_arrays(prefix_groups(columns["name"], columns["params"], columns["bytes"]))


def _tree_arrays(g: PrefixGroups) -> dict[str, list[Any]]:
    return {"nodes": g.nodes, "label": g.label, "params": g.parameters, "tensors": g.tensors, "bytes": g.nbytes,
            "end": g.end}


def block_entries(blocks: Sequence[RepeatedBlock]) -> list[dict[str, Any]]:
    """The repeated blocks (:func:`~pysafetensors.tools.blocks.find_blocks`, every one: the page
    folds a block inside any member it expands) as the page reads them: by group number."""
    # Only the totals can pass 2**53 (js_safe): the numbers and group lists stay as they are.
    return [{
        "group": b._group, "path": b.path, "label": b.label, "ranges": f"[{index_ranges(b.indices)}]",
        "indices": b.indices, "members": b._members, "count": b.count, "copies": b.copies, "tensors": b.tensors,
        **js_safe({"params": b.parameters, "bytes": b.nbytes, "total_params": b.total_parameters,
                   "total_bytes": b.total_nbytes}),
        "whole": b.whole_group, "nested": b.nested,
        "differing": [[gid, d.index, d.path, d.reason] for gid, d in zip(b._differing_groups, b.differing)],
    } for b in blocks]


def tensor_part(columns: dict[str, Any]) -> dict[str, Any]:
    """An input's tensors as the page reads them: the ``columns``, the tree grouping them and its
    repeated blocks (one :func:`~pysafetensors.tools.tree.prefix_groups` for both, the grouping
    and the blocks ``inspect`` prints)."""
    g = prefix_groups(columns["name"], columns["params"], columns["bytes"])
    blocks = find_blocks(g, columns["name"], columns["dtype"], columns["shape"])
    return {"tensors": columns, "tree": _tree_arrays(g), "blocks": block_entries(blocks)}


class _Held:
    """One tensor and its bytes (held in memory after one read, or a view): a TensorAccess for the tools."""

    def __init__(self, info: ValueTensor, data: TensorBytes) -> None:
        self._info = info
        self._data = data

    def info(self, name: str) -> ValueTensor:
        return self._info

    def data(self, name: str) -> TensorBytes:
        return self._data


def held(ckpt: AnyCheckpoint, name: str) -> TensorAccess:
    """One tensor of ``ckpt`` with its bytes :func:`hold`-en: a mapped tensor costs nothing to
    read again; one read over the network is fetched once (up to HOLD_CAP)."""
    return _Held(ckpt.info(name), hold(ckpt.data(name)))


def _values_of(access: TensorAccess, name: str, with_heatmap: bool) -> dict[str, Any]:
    info = access.info(name)
    out: dict[str, Any] = {
        "name": name,
        "stats": tensor_stats(access, name).to_dict(),
        "histogram": histogram(access, name, HISTOGRAM_BINS).to_dict(),
        "heatmap": None,
    }
    if with_heatmap and len(info.shape) >= 2:
        out["heatmap"] = heatmap(access, name, PAGE_HEATMAP_CELLS).to_dict()
    page: dict[str, Any] = js_safe(out)
    return page


def _summary_fields(s: Summary) -> tuple[dict[str, Any], list[Any]]:
    """The summary without its per-tensor rows and metadata (sent as columns and pairs), and the rows."""
    skip = {"tensors", "tree", "metadata", "modelspec", "filter", "total_tensor_count", "gguf_metadata",
            "repeated_blocks"}
    fields = {f.name: to_jsonable(getattr(s, f.name)) for f in dataclasses.fields(s)
              if f.name not in skip and not f.name.startswith("_")}  # private fields are never sent
    return fields, s.tensors


def input_document(ckpt: AnyCheckpoint, tensors: bool = True) -> dict[str, Any]:
    """One input's part of the checkpoint document (headers only: no tensor byte is read).
    ``tensors``: with its :func:`tensor_part` (else ``tensors``, ``tree`` and ``blocks`` are
    None and ``_columns`` holds the columns, for :meth:`ViewSession.tensors_json`)."""
    if ckpt.format == "gguf":
        return gguf_document(ckpt, tensors)
    full, cols = summarize_columns(ckpt)
    summary, _ = _summary_fields(full)
    files = summary.get("files")
    file_index = {f: i for i, f in enumerate(files)} if files else None
    columns: dict[str, Any] = {
        "name": cols.name,
        "dtype": cols.dtype,
        "shape": cols.shape,
        "params": cols.parameters,
        "bytes": cols.nbytes,
        "begin": cols.begin,
        "end": cols.end,
        "file": list(map(file_index.__getitem__, cols.file)) if file_index and cols.file is not None else None,
    }
    metadata = ckpt.metadata
    return {
        "label": ckpt.path,
        "format": "safetensors",
        "local": ckpt.local,
        "summary": summary,
        "metadata": _pairs({k: v for k, v in (metadata or {}).items() if not k.startswith(MODELSPEC_PREFIX)}
                           if metadata is not None else None),
        "modelspec": _pairs({k: v for k, v in (metadata or {}).items() if k.startswith(MODELSPEC_PREFIX)}),
        "thumbnail": thumbnail(metadata),
        **_tensors_or_later(columns, tensors),
        "stats": None,
    }


def _tensors_or_later(columns: dict[str, Any], now: bool) -> dict[str, Any]:
    if now:
        return tensor_part(columns)
    return {"tensors": None, "tree": None, "blocks": None, "_columns": columns}


def gguf_document(ckpt: GGUFCheckpoint, tensors: bool = True) -> dict[str, Any]:
    """A GGUF input's part of the checkpoint document: the same fields as a safetensors input's,
    the metadata as ``[key, text]`` pairs (``inspect``'s text: arrays as length and first
    items) with ``metadata_types`` beside them, and the tensors' GGUF dims and value dtypes."""
    s = summarize_gguf(ckpt)
    summary, rows = _summary_fields(s)
    infos = ckpt.tensors  # the rows' order: file order
    columns: dict[str, Any] = {
        "name": [r.name for r in rows],
        "dtype": [r.dtype for r in rows],  # the GGML type: Q4_K, F32...
        "shape": [r.shape for r in rows],  # PyTorch's order
        "params": [r.parameters for r in rows],
        "bytes": [r.nbytes for r in rows],
        "begin": [r.data_offsets[0] for r in rows],
        "end": [r.data_offsets[1] for r in rows],
        "file": None,
        "dims": [list(t.dims) for t in infos],  # GGUF's order
        "values": [t.dtype.code for t in infos],  # what the values read as (F32 when dequantized)
    }
    return {
        "label": ckpt.path,
        "format": "gguf",
        "local": ckpt.local,
        "summary": summary,
        "metadata": [[k, gguf_value_text(e)] for k, e in s.gguf_metadata.items()],
        "metadata_types": [e.type for e in s.gguf_metadata.values()],
        "modelspec": [],
        "thumbnail": None,
        **_tensors_or_later(columns, tensors),
        "stats": None,
    }


def _values_nbytes(t: Any) -> int:
    # What the progress bar counts: a GGUF tensor's values (dequantized), else the stored bytes.
    return int(t.dtype.nbytes(t.nelements))


def _stats_entry(info: ValueTensor, data: TensorBytes, bar: Any) -> dict[str, Any]:
    """One tensor's stats and histogram from its (held) bytes, advancing ``bar`` chunk by chunk;
    ``{"name", "error"}`` for a GGUF tensor whose type cannot be read (the GGUF front's message)."""
    try:
        stats = stats_of(info, data, bar)
        hist = histogram(_Held(info, data), info.name, HISTOGRAM_BINS).to_dict()
    except GGUFUnsupported as e:
        bar.update(_values_nbytes(info))
        return {"name": info.name, "error": str(e)}
    page: dict[str, Any] = js_safe({"name": info.name, "stats": stats.to_dict(), "histogram": hist, "heatmap": None})
    return page


def stream_values(ckpt: AnyCheckpoint, progress: Progress = no_progress) -> list[dict[str, Any]]:
    """Every tensor's stats and histogram, in file order, streaming the checkpoint once (a
    remote tensor larger than HOLD_CAP is not held, so its histogram reads it again).  A GGUF
    tensor whose type cannot be read gets ``{"name", "error"}`` (the GGUF front's message)."""
    tensors = ckpt.tensors
    with progress(sum(_values_nbytes(t) for t in tensors), "stats") as bar:
        return [_stats_entry(info, hold(data), bar) for info, data in stream_tensors(ckpt, [t.name for t in tensors])]


def _diff_with_stats(a: AnyCheckpoint, b: AnyCheckpoint, progress: Progress
                     ) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]]:
    """``diff --values`` of the two inputs and each input's stats and histograms (in its file
    order, as :func:`stream_values`), from one pass over each input
    (:func:`~pysafetensors.tools.diff.diff_files` with ``visit``)."""
    from ..tools.diff import diff_files
    stats_a: list[dict[str, Any]] = []
    stats_b: list[dict[str, Any]] = []
    total = sum(_values_nbytes(t) for t in a.tensors) + sum(_values_nbytes(t) for t in b.tensors)
    with progress(total, "stats") as bar:
        result = diff_files(a, b, values=True, visit=(lambda t, d: stats_a.append(_stats_entry(t, d, bar)),
                                                      lambda t, d: stats_b.append(_stats_entry(t, d, bar))))
    return result, stats_a, stats_b


def _short_diff(diff: dict[str, Any]) -> dict[str, Any]:
    # A GGUF's metadata values are whole arrays as canonical text (a vocabulary is megabytes):
    # the page shows them cut as the diff command's text does.
    return {**diff,
            "metadata_added": {k: shorten(v) for k, v in diff["metadata_added"].items()},
            "metadata_removed": {k: shorten(v) for k, v in diff["metadata_removed"].items()},
            "metadata_changed": {k: {s: shorten(v) for s, v in c.items()} for k, c in diff["metadata_changed"].items()}}


def _diff_names(a: AnyCheckpoint, b: AnyCheckpoint) -> list[list[str] | None]:
    """Per input, its tensors' names as the diff shows them (in the tensor columns' order), or
    None where they are the names themselves (a GGUF's names mapped to a safetensors side's)."""
    from ..tools.diff import shown_names
    out: list[list[str] | None] = []
    for ckpt, shown in zip((a, b), shown_names(a, b)):
        own = [t.name for t in ckpt.tensors]
        names = [shown.get(n, n) for n in own]
        out.append(names if names != own else None)
    return out


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


class ViewSession:
    """The inputs of one ``pysafetensors view`` run, opened once, and the answers the page asks for."""

    def __init__(self, checkpoints: Sequence[AnyCheckpoint]) -> None:
        if not 1 <= len(checkpoints) <= 2:
            raise ValueError(f"the viewer shows one checkpoint or compares two, got {len(checkpoints)}")
        self.inputs = list(checkpoints)
        self._lock = threading.Lock()  # one value computation at a time: bounded memory
        self._json: bytes | None = None
        self._tensors_lock = threading.Lock()
        self._columns: dict[int, dict[str, Any]] = {}  # per input, from the live document, until used
        self._tensors: dict[int, bytes] = {}

    @classmethod
    def open(cls, paths: Iterable[str], storage_options: dict[str, Any] | None = None) -> ViewSession:
        """Open each path with :func:`open_checkpoint` (a GGUF file as a GGUFCheckpoint; closing
        those opened if one fails)."""
        opened: list[AnyCheckpoint] = []
        try:
            for p in paths:
                opened.append(open_checkpoint(p, storage_options, gguf=True))
            return cls(opened)
        except BaseException:
            for c in opened:
                c.close()
            raise

    def document(self, with_stats: bool = False, progress: Progress = no_progress, live: bool = False) -> dict[str, Any]:
        """The checkpoint document (see the module docstring); ``with_stats`` streams the data.
        ``live``: served by a running server that answers the page's value requests, and each
        input's ``tensors``, ``tree`` and ``blocks`` left out (None), for the page to ask
        :meth:`tensors_json` when it shows them: the first answer stays small and quick on a
        100,000-tensor header."""
        inputs = [input_document(c, tensors=not live) for c in self.inputs]
        for i, doc in enumerate(inputs):
            columns = doc.pop("_columns", None)
            if columns is not None:
                self._columns[i] = columns
        diff = None
        stats: list[list[dict[str, Any]] | None] = [None, None]
        if len(self.inputs) == 2:
            from ..tools.diff import diff_files

            a, b = self.inputs
            names = _diff_names(a, b)
            if with_stats and names == [None, None]:
                # The values come from the one pass over each input that also gives the stats.
                result, stats[0], stats[1] = _diff_with_stats(a, b, progress)
            else:
                # A GGUF compared under Hugging Face names: its q/k rows are put back for the
                # comparison (diff_files streams both), and the stats below read it once more.
                result = diff_files(a, b, values=with_stats, progress=progress)
            diff = _short_diff(js_safe(result.to_dict()))
            if names != [None, None]:  # else the diff is exactly the diff command's JSON
                diff["names"] = names
        if with_stats:
            for i, (doc, ckpt) in enumerate(zip(inputs, self.inputs)):
                doc["stats"] = stats[i] if stats[i] is not None else stream_values(ckpt, progress)
        return {"version": 1, "live": live, "inputs": inputs, "diff": diff}

    def document_json(self, progress: Progress = no_progress) -> bytes:
        """The live page's document as UTF-8 JSON, built on first use and kept (for two local
        inputs that compares their tensor bytes, as ``diff`` does: ``progress`` reports it)."""
        if self._json is None:
            self._json = _json_bytes(self.document(progress=progress, live=True))
        return self._json

    def tensors_json(self, i: int) -> bytes:
        """Input ``i``'s :func:`tensor_part` (its tensor columns, tree and repeated blocks) as
        UTF-8 JSON, built on first use and kept: what the live document leaves out."""
        ckpt = self.checkpoint(i)
        with self._tensors_lock:
            if i not in self._tensors:
                columns = self._columns.pop(i, None)
                if columns is None:
                    columns = input_document(ckpt, tensors=False)["_columns"]
                self._tensors[i] = _json_bytes(tensor_part(columns))
            return self._tensors[i]

    def checkpoint(self, i: int) -> AnyCheckpoint:
        if not 0 <= i < len(self.inputs):
            raise IndexError(f"input must be 0..{len(self.inputs) - 1}, got {i}")
        return self.inputs[i]

    def values(self, i: int, name: str) -> dict[str, Any]:
        """One tensor's stats, histogram and heatmap (two or more dimensions), reading only its bytes."""
        ckpt = self.checkpoint(i)
        with self._lock:
            ckpt.info(name)  # an unknown name: TensorNotFound before anything is read
            return _values_of(held(ckpt, name), name, with_heatmap=True)

    def value_diff(self, name: str) -> dict[str, Any]:
        """One tensor's ``diff --values`` numbers and the histogram of its differences (``a - b``)."""
        if len(self.inputs) != 2:
            raise IndexError("a value diff needs two inputs")
        from ..tools.diff import compare_values, value_pair

        a, b = self.inputs
        with self._lock:
            # ``name`` as the diff shows it: a GGUF name may be mapped to a Hugging Face one.
            (ta, da), (tb, db) = value_pair(a, b, name)
            ha, hb = _Held(ta, hold(da)), _Held(tb, hold(db))
            diff = dataclasses.replace(compare_values(ta, ha.data(name), tb, hb.data(name)), name=name)
            hist = difference_histogram(ha, hb, name, HISTOGRAM_BINS).to_dict() if diff.compared else None
            page: dict[str, Any] = js_safe({"name": name, "diff": diff.to_dict(), "histogram": hist})
            return page

    def close(self) -> None:
        for c in self.inputs:
            c.close()

    def __enter__(self) -> ViewSession:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["HOLD_CAP", "ViewSession", "block_entries", "gguf_document", "hold", "input_document", "js_safe",
           "stream_values", "tensor_part", "thumbnail", "tree_columns"]
