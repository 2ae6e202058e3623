"""How ``view`` stops on SIGINT and SIGTERM: cleanly when it can, and on SIGTERM in any case.

A process started in the background by a non-interactive shell (a script's ``cmd &``), a
service manager or a tool runner may inherit SIGINT, and sometimes SIGTERM, as *ignored*:
Python then installs no Ctrl-C handler, and until a handler is set such a signal is lost (the
kernel discards it).  :class:`Stopper` is entered first thing, before the inputs are opened and
the port is bound, so that window is only the interpreter's start:

- both signals raise KeyboardInterrupt in the main thread, which stops the server cleanly
  (``stopped``, exit 0);
- the first SIGTERM also puts SIGTERM back to its default action, so a second one ends the
  process at once, and starts a countdown: if the process still runs :data:`FORCE_AFTER`
  seconds later (its main thread stuck in a call that never returns to Python, its exit waiting
  on a thread that never ends), it exits with status 143 (128 + SIGTERM) there and then.
  The countdown also starts from the signal's byte on a wakeup file descriptor, read by a
  thread of its own, so it runs even when the main thread cannot run the Python handler.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from types import TracebackType
from typing import Any

#: seconds between the first SIGTERM and the forced exit, when the clean stop has not ended the process
FORCE_AFTER = 5.0
_TERM_EXIT = 128 + signal.SIGTERM


class Stopper:
    """SIGINT/SIGTERM handling for a long-running command (see the module docstring).  Only the
    main thread can set handlers: elsewhere entering it changes nothing."""

    def __init__(self, force_after: float = FORCE_AFTER) -> None:
        self.force_after = force_after
        self.terminated = False  # a SIGTERM arrived
        self._previous: dict[int, Any] = {}
        self._wakeup_previous: int | None = None
        self._pipe: tuple[int, int] | None = None
        self._armed = threading.Lock()
        self._countdown: threading.Thread | None = None

    def __enter__(self) -> Stopper:  # noqa: PYI034
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)  # the C-level handler must never block on it
        self._pipe = (read_end, write_end)
        self._wakeup_previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, args=(read_end,), name="pysafetensors-signals", daemon=True).start()
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if signum == signal.SIGTERM:
            self.terminated = True
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
            self._arm()
        raise KeyboardInterrupt

    def _watch(self, read_end: int) -> None:
        """Read the signal numbers the C-level handler writes, even while the main thread is stuck."""
        while True:
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            if not data:  # __exit__ closed the write end: this thread closes the read end
                os.close(read_end)
                return
            if signal.SIGTERM in data:
                self.terminated = True
                self._arm()

    def _arm(self) -> None:
        with self._armed:
            if self._countdown is not None:
                return
            self._countdown = threading.Thread(target=self._force_exit, name="pysafetensors-sigterm", daemon=True)
            self._countdown.start()

    def _force_exit(self) -> None:
        threading.Event().wait(self.force_after)
        with contextlib.suppress(Exception):
            import sys

            if sys.stderr is not None:
                sys.stderr.write(f"pysafetensors: still running {self.force_after:g} s after SIGTERM: exiting now\n")
                sys.stderr.flush()
        os._exit(_TERM_EXIT)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Put the handlers and the wakeup descriptor back; a countdown already started keeps
        running (the process is on its way out: it ends it if the exit hangs)."""
        if self._pipe is None:
            return
        for signum, handler in self._previous.items():
            if not (signum == signal.SIGTERM and self.terminated):  # stays SIG_DFL after a SIGTERM
                signal.signal(signum, handler)
        signal.set_wakeup_fd(self._wakeup_previous if self._wakeup_previous is not None else -1)
        _, write_end = self._pipe
        self._pipe = None
        os.close(write_end)  # the watcher then reads the end of the pipe, closes its end and returns


__all__ = ["FORCE_AFTER", "Stopper"]
