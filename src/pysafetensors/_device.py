"""Device strings as upstream safetensors accepts them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidDevice

_ACCELERATORS = ("cuda", "npu", "xpu", "xla", "mlu", "musa", "hpu")


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu", "cuda", "mps", ...
    index: int | None = None
    # How the caller spelled it, when upstream's messages echo that (a bare int: "Device 0 ...").
    label: str = field(default="", compare=False)

    @property
    def shown(self) -> str:
        return self.label or str(self)

    def __str__(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    @property
    def is_cpu(self) -> bool:
        return self.kind == "cpu"


def parse_device(device: Any) -> Device:
    """Parse ``cpu``, ``cuda``, ``cuda:N``, an int, ``mps``/``mps:0``, ``npu``... (upstream rules)."""
    if isinstance(device, bool):
        raise InvalidDevice(f"device {device} is invalid", device=device)
    if isinstance(device, int):
        if device < 0:
            raise InvalidDevice(f"device {device} is invalid", device=device)
        return Device("cuda", device, label=str(device))
    text = str(device) if not isinstance(device, str) else device
    if not isinstance(device, str) and type(device).__name__ != "device":
        raise InvalidDevice(f"device {device!r} is invalid", device=device)
    kind, sep, index = text.partition(":")
    if kind == "cpu" and not sep:
        return Device("cpu")
    if kind == "mps":
        if sep and index != "0":
            raise InvalidDevice(f"device {text} is invalid: only mps or mps:0 is supported", device=text)
        return Device("mps", 0 if sep else None)
    if kind in _ACCELERATORS:
        if not sep:
            return Device(kind, 0 if kind == "cuda" else None)
        if index.isdigit():
            return Device(kind, int(index))
    raise InvalidDevice(f"device {text} is invalid", device=text)
