"""A Store for a long-lived process: what `recent()` computed is kept while neither
history.json nor the database changed.

Every semantic search reads the session's recent part: history.json parsed and each message
matched to its archived row (the identity rule). At 10,000 messages that is about a second
per search; in the server it is paid once per change instead. The key is the stat of
history.json and of the database files, taken under the store lock like the read itself;
every writer changes them (an atomic replace is a new inode, an append a new size, a SQLite
commit the WAL).

What a warm search derives from those alone is kept the same way (issue #51: a warm search
costs its query embedding, not much more): the recent messages by place (`Recent.by_seq`;
the archived messages' texts are kept by search/candidates.py _archived). The store lock's
and the database's paths are checked once per WarmStore (WarmLayout): a search takes the
lock ~25 times.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.home.files import file_identity
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.home.sqlite import change_stamp


class WarmLayout(Layout):
    """The home's layout with the lock file's and the database's paths checked (no links,
    layout.py) once: the lock is opened without following links anyway (files.open_regular),
    and the issue's rule for a long-lived process is a check once per process."""

    @cached_property
    def lock(self) -> Path:
        return super().lock

    @cached_property
    def db(self) -> Path:
        return super().db


class Recent(list[Message]):
    """A session's recent messages as WarmStore keeps them (never changed once made)."""

    @cached_property
    def by_seq(self) -> dict[int, tuple[int, Message]]:
        """place -> (position in the list, message); the last of a place wins."""
        return {m.seq: (i, m) for i, m in enumerate(self)}

    def at_or_after(self, seq: int) -> int:
        """How many of the messages have a place at or after `seq` (search/scope.py
        unarchived: the archive's next place, the same for every search until a write)."""
        counts = self.__dict__.setdefault("_counts", {})
        if seq not in counts:
            counts.clear()
            counts[seq] = sum(1 for m in self if m.seq >= seq)
        return int(counts[seq])


class WarmStore(Store):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layout = WarmLayout(*self.layout)
        self._recent: dict[str, tuple[tuple[Any, ...], Recent]] = {}

    def _key(self, session_id: str) -> tuple[Any, ...]:
        return (file_identity(self.layout.history(session_id)), *change_stamp(self.layout.db))

    def recent(self, session_id: str, history: Any = None) -> list[Message]:
        if history is not None:
            return super().recent(session_id, history)
        key = self._key(session_id)
        kept = self._recent.get(session_id)
        if kept is not None and kept[0] == key:
            return kept[1]
        value = Recent(super().recent(session_id))
        self._recent[session_id] = (key, value)
        return value

    def kept_lists(self) -> list[Recent]:
        """The recent lists kept now (server/worker.py Heap watches them change)."""
        return [value for _, value in self._recent.values()]
