"""The pure format core: bytes in, frozen dataclasses out.  Standard library only."""

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
