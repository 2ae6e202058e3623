"""The pure format core: bytes in, frozen dataclasses out.  Standard library only.

The names below are loaded on first use (PEP 562 module ``__getattr__``, as in the package
root): reading a file imports the header and slicing modules, never the write layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:  # the names as type checkers see them (the same objects, imported eagerly)
    from .dtypes import DType, all_dtypes, by_code, by_spec_name
    from .header import (
        HEADER_CAP,
        Header,
        TensorInfo,
        encode_header,
        parse_header,
        parse_header_length,
    )
    from .layout import LayoutEntry, WriteLayout, plan_layout
    from .rules import HeaderProblem, check_header, check_header_length
    from .slicing import SlicePlan, plan_slice

# public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    **dict.fromkeys(("DType", "all_dtypes", "by_code", "by_spec_name"), "dtypes"),
    **dict.fromkeys(
        ("HEADER_CAP", "Header", "TensorInfo", "encode_header", "parse_header", "parse_header_length"), "header"
    ),
    **dict.fromkeys(("LayoutEntry", "WriteLayout", "plan_layout"), "layout"),
    **dict.fromkeys(("HeaderProblem", "check_header", "check_header_length"), "rules"),
    **dict.fromkeys(("SlicePlan", "plan_slice"), "slicing"),
}

__all__ = [
    "HEADER_CAP",
    "DType",
    "Header",
    "HeaderProblem",
    "LayoutEntry",
    "SlicePlan",
    "TensorInfo",
    "WriteLayout",
    "all_dtypes",
    "by_code",
    "by_spec_name",
    "check_header",
    "check_header_length",
    "encode_header",
    "parse_header",
    "parse_header_length",
    "plan_layout",
    "plan_slice",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY, __all__)
