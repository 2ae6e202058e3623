"""An allowlist unpickler: it never imports a module and never calls anything outside a fixed table.

Built on the pure-Python ``pickle._Unpickler`` so every opcode that can reach code goes through
a method here:

- ``GLOBAL``/``STACK_GLOBAL`` resolve names only through the caller's ``allowlist`` (nothing is
  imported); ``INST``, ``OBJ`` and ``EXT1/2/4`` are refused outright.
- ``REDUCE``/``NEWOBJ``/``NEWOBJ_EX`` call only :class:`Allowed` stand-ins from that table.
- ``BUILD`` is accepted on plain dicts (``OrderedDict`` attributes such as torch's
  ``_metadata``), whose state is dropped, and on our own :class:`Buildable` stand-ins (numpy
  arrays and dtypes), which validate it.
- ``APPEND(S)``/``SETITEM(S)``/``ADDITEMS`` only touch built-in lists, dicts and sets, so no
  ``append``/``extend``/``__setitem__`` of a foreign object is ever looked up.

Every refusal is an :class:`UnsafePickle` naming the global or opcode and its byte position.
The pickle's cost is bounded (see :mod:`.limits`): reads never go past ``limit`` bytes, so a
forged length cannot make it allocate more than the file holds; every allowlisted call is
charged the size of its arguments (and ``bytearray(n)`` its ``n``) to the source's
:class:`~.limits.Budget` before it runs; dict keys and set elements are checked before they
are hashed.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
import struct
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, ClassVar

from ..errors import CorruptCheckpoint, SafetensorError, UnsafePickle
from .limits import Budget, short_repr


@dataclass(frozen=True)
class Allowed:
    """A callable the pickle may invoke by REDUCE/NEWOBJ: our own stand-in for a real global.

    With ``takes_budget`` it is called as ``function(budget, *args)``, to charge what it is
    about to allocate or to check the keys it is about to hash.
    """

    qualname: str
    function: Callable[..., Any]
    takes_budget: bool = False


class Buildable:
    """Base of our stand-ins that accept BUILD (a ``__setstate__``): ``build`` validates the state."""

    def build(self, state: Any) -> None:
        raise NotImplementedError


_SIZED = (str, bytes, bytearray, tuple, list, dict, set, frozenset)


def argument_cost(args: tuple[Any, ...]) -> int:
    """What a call may allocate or walk in proportion to its arguments (their lengths)."""
    return sum(len(a) for a in args if isinstance(a, _SIZED))


class _BoundedReader:
    """A read-only view of a binary file from its current position to its end (as it is now)."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        here = file.tell()
        self._left = file.seek(0, io.SEEK_END) - here
        file.seek(here)

    def tell(self) -> int:
        return self._file.tell()

    def read(self, n: int = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._file.read(n)
        self._left -= len(data)
        return data

    def readinto(self, buf: Any) -> int:
        view = memoryview(buf).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readline(self) -> bytes:
        data = self._file.readline(self._left)
        self._left -= len(data)
        return data


def _opcode_names() -> dict[int, str]:
    return {op.code.encode("latin-1")[0]: op.name for op in __import__("pickletools").opcodes}


_OPNAMES = _opcode_names()
# The pure-Python unpickler, as Any: typeshed declares the class but not the internals used
# here (``dispatch``, ``pop_mark``, ``fix_imports``).
_PyUnpickler: Any = pickle._Unpickler


class RestrictedUnpickler(_PyUnpickler):  # type: ignore[misc]  # a subclass of Any (see above)
    """An unpickler of bytes or a file (``load()`` reads one object, from the file's current
    position to its end at most) with ``allowlist`` as the only namespace, charging ``budget``:
    the source's, shared by every pickle of one file.

    ``allowlist`` maps ``(module, name)`` to the object the global stands for (an
    :class:`Allowed` for callables, any inert value otherwise).  ``refused`` maps known globals
    that must not load to an exception factory ``(qualname, position) -> SafetensorError``.
    ``persistent_load`` receives persistent ids (torch storages).
    """

    dispatch: ClassVar[dict[int, Any]] = dict(_PyUnpickler.dispatch)

    def __init__(
        self,
        data: bytes | BinaryIO,
        *,
        allowlist: Mapping[tuple[str, str], Any],
        persistent_load: Callable[[Any], Any] | None = None,
        refused: Mapping[tuple[str, str], Callable[[str, int], SafetensorError]] | None = None,
        where: str = "pickle",
        budget: Budget,
    ) -> None:
        file = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
        self._reader = _BoundedReader(file)
        super().__init__(self._reader, encoding="ASCII", fix_imports=True)
        self._budget = budget
        self._allowlist = allowlist
        self._refused = refused or {}
        self._persistent = persistent_load
        self._where = where
        self._op_pos = self._reader.tell()
        self._op = "?"

    # --- position tracking ------------------------------------------------------------------
    def _tell(self) -> int:
        pos = self._reader.tell()
        frame = getattr(self, "_unframer", None)
        current = getattr(frame, "current_frame", None) if frame is not None else None
        if current is not None:
            with current.getbuffer() as buf:
                pos -= len(buf) - current.tell()
        return pos

    def load(self) -> Any:
        """Run the pickle to its STOP opcode; any failure is a SafetensorError with the position."""
        self._unframer = pickle._Unframer(self._file_read, self._file_readline)  # type: ignore[attr-defined]
        self.read = self._unframer.read
        self.readinto = self._unframer.readinto
        self.readline = self._unframer.readline
        self.metastack: list[Any] = []
        self.stack: list[Any] = []
        self.append = self.stack.append
        self.proto = 0
        read = self.read
        dispatch = self.dispatch
        try:
            while True:
                self._op_pos = self._tell()
                key = read(1)
                if not key:
                    raise EOFError("pickle data was truncated")
                self._op = _OPNAMES.get(key[0], f"0x{key[0]:02x}")
                handler = dispatch.get(key[0])
                if handler is None:
                    raise pickle.UnpicklingError(f"invalid load key {key!r}")
                handler(self)
        except pickle._Stop as stop:  # type: ignore[attr-defined]
            return stop.value
        except SafetensorError as e:
            if "position" not in e.__dict__:
                # raised by a stand-in (a bad tensor record): say where in the pickle it was
                e.__dict__["position"] = self._op_pos
                e.args = (f"{self._where}, pickle byte {self._op_pos}: {e}", *e.args[1:])
            raise
        except (EOFError, pickle.UnpicklingError, ValueError, TypeError, IndexError, KeyError,
                AttributeError, OverflowError, MemoryError, RecursionError, UnicodeDecodeError) as e:
            detail = str(e) or type(e).__name__
            raise CorruptCheckpoint(
                f"{self._where}: malformed or truncated pickle at byte {self._op_pos} "
                f"(opcode {self._op}): {detail}",
                position=self._op_pos,
                opcode=self._op,
            ) from e

    # --- refusals ---------------------------------------------------------------------------
    def _unsafe(self, what: str, global_name: str | None = None) -> UnsafePickle:
        return UnsafePickle(
            f"{self._where}: refusing {what} at byte {self._op_pos} (opcode {self._op}); "
            "only tensor data, plain containers and a fixed list of torch globals may appear "
            "in a checkpoint",
            global_name=global_name,
            position=self._op_pos,
            opcode=self._op,
        )

    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:
            # Protocol 0-2 pickles name Python 2 modules (__builtin__, copy_reg).
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        if not isinstance(module, str) or not isinstance(name, str):
            raise self._unsafe("a global whose name is not a string")
        qualname = f"{module}.{name}"
        if (module, name) in self._refused:
            raise self._refused[(module, name)](qualname, self._op_pos)
        try:
            return self._allowlist[(module, name)]
        except KeyError:
            raise self._unsafe(f"global {qualname!r}", qualname) from None

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise self._unsafe(f"persistent id {short_repr(pid)}")
        return self._persistent(pid)

    # --- guarded opcodes --------------------------------------------------------------------
    def _call(self, func: Any, args: Any) -> Any:
        if not isinstance(func, Allowed):
            raise self._unsafe(f"a call to {type(func).__name__} object {short_repr(func)}")
        if not isinstance(args, tuple):
            raise self._unsafe(f"a call to {func.qualname} with non-tuple arguments")
        self._budget.charge(argument_cost(args), f"a call to {func.qualname} at byte {self._op_pos}")
        try:
            if func.takes_budget:
                return func.function(self._budget, *args)
            return func.function(*args)
        except SafetensorError:
            raise
        except TypeError as e:
            raise CorruptCheckpoint(
                f"{self._where}: bad arguments to {func.qualname} at byte {self._op_pos}: {e}",
                global_name=func.qualname,
                position=self._op_pos,
            ) from e

    def load_reduce(self) -> None:
        args = self.stack.pop()
        func = self.stack[-1]
        self.stack[-1] = self._call(func, args)

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._call(cls, args))

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        if kwargs:
            raise self._unsafe("NEWOBJ_EX with keyword arguments")
        self.append(self._call(cls, args))

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        if isinstance(inst, Buildable):
            inst.build(state)
            return
        # torch's state dicts are OrderedDicts carrying a `_metadata` attribute (module
        # versions): accepted on dicts, and dropped, since it is not tensor data.
        if type(inst) not in (dict, OrderedDict):
            raise self._unsafe(f"BUILD (__setstate__) on a {type(inst).__name__} object")

    def load_bytearray8(self) -> None:
        # The base class allocates the declared length before reading: read first, so a
        # forged length cannot allocate more than the pickle holds.
        (size,) = struct.unpack("<Q", self.read(8))
        data = self.read(size)
        if len(data) != size:
            raise EOFError(f"BYTEARRAY8 declares {size:,} bytes but the pickle holds {len(data):,}")
        self._budget.charge(size, f"BYTEARRAY8 at byte {self._op_pos}")
        self.append(bytearray(data))

    def load_dict(self) -> None:
        items = self.pop_mark()
        if len(items) % 2:
            raise pickle.UnpicklingError("DICT with an odd number of items")
        self._budget.check_keys(items[0::2])
        self.append({items[i]: items[i + 1] for i in range(0, len(items), 2)})

    def load_frozenset(self) -> None:
        items = self.pop_mark()
        self._budget.check_keys(items)
        self.append(frozenset(items))

    def _refuse_opcode(self) -> None:
        raise self._unsafe(f"opcode {self._op}")

    def _refuse_inst(self) -> None:
        # INST names its class inline: read the name so the error can say what was asked for.
        module = self.readline()[:-1].decode("ascii", "replace")
        name = self.readline()[:-1].decode("ascii", "replace")
        raise self._unsafe(f"opcode INST of {module}.{name!r}", f"{module}.{name}")

    def _target(self, types: tuple[type, ...], doing: str) -> Any:
        """The object on top of the stack an opcode adds to, refused unless of ``types``."""
        target = self.stack[-1]
        if type(target) not in types:
            raise self._unsafe(f"{doing} a {type(target).__name__} object")
        return target

    def load_append(self) -> None:
        value = self.stack.pop()
        self._target((list,), "APPEND to").append(value)

    def load_appends(self) -> None:
        items = self.pop_mark()
        self._target((list,), "APPENDS to").extend(items)

    def load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        target = self._target((dict, OrderedDict), "SETITEM on")
        self._budget.check_key(key)
        target[key] = value

    def load_setitems(self) -> None:
        items = self.pop_mark()
        target = self._target((dict, OrderedDict), "SETITEM on")
        self._budget.check_keys(items[0:len(items) - 1:2])
        for i in range(0, len(items) - 1, 2):
            target[items[i]] = items[i + 1]

    def load_additems(self) -> None:
        items = self.pop_mark()
        target = self._target((set,), "ADDITEMS on")
        self._budget.check_keys(items)
        target.update(items)


_D = RestrictedUnpickler.dispatch
_R = RestrictedUnpickler
for _code, _handler in (
    (pickle.REDUCE, _R.load_reduce), (pickle.NEWOBJ, _R.load_newobj), (pickle.NEWOBJ_EX, _R.load_newobj_ex),
    (pickle.BUILD, _R.load_build), (pickle.APPEND, _R.load_append), (pickle.APPENDS, _R.load_appends),
    (pickle.SETITEM, _R.load_setitem), (pickle.SETITEMS, _R.load_setitems), (pickle.ADDITEMS, _R.load_additems),
    (pickle.BYTEARRAY8, _R.load_bytearray8), (pickle.DICT, _R.load_dict), (pickle.FROZENSET, _R.load_frozenset),
    (pickle.INST, _R._refuse_inst),
):
    _D[_code[0]] = _handler
for _op in (pickle.OBJ, pickle.EXT1, pickle.EXT2, pickle.EXT4):
    _D[_op[0]] = RestrictedUnpickler._refuse_opcode
# The base class binds these two to its own find_class/persistent_load through self, so they
# already go through the methods above; listed here so a reader sees every code-reaching opcode.
assert pickle.GLOBAL[0] in _D and pickle.STACK_GLOBAL[0] in _D and pickle.BINPERSID[0] in _D

