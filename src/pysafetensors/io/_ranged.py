"""Shared machinery of ranged remote sources: the header prefix, coalescing, parallel reads."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

from ..errors import FileClosed, SourceError

PREFETCH = 100_001  # bytes=0-100000: covers almost every real header


def coalesce(requests: Sequence[tuple[int, memoryview]], gap: int) -> list[list[tuple[int, memoryview]]]:
    """Group (offset, buffer) requests whose holes are at most ``gap`` bytes, in offset order."""
    groups: list[list[tuple[int, memoryview]]] = []
    end = -1
    for offset, buf in sorted(requests, key=lambda r: r[0]):
        if groups and offset - end <= gap:
            groups[-1].append((offset, buf))
            end = max(end, offset + len(buf))
        else:
            groups.append([(offset, buf)])
            end = offset + len(buf)
    return groups


class RangedSource:
    """Shared logic: the cached prefix, bounds checks, coalescing, parallel fetches."""

    name: str
    size: int
    coalesce_gap: int
    max_workers: int
    chunk_size: int = 16 << 20
    _prefix: bytes
    _closed: bool

    def _fetch(self, offset: int, view: memoryview) -> None:  # one request's worth
        raise NotImplementedError

    def _check(self, offset: int, n: int) -> None:
        if self._closed:
            raise FileClosed("File is closed")
        if offset < 0 or offset + n > self.size:
            raise SourceError(
                f"{self.name}: read of {n} bytes at offset {offset} runs past the end ({self.size} bytes)",
                offset=offset,
            )

    def read_into(self, offset: int, buffer: memoryview) -> None:
        self.read_ranges([(offset, buffer)])

    def read_ranges(self, requests: Sequence[tuple[int, memoryview]]) -> None:
        """Fill many (offset, buffer) pairs: nearby ranges share a request, groups run concurrently."""
        todo = []
        for offset, buffer in requests:
            view = buffer.cast("B") if buffer.format != "B" else buffer
            self._check(offset, len(view))
            cached = max(0, min(len(view), len(self._prefix) - offset))
            if cached:  # the part already fetched with the header
                view[:cached] = self._prefix[offset : offset + cached]
            if cached < len(view):
                todo.append((offset + cached, view[cached:]))
        self._fetch_parallel(todo)

    def _split_large(self, groups: list[list[tuple[int, memoryview]]]) -> list[list[tuple[int, memoryview]]]:
        # A big single range becomes chunk_size pieces fetched concurrently (far faster over
        # real networks than one stream); each piece fills its own slice of the caller's buffer.
        out: list[list[tuple[int, memoryview]]] = []
        for g in groups:
            if len(g) == 1 and self.max_workers > 1 and len(g[0][1]) > self.chunk_size:
                offset, view = g[0]
                out.extend([(offset + i, view[i : i + self.chunk_size])] for i in range(0, len(view), self.chunk_size))
            else:
                out.append(g)
        return out

    def _fetch_parallel(self, requests: Sequence[tuple[int, memoryview]]) -> None:
        groups = self._split_large(coalesce(requests, self.coalesce_gap))
        if self.max_workers <= 1 or len(groups) <= 1:
            for g in groups:
                self._fetch_group(g)
            return
        with ThreadPoolExecutor(min(self.max_workers, len(groups))) as pool:
            futures = [pool.submit(self._fetch_group, g) for g in groups]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = [f for f in futures if f in done and f.exception() is not None]
            if failed:
                # The read has failed: groups not started yet are dropped, not fetched in vain.
                for f in futures:
                    f.cancel()
                raise failed[0].exception()  # type: ignore[misc]

    def _fetch_group(self, group: list[tuple[int, memoryview]]) -> None:
        if len(group) == 1:
            self._fetch(*group[0])
            return
        start = group[0][0]
        end = max(o + len(b) for o, b in group)
        # One request for the span; the holes (at most coalesce_gap each) are read and dropped.
        span = memoryview(bytearray(end - start))
        self._fetch(start, span)
        for offset, buf in group:
            buf[:] = span[offset - start : offset - start + len(buf)]

    def close(self) -> None:
        self._closed = True
