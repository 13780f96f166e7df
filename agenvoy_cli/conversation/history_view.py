"""A big history.json as a sequence that is never whole in memory.

Backfill, compaction and doctor walk a session's history.json, which Agenvoy may have let
grow to any size. Above STREAM_BYTES they get a HistoryView instead of a list: one pass
records where each chunk of messages lies in the file; an element, a slice or an iteration
then parses only the chunks it touches (one is cached). Memory follows the chunk size.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import orjson

from agenvoy_cli.conversation import history as _history
from agenvoy_cli.conversation.history import History, load_history, scan_chunks

STREAM_BYTES = 16 << 20  # below this, the whole file in memory costs less than two passes
INSERT_ROWS = 20_000  # messages written to SQLite per statement batch


class _Chunks:
    """Where each chunk of messages lies in the file, and the last one parsed."""

    def __init__(self, path: Path, session_id: str, chunk: int) -> None:
        self.path = path
        self.spans: list[tuple[int, int | None]] = []
        self.firsts: list[int] = []
        self.total = 0
        for start, end, items in scan_chunks(path, session_id, chunk):
            self.spans.append((start, end))
            self.firsts.append(self.total)
            self.total += len(items)
        self._cached: tuple[int, list[dict[str, Any]]] | None = None

    def load(self, k: int) -> list[dict[str, Any]]:
        if self._cached is None or self._cached[0] != k:
            start, end = self.spans[k]
            with open(self.path, "rb") as handle:
                handle.seek(start)
                data = handle.read() if end is None else handle.read(end - start)
            doc = b"[" + data if end is None else b"[" + data + b"]"
            self._cached = (k, orjson.loads(doc))
        return self._cached[1]

    def at(self, i: int) -> dict[str, Any]:
        k = bisect.bisect_right(self.firsts, i) - 1
        return self.load(k)[i - self.firsts[k]]


class HistoryView(Sequence[dict[str, Any]]):
    """Messages lo..hi of a history.json, read from the file on demand."""

    def __init__(self, chunks: _Chunks, lo: int = 0, hi: int | None = None) -> None:
        self._chunks, self._lo = chunks, lo
        self._hi = chunks.total if hi is None else hi

    def __len__(self) -> int:
        return self._hi - self._lo

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, i: slice) -> HistoryView: ...

    def __getitem__(self, i: int | slice) -> dict[str, Any] | HistoryView:
        if isinstance(i, slice):
            lo, hi, step = i.indices(len(self))
            if step != 1:
                raise ValueError("HistoryView slices have no step")
            return HistoryView(self._chunks, self._lo + lo, self._lo + max(lo, hi))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._chunks.at(self._lo + i)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for part in batches(self, INSERT_ROWS):
            yield from part

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and \
            all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]


def batches(messages: Sequence[dict[str, Any]], size: int | None = None
            ) -> Iterator[list[dict[str, Any]]]:
    """Consecutive lists of at most `size` messages (a view is read chunk by chunk)."""
    size = size or INSERT_ROWS
    if not isinstance(messages, HistoryView):
        for lo in range(0, len(messages), size):
            yield list(messages[lo:lo + size])
        return
    chunks, i, hi = messages._chunks, messages._lo, messages._hi
    while i < hi:
        k = bisect.bisect_right(chunks.firsts, i) - 1
        items = chunks.load(k)
        first = chunks.firsts[k]
        stop = min(hi, first + len(items), i + size)
        yield items[i - first:stop - first]
        i = stop


def open_history(path: Path, session_id: str, chunk: int | None = None) -> History:
    """history.json for a job that walks all of it: a list when small, a HistoryView when
    big (then raw is None and nbytes gives the size)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        size = 0
    if size <= STREAM_BYTES:
        return load_history(path, session_id)
    view = HistoryView(_Chunks(path, session_id, chunk or _history.CHUNK))
    return History(path, view, None, size)  # type: ignore[arg-type]
