"""The format's fixed facts that reading an ordinary file needs, defined once: the header
length prefix and its cap, the u64 limit, the metadata key, JSON's whitespace, the marks of
files that are not safetensors, and whether a length prefix is one the rules accept.

Opening a well-formed file needs nothing else of ``rules`` and ``json_compat``, which say what
is wrong with a file that is not: those import their constants from here, and the read path
imports them only when a file needs the rules (most of what an import leaves alive is counted
by the garbage collector for the rest of the process).  Standard library only.
"""

from __future__ import annotations

import re

HEADER_CAP = 100_000_000  # upstream's limit on the header length N
N_LEN = 8  # the u64 little-endian length prefix
U64_LIMIT = 1 << 64  # u64 (Rust's usize) holds what is below this: sizes, offsets, dims
METADATA_KEY = "__metadata__"
WS_BYTES = re.compile(rb"[ \t\n\r]*")  # JSON's whitespace, as serde skips it before a value

#: GGUF's magic (llama.cpp's format), the first 4 bytes of a GGUF file: the one copy of it
GGUF_MAGIC = b"GGUF"

#: how a sharded checkpoint's index file name ends (``model.safetensors.index.json``); here, not
#: in :mod:`.index`, so that telling an index by its name does not import the index parser
INDEX_SUFFIX = ".index.json"


def header_length(prefix: bytes | bytearray | memoryview, file_size: int) -> int | None:
    """N, the header length the 8-byte ``prefix`` declares, when a file of ``file_size`` bytes
    may have it (it holds the prefix, N is within the cap and the file holds the header); else
    None, and ``rules.check_header_length`` says which rule it breaks."""
    if file_size < N_LEN or len(prefix) < N_LEN:
        return None
    n = int.from_bytes(prefix[:N_LEN], "little")
    return n if n <= HEADER_CAP and n + N_LEN <= file_size else None
