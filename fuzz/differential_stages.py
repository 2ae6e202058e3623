"""Two more stages of the differential comparison, on every file both libraries accept.

- **Writes with a lone surrogate** (``\\ud800``) put into a tensor name, a metadata key or a
  metadata value (sometimes beside a negative-stride array): no header can hold it, so both
  ``save`` must refuse; upstream raises a bare ``UnicodeEncodeError``, ours must raise
  ``UnencodableText`` naming the entry (``tensor`` or ``key``).
- **torch slices with two ``...``** and slices only, on tensors of 1 to 4 dims (zero-size
  ones included): upstream hands the index to torch, whose slice fast path reads the size of a
  dim past the end (inside the tensor's size and stride array for these), and ours must give
  the same tensor, or an IndexError where upstream raises one.

Each stage draws from ``rng`` (seeded from the input's bytes: ``compare`` stays a function of
the input) and counts what it checked in ``COUNTS`` (``writer_surrogate``, ``torch_ellipses``).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from .gen import DTYPE_BITS

COUNTS: Counter[str] = Counter()
_SURROGATES = ("\ud800", "\udc00", "\udfff")
_SLICES = [slice(None), slice(None, 0), slice(None, 1), slice(None, 3), slice(None, 5), slice(None, 8), slice(None, 20),
           slice(1, 3), slice(0, 4, 1), slice(None, 2, 2), slice(0, None, 1)]


def compare_writes(up: Any, ours: Any, rng: random.Random, fail: type[Exception]) -> None:
    """Both numpy faces' ``save`` of the file's tensors, with a lone surrogate put in one place."""
    import numpy as np
    import safetensors.numpy

    import pysafetensors.numpy
    from pysafetensors.errors import UnencodableText

    names = list(ours.keys())
    if not names or rng.random() < 0.5:
        return
    try:
        tensors = {n: ours.get_tensor(n) for n in names}
    except Exception:  # noqa: BLE001 - a tensor the numpy face cannot give: another stage's business
        return
    metadata = dict(ours.metadata() or {})
    where = rng.choice(["tensor", "key", "value"] if metadata else ["tensor", "key"])
    bad = rng.choice(_SURROGATES)
    if where == "tensor":
        victim = rng.choice(names)
        at = rng.randint(0, len(victim))
        renamed = victim[:at] + bad + victim[at:]
        tensors = {renamed if n == victim else n: t for n, t in tensors.items()}
        expected = ("tensor", renamed)
    elif where == "key":
        renamed = rng.choice(["k", "format", ""]) + bad
        metadata[renamed] = "v"
        expected = ("key", renamed)
    else:
        key = rng.choice(sorted(metadata))
        metadata[key] = metadata[key] + bad
        expected = ("key", key)
    strided = [n for n, t in tensors.items() if t.ndim and t.shape[0] > 1]
    if strided and rng.random() < 0.5:  # the fuzz found it with one of these
        n = rng.choice(strided)
        tensors[n] = np.asarray(tensors[n])[::-1]
    meta = metadata or None
    try:
        safetensors.numpy.save(tensors, metadata=meta)
    except Exception:  # noqa: BLE001, S110 - upstream refuses (a bare UnicodeEncodeError); that is all we ask
        pass
    else:
        raise fail(f"upstream saved a {where} holding a lone surrogate: {expected[1]!r}")
    try:
        pysafetensors.numpy.save(tensors, metadata=meta)
    except UnencodableText as e:
        if getattr(e, expected[0], None) != expected[1]:
            raise fail(f"UnencodableText names {e.__dict__}, not the {expected[0]} {expected[1]!r}: {e}") from e
    except Exception as e:
        raise fail(f"save with a lone surrogate in a {where}: ours raised {type(e).__name__}: {e}") from e
    else:
        raise fail(f"ours saved a {where} holding a lone surrogate: {expected[1]!r}")
    COUNTS["writer_surrogate"] += 1


def compare_torch_slices(up_pt: Any, our_pt: Any, codes: dict[str, tuple[str, tuple[int, ...]]], rng: random.Random,
                         fail: type[Exception]) -> None:
    """A few indexes with two ``...`` on each tensor of 1 to 4 dims, under ``pt`` on both sides.

    ``codes``: each tensor's dtype code and shape.  Sub-byte dtypes are left out: upstream's torch
    slices of them take the file's shape for the packed tensor's (a ``[2, 8]`` F4 tensor is
    refused, an empty one comes back ``[.., 8]`` where get_tensor gives ``[.., 4]``)."""
    import torch

    for name, (code, shape) in codes.items():
        if not 1 <= len(shape) <= 4 or DTYPE_BITS[code] < 8 or rng.random() < 0.5:
            continue
        try:  # only tensors both give whole under pt (the get_tensor stage judges the others)
            up_pt.get_tensor(name)
            our_pt.get_tensor(name)
        except Exception:  # noqa: BLE001, S112 - the get_tensor stage judges those
            continue
        items: list[Any] = [rng.choice(_SLICES) for _ in range(rng.randint(1, 3))]
        for _ in range(2):
            items.insert(rng.randint(0, len(items)), ...)
        index = tuple(items)
        try:
            expected = up_pt.get_slice(name)[index]
        except IndexError:
            expected = None
        except Exception:  # noqa: BLE001, S112 - upstream cannot give this dtype in torch: nothing to compare
            continue
        try:
            got = our_pt.get_slice(name)[index]
        except IndexError as e:
            if expected is not None:
                raise fail(f"{name!r}{list(shape)}[{index}] under pt: upstream gives {tuple(expected.shape)}, "
                           f"ours raised IndexError: {e}") from e
        except Exception as e:
            raise fail(f"{name!r}{list(shape)}[{index}] under pt: ours raised {type(e).__name__}: {e}") from e
        else:
            if expected is None:
                raise fail(f"{name!r}{list(shape)}[{index}] under pt: upstream raises IndexError, ours gives "
                           f"{tuple(got.shape)}")
            same = got.shape == expected.shape and got.dtype == expected.dtype and (
                got.numel() == 0 or torch.equal(_raw(got), _raw(expected)))
            if not same:
                raise fail(f"{name!r}{list(shape)}[{index}] under pt: upstream {tuple(expected.shape)}, ours "
                           f"{tuple(got.shape)} or other values")
        COUNTS["torch_ellipses"] += 1


def _raw(t: Any) -> Any:
    """A tensor's values as bytes (NaNs compare by their bits), through a fresh contiguous copy:
    a view may have strides no byte view takes (a size-1 dim of stride 2)."""
    import torch

    return torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1).view(torch.uint8)
