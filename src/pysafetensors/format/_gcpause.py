"""Pause Python's cyclic garbage collector around work that allocates many acyclic objects.

Stdlib only, and in the bottom layer (format/) so that every layer may use it, the header
parser included, without format/ importing anything outside itself.

Saving or parsing thousands of tensors allocates a few objects per tensor, none of them in
cycles.  Those allocations trip generational collections, and once torch (or another large
framework) is imported a full collection walks every object it keeps, which can cost more
than the save or parse itself.  Pausing the collector for the call and restoring it afterwards
changes nothing else: reference counting still frees everything, and any cycles created
meanwhile are collected at the next collection after the call.
"""

from __future__ import annotations

import contextlib
import gc


class paused_gc(contextlib.ContextDecorator):
    """Context manager and decorator: the collector is off inside, restored (if it was on) after.

    Nesting and concurrent use are safe: only the outermost pause that found the collector on
    turns it back on.
    """

    def _recreate_cm(self) -> paused_gc:
        # As a decorator, one fresh instance per call: concurrent calls must not share the
        # remembered state (one thread's "was off" would otherwise leave it off for good).
        return paused_gc()

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()
