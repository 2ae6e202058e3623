"""The SafetensorError hierarchy: one class per failure kind, each carrying context.

Every class keeps upstream safetensors' message wording as the start of its message and
appends the context (tensor name, offsets, expected vs found).  Instances pickle: the
message is the only positional argument and context lives in ``__dict__``.
"""

from __future__ import annotations

from typing import Any


class SafetensorError(Exception):
    """Base of every error pysafetensors raises about a file, a tensor or an argument.

    ``input_name`` is the input (a path, a redacted URL) a tool opened when the error came out
    of opening it: the command line names it when it prints the problem in a user's words."""

    input_name: str | None = None

    def __init__(self, message: str = "", **context: Any) -> None:
        super().__init__(message)
        self.__dict__.update(context)
        if isinstance(self, OSError):
            # OSError's errno/strerror/filename are C slots that shadow __dict__: set them too.
            for key in ("errno", "strerror", "filename"):
                if key in context:
                    setattr(self, key, context[key])

    def __str__(self) -> str:
        # KeyError/IndexError mixins would otherwise repr() the message.
        return str(self.args[0]) if self.args else ""


# --- header and layout -------------------------------------------------------------------

HEADER_PREFIX = "Error while deserializing header: "
BYTES_PREFIX = "Error while deserializing: "


class HeaderError(SafetensorError):
    """The header or the layout it describes breaks a format rule.

    ``reason`` is upstream's wording (for example ``header too small``); the message is
    ``prefix + reason`` plus a parenthesised detail when there is one.  ``plain``, when set, is
    the problem in a user's words without upstream's (``not a safetensors file (...)``,
    ``truncated: N bytes of tensor data missing (...)``): what the command line prints.
    """

    reason: str  # set in __init__ through the context dict
    detail: str | None
    plain: str | None = None
    code: str | None = None  # the rule broken (``format.rules.HeaderProblem.code``), e.g. "header_too_large"
    header_size: int | None = None  # N, when the length prefix was read

    def __init__(self, message: str = "", **context: Any) -> None:
        reason = context.pop("reason", message)
        detail = context.pop("detail", None)
        prefix = context.pop("prefix", None)
        if prefix is not None:
            message = f"{prefix}{reason}" + (f" ({detail})" if detail else "")
        super().__init__(message, reason=reason, detail=detail, **context)

    @classmethod
    def make(cls, reason: str, detail: str | None = None, **context: Any) -> HeaderError:
        return cls(reason=reason, detail=detail, prefix=HEADER_PREFIX, **context)

    def with_prefix(self, prefix: str) -> HeaderError:
        """The same error, worded for another entry point (``deserialize`` uses its own prefix)."""
        context = {k: v for k, v in self.__dict__.items() if k not in ("reason", "detail")}
        return type(self)(reason=self.reason, detail=self.detail, prefix=prefix, **context)


class HeaderTooSmall(HeaderError):
    """Fewer than 8 bytes: there is no header length."""


class HeaderTooLarge(HeaderError):
    """The declared header length is over the 100,000,000 byte cap."""


class InvalidHeaderLength(HeaderError):
    """The declared header length runs past the end of the file."""


class InvalidHeaderUtf8(HeaderError):
    """The header bytes are not valid UTF-8."""


class InvalidHeaderJson(HeaderError, ValueError):
    """The header is not the JSON object the format describes (syntax, types, fields, dtypes)."""


class InvalidOffset(HeaderError):
    """A tensor's data_offsets leave a hole, overlap another tensor, or end before they begin."""


class TensorSizeMismatch(HeaderError):
    """A tensor's byte length differs from product(shape) x dtype size."""


class ValidationOverflow(HeaderError, OverflowError):
    """product(shape) x bits overflows 64 bits."""


class MisalignedSubByte(HeaderError):
    """A sub-byte dtype (F4, F6) tensor or slice does not end on a byte boundary."""


class IncompleteBuffer(HeaderError):
    """The data region is longer or shorter than the tensors the header describes."""


# --- lookups and arguments ---------------------------------------------------------------


class TensorNotFound(SafetensorError, KeyError):
    """The file has no tensor of that name."""


class MetadataKeyNotFound(SafetensorError, KeyError):
    """The file's ``__metadata__`` has no entry of that key (``metadata get``/``unset``)."""


class FileClosed(SafetensorError, ValueError):
    """The handle was used after it was closed."""


class SliceError(SafetensorError, IndexError):
    """An index expression that does not fit the tensor (out of range, bad step, too many axes)."""


class SliceIndexTypeError(SliceError, TypeError):
    """A slice bound or step that is not an integer (a TypeError, as upstream raises)."""


class InvalidFramework(SafetensorError, ValueError):
    """An unknown framework name was passed to safe_open."""


class InvalidDevice(SafetensorError, ValueError):
    """A device string safetensors does not know, or one the framework cannot use."""


class InvalidArgument(SafetensorError, ValueError):
    """An argument outside the values a function accepts (``threads=-1``...)."""


class InvalidArgumentType(InvalidArgument, TypeError):
    """An argument of the wrong type (``threads=2.5``, ``threads="2"``, ``threads=True``)."""


class InvalidBackend(InvalidArgument):
    """A storage backend other than "mmap" or "pread"."""


class UnknownDtype(SafetensorError, ValueError):
    """A dtype name or code that is not in the dtype table."""


class UnsupportedDtype(SafetensorError, TypeError):
    """A dtype the chosen framework cannot represent."""


class UnsupportedShape(SafetensorError, ValueError):
    """A valid header shape no framework array can take (a dimension of 2**63 or more, too many axes)."""


class SerializeError(SafetensorError, ValueError):
    """Input to serialize/save that cannot be written (bad name, metadata, buffer length...)."""


class InvalidMetadata(SafetensorError, TypeError):
    """Metadata that is not a mapping of str to str, or a tensor name that cannot be written."""


class UnencodableText(InvalidMetadata, UnicodeError):
    """A tensor name or metadata key or value that UTF-8 cannot encode (a lone surrogate such as
    ``"\\ud800"``), so no header can hold it; ``tensor`` or ``key`` names the entry.  Upstream
    raises a bare UnicodeEncodeError; this one is also a UnicodeError (and a ValueError)."""


class InvalidShape(SerializeError, TypeError):
    """A shape given for writing that is not a sequence of non-negative ints (a str, floats, bools)."""


class UnsupportedValue(SerializeError, TypeError):
    """A value passed for saving that is not a tensor, TensorSpec or buffer."""


class NotAMapping(UnsupportedValue, ValueError):
    """What every face's ``save``/``save_file``/``save_sharded`` and ``serialize`` raise for
    tensors that are not a mapping: a TypeError as upstream's numpy face raises and a
    ValueError as upstream's torch face raises."""


class IncompleteWrite(SerializeError):
    """An incremental writer closed before every declared tensor was fully written."""


class WriteError(SafetensorError, OSError):
    """Writing the output failed (disk full, permission...); the previous file is left intact."""


class UploadNotAborted(WriteError):
    """A failed save's S3 multipart upload could not be aborted: S3 keeps its parts (billed)
    until it is.  ``bucket``, ``key`` and ``upload_id`` name it; the message gives the command
    that removes it."""


class UnwritableTarget(WriteError):
    """A save's target cannot be written at all: an ``http(s)://`` URL, or a store or URL
    fsspec opens read-only.  Nothing was written."""


class ProtectedTarget(WriteError):
    """An edit refused before writing: the target is read-only, a symbolic link or hard-linked,
    and the caller did not say how to treat it (``force``, ``links``)."""


class SourceError(SafetensorError, OSError):
    """Reading the underlying bytes failed (short read, I/O error).

    ``offset`` is the file offset where reading stopped, when known; a read the reader made
    for a tensor also carries ``tensor`` and ``source`` (the file's name or redacted URL).
    """

    offset: int | None = None
    tensor: str | None = None
    source: str | None = None
    code: str | None = None  # a stream that ended before 8 bytes: "header_too_small", as ``validate`` lists it
    size: int | None = None  # the bytes there were (a short stream) or were declared (a too-large one)


class InputTooLarge(SourceError):
    """A stream (pipe, FIFO, character device) is longer, or its header declares more, than the
    cap on what is copied of a streamed input (``limit``, bytes): refused before the copy grows
    past it.  ``max_input_size`` (``--max-input-size`` on the command line) changes the cap."""

    limit: int


class InsufficientMemory(SafetensorError, MemoryError):
    """A read that copies (``pread``, HTTP...) would allocate more than this process can have:
    refused before anything is allocated.  ``requested`` and ``available`` are bytes,
    ``limit`` names the bound (``MemAvailable``, a cgroup limit, ``RLIMIT_AS``...), ``source``
    the file.  ``backend="mmap"`` or reading tensors one at a time needs no such buffer."""

    requested: int
    available: int | None
    limit: str


class NotARegularFile(SourceError):
    """A path to read names a FIFO, socket, device or directory: refused before it could block."""


class DirectoryNotFile(NotARegularFile, IsADirectoryError):
    """A path to read (a file, or a shard an index names) is a directory."""


class CheckpointNotFound(SourceError, FileNotFoundError):
    """A directory (or URL prefix) opened as a checkpoint holds neither an index nor a
    ``.safetensors`` file.  ``filename`` is the directory; the message keeps the "No such file
    or directory" wording of a missing path."""


class MissingDependency(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(
            f"{module} is required for this feature: pip install 'pysafetensors[{extra}]'"
        )
        self.module = module
        self.extra = extra

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.module, self.extra))


class AliasConflict(SafetensorError, ImportError):
    """``install_as_safetensors()`` found the real ``safetensors`` already imported in this process."""


# --- checkpoint conversion (pysafetensors.convert) ---------------------------------------


class ConversionError(SafetensorError):
    """A checkpoint or numpy file could not be converted to safetensors."""


class UnsafePickle(ConversionError):
    """The pickle asks for a global or an operation outside the conversion allowlist.

    ``global_name`` names the offending global (when there is one) and ``position`` is the
    byte position of the opcode in the file or archive entry.
    """


class UnsupportedCheckpoint(ConversionError, ValueError):
    """Well-formed input holding something safetensors cannot represent (quantized or sparse
    tensors, TorchScript archives, the pre-1.0 tar format, object arrays...)."""


class CorruptCheckpoint(ConversionError, ValueError):
    """A truncated or malformed archive, pickle or storage (offsets outside the storage...)."""


class ConversionLimitExceeded(CorruptCheckpoint):
    """The input asks for more work or memory than its real size can justify: containers shared
    so often that flattening would walk far more entries than the file holds, an allocation
    (``bytearray(n)``, a zip member's inflated size...) past the budget of its size times a
    fixed factor, an oversized dict key.  ``limit`` names the bound; ``requested`` and
    ``allowed`` carry the numbers.  Raised before the work or the allocation happens."""


class VerificationFailed(ConversionError):
    """The written file does not match its source; ``report`` holds the findings."""


# --- GGUF (pysafetensors.gguf) -----------------------------------------------------------


class GGUFError(SafetensorError, ValueError):
    """A GGUF file breaks a rule of its format (magic, version, a length or count past the end
    of the file, overlapping tensor data...); the message gives the offset or tensor."""


class GGUFUnsupported(GGUFError):
    """A well-formed GGUF that cannot be turned into what was asked (an unknown GGML type,
    a quantized tensor with ``--dtype keep``...)."""


# --- remote sources and sharded checkpoints ----------------------------------------------


class RemoteError(SourceError):
    """A remote source (HTTP, fsspec) failed: bad status, retries exhausted, odd reply."""


class RemoteTimeout(RemoteError, TimeoutError):
    """A remote request missed its deadline (no reply in time, or a body slower than ``min_rate``).

    ``url`` is the redacted URL, ``range`` the requested bytes, ``elapsed`` the seconds spent.
    """


class RangeNotSupported(RemoteError):
    """The server ignored the Range header and sent the whole file (pass allow_full_download=True to accept)."""


class InvalidIndex(SafetensorError, ValueError):
    """A sharded checkpoint index (model.safetensors.index.json) is malformed or names an unsafe shard."""


class CheckpointMismatch(InvalidIndex):
    """A shard was written by another save than its index (their checkpoint ids differ): a
    mixed set, for example from an interrupted or concurrent save."""


class UnmappedTensorWarning(UserWarning):
    """A shard holds tensors its index does not map to it; they are not part of the checkpoint."""


class MissingBackend(MissingDependency):
    """An fsspec URL whose filesystem backend (s3fs, gcsfs...) is not installed."""

    def __init__(self, module: str, extra: str, scheme: str = "") -> None:
        super().__init__(module, extra)
        self.scheme = scheme
        self.args = (
            (
                f"{scheme}:// URLs need the fsspec backend {module}: pip install {module} "
                f"(fsspec itself comes with pip install 'pysafetensors[{extra}]')"
            ),
        )

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.module, self.extra, self.scheme))
