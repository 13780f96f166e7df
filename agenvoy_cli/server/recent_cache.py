"""A Store for a long-lived process: what `recent()` computed is kept while neither
history.json nor the database changed.

Every semantic search reads the session's recent part: history.json parsed and each message
matched to its archived row (the identity rule). At 10,000 messages that is about a second
per search; in the server it is paid once per change instead. The key is the stat of
history.json and of the database files, taken under the store lock like the read itself;
every writer changes them (an atomic replace is a new inode, an append a new size, a SQLite
commit the WAL).
"""

from __future__ import annotations

from typing import Any

from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.home.files import file_identity


class WarmStore(Store):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._recent: dict[str, tuple[tuple[Any, ...], list[Message]]] = {}

    def _key(self, session_id: str) -> tuple[Any, ...]:
        db = self.layout.db
        return (file_identity(self.layout.history(session_id)), file_identity(db),
                file_identity(db.with_name(db.name + "-wal")))

    def recent(self, session_id: str, history: Any = None) -> list[Message]:
        if history is not None:
            return super().recent(session_id, history)
        key = self._key(session_id)
        kept = self._recent.get(session_id)
        if kept is not None and kept[0] == key:
            return kept[1]
        value = super().recent(session_id)
        self._recent[session_id] = (key, value)
        return value
