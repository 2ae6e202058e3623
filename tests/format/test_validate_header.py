"""``validate_header`` (validate's one parse) reports what ``check_header`` reports and gives
what ``parse_header`` gives, on the broken corpus, headers with warnings and large headers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from pysafetensors.errors import HeaderError
from pysafetensors.format.header import N_LEN, check_header, parse_header, validate_header

_spec = importlib.util.spec_from_file_location("corpus_cases", Path(__file__).parents[1] / "corpus" / "cases.py")
assert _spec and _spec.loader
cases: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def _split(data: bytes) -> tuple[bytes, int] | None:
    if len(data) < N_LEN:
        return None
    n = int.from_bytes(data[:N_LEN], "little")
    if n + N_LEN > len(data):
        return None
    return data[N_LEN : N_LEN + n], len(data)


def _many(count: int, twice: bool = False) -> bytes:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    for i in range(count):
        header[f"model.layers.{i}.weight"] = {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]}
    text = json.dumps(header)
    if twice:  # the last tensor named twice: a warning, the last entry wins
        last = f'"model.layers.{count - 1}.weight"'
        again = f'{{"dtype": "F32", "shape": [2], "data_offsets": [{8 * count - 8}, {8 * count}]}}'
        text = text[:-1] + f", {last}: {again}}}"
    return _encode(text, 8 * count)


def _encode(text: str, data: int) -> bytes:
    body = text.encode()
    return len(body).to_bytes(8, "little") + body + bytes(data)


def _cases() -> dict[str, bytes]:
    # The broken files whose length prefix is sound (validate stops before the header otherwise).
    out = {name: data for name, (data, _) in cases.BROKEN.items() if _split(data) is not None}
    out["valid small"] = _many(3)
    out["valid large"] = _many(20_000)  # over TYPED_FROM: msgspec's path where installed
    out["twice small"] = _many(3, twice=True)
    out["twice large"] = _many(20_000, twice=True)
    return out


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_validate_header_is_check_header_and_parse_header(name: str) -> None:
    split = _split(CASES[name])
    assert split is not None
    header, size = split
    found, parsed = validate_header(header, size)
    expected = list(check_header(header, size))
    assert [(p.code, str(p.error), p.tensor, p.data_offsets, p.warning) for p in found] == \
        [(p.code, str(p.error), p.tensor, p.data_offsets, p.warning) for p in expected]
    try:
        reference = parse_header(header, size)
    except HeaderError:
        assert parsed is None and any(not p.warning for p in found)
    else:
        assert parsed == reference
    if name.startswith("twice"):
        assert [p.warning for p in found] == [True] and parsed is not None
