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
    if device is None:
        return Device("cpu")  # upstream treats a missing device as the CPU
    if isinstance(device, int):  # bool included: upstream reads True as cuda device 1
        if device < 0:
            raise InvalidDevice(f"device {device} is invalid", device=device)
        return Device("cuda", int(device), label=str(int(device)))
    text = str(device) if not isinstance(device, str) else device
    if not isinstance(device, str) and type(device).__name__ != "device":
        raise InvalidDevice(f"device {device!r} is invalid", device=device)
    kind, sep, index = text.partition(":")
    if kind == "cpu" and not sep:
        return Device("cpu")
    number = _index(index) if sep else 0
    if kind == "mps":
        if number != 0:
            raise InvalidDevice(f"device {text} is invalid: only mps or mps:0 is supported", device=text)
        return Device("mps")  # upstream names it plain "mps" whatever the spelling
    if kind in _ACCELERATORS and number is not None:
        return Device(kind, number)  # a bare "npu" is npu:0, as upstream shows it
    raise InvalidDevice(f"device {text} is invalid", device=text)


def _index(text: str) -> int | None:
    """A device index as Rust's usize parser reads it ("+1" and "01" included), else None."""
    digits = text.removeprefix("+")
    if digits and all("0" <= c <= "9" for c in digits):
        return int(digits)
    return None
