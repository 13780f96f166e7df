"""Compaction: trim history.json from the oldest end, never losing what SQLite lacks."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agenvoy_cli.contract import moment
from agenvoy_cli.conversation import alignment, archive, sessions
from agenvoy_cli.conversation.history import (
    History,
    dump_history,
    message_sizes,
    write_history,
)
from agenvoy_cli.home.layout import Layout


class _Synced(Protocol):
    @property
    def seqs(self) -> Sequence[int]: ...


class Archive(Protocol):
    """What compaction needs of the Store: the layout, a sync, a transaction."""

    layout: Layout

    def align(self, session_id: str, history: History | None = None, *,
             thorough: bool = False) -> _Synced: ...

    def transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]: ...

    def db(self) -> sqlite3.Connection: ...

TARGET_RATIO = 0.8
MIN_MESSAGES = 4  # as upstream: a shorter history is never trimmed


@dataclass(frozen=True)
class Compaction:
    session_id: str
    removed: int
    kept: int
    bytes_before: int
    bytes_after: int
    start_at: int | None
    start_seq: int | None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "removed": self.removed, "kept": self.kept,
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                **moment("start", self.start_at), "note": self.note}


def _can_cut(messages: list[dict[str, Any]], cut: int) -> bool:
    """Only right after a finished assistant message, so user+assistant pairs stay whole
    (and no tool result is separated from the call that asked for it)."""
    before, after = messages[cut - 1], messages[cut]
    return (before.get("role") == "assistant" and not before.get("tool_calls")
            and after.get("role") != "tool")


def choose_cut(messages: list[dict[str, Any]], max_bytes: int) -> tuple[int, str]:
    """How many messages to drop from the front; 0 with a reason when none can go."""
    sizes = message_sizes(messages)
    target = int(max_bytes * TARGET_RATIO)
    kept = sum(sizes) + 1
    best = 0
    for cut in range(1, len(messages)):
        kept -= sizes[cut - 1]
        if _can_cut(messages, cut):
            best = cut
            if kept <= target:
                return cut, ""
    if best:
        return best, f"could not reach {target} bytes without breaking a user+assistant pair"
    return 0, "no place to cut right after an assistant message; left alone"


def compact_session(store: Archive, session_id: str, limit: int, *,
                    force: bool = False) -> Compaction:
    """Trim when over the limit. Order: archive everything, record the trim point in SQLite,
    replace history.json (the caller, Store.compact, then drops the vectors older than the trim
    point). Hold the write lock."""
    from agenvoy_cli.conversation.history_view import open_history

    history = open_history(store.layout.history(session_id), session_id)  # maybe a view
    size = history.size
    count = len(history.messages)
    if size <= limit and not force:
        return Compaction(session_id, 0, count, size, size, None, None, "under the limit")
    if count < MIN_MESSAGES:
        return Compaction(session_id, 0, count, size, size, None, None,
                          f"fewer than {MIN_MESSAGES} messages; left alone")
    cut, note = choose_cut(history.messages, limit)
    if cut == 0:
        return Compaction(session_id, 0, count, size, size, None, None, note)
    return drop_oldest(store, session_id, cut, note, history)


def drop_oldest(store: Archive, session_id: str, cut: int, note: str = "",
                history: History | None = None) -> Compaction:
    """Drop history.json's first `cut` messages (archived first) and record the trim point
    (compaction's cut, or one an import restores). Hold the write lock."""
    from agenvoy_cli.conversation.history_view import open_history

    if history is None:
        history = open_history(store.layout.history(session_id), session_id)
    size, count = history.size, len(history.messages)
    same = alignment.unchanged_places(store.db(), session_id, history.path, count)
    # never drop what is not archived: the file we last wrote or aligned is, at its live
    # rows' places (an import compacting as it goes spent a fifth of its CPU aligning)
    seqs = [seq for seq, _ in same] if same is not None else \
        store.align(session_id, history).seqs
    new_start = seqs[cut]
    with store.transaction() as conn:
        start_at = archive.set_start(conn, session_id, new_start)
    data = dump_history(list(history.messages[cut:]))  # what is kept fits the limit
    write_history(history.path, data)
    with store.transaction() as conn:
        sessions.write_stats(conn, session_id, history.path, count - cut, new_start,
                             size=len(data))
    return Compaction(session_id, cut, count - cut, size, len(data), start_at, new_start, note)
