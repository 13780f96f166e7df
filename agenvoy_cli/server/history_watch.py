"""Messages another program wrote to history.json (Agenvoy itself, an editor): noticed by a
stat, brought into SQLite by the same sync `agenvoy backfill` runs, then indexed.

Every writer of ours records the identity (inode, size, mtime) of the history.json it left
in session_stats (conversation/sessions.py). A file whose stat differs from its row was
written by someone else: Agenvoy's history.Append (the whole array rewritten, with or
without its own SQLite rows), its /compact, a hand edit. The server watches every session
folder (one stat per session per HISTORY_POLL seconds; the rows are read only when a stat
moved) and syncs such a session under the store lock, so its new messages get their places
and the background indexer embeds them. A search syncs its own session first (one stat and
one row), so the next search after Agenvoy's write finds it, whatever the poll's phase.
"""

from __future__ import annotations

import os
import sys

from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import AgenvoyError
from agenvoy_cli.home.files import FileIdentity, file_identity

HISTORY_POLL = 1.0  # seconds between looks at the session folders


def _recorded(store: Store, session_id: str) -> FileIdentity | None:
    """What our last write recorded of history.json (conversation.sessions owns the row;
    an older schema without the table has none: sync to know)."""
    from agenvoy_cli.conversation import sessions

    row = sessions.rows(store.db_readonly(), only=session_id).get(session_id)
    if row is None or row.hist_ino is None or row.hist_mtime_ns is None:
        return None
    return FileIdentity(row.bytes, row.hist_ino, row.hist_mtime_ns)


def align_if_written_elsewhere(store: Store, session_id: str) -> int:
    """Sync the session when its history.json is not the file our last write left; the
    number of messages that became archived (0: nothing to do). Call on the store thread."""
    stamp = file_identity(store.layout.history(session_id))
    if stamp is None:
        return 0
    with store.read_lock():
        if _recorded(store, session_id) == stamp:
            return 0
    with store.write_lock():
        if _recorded(store, session_id) == file_identity(store.layout.history(session_id)):
            return 0  # another process synced meanwhile
        return store.align(session_id).inserted or 0


class Watcher:
    """The session folders' history.json stats between looks (on the store thread)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.stamps: dict[str, tuple[int, int, int] | None] | None = None
        self.failed: set[str] = set()

    def look(self, wanted: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
        """Sessions whose history.json another program changed since the last look, synced
        (the first look syncs only the `wanted` ones, the bound session: the server indexes
        what changes while it runs, plus the sessions it is asked about)."""
        from agenvoy_cli.conversation.sessions import folder_names

        try:
            root = self.store.layout.sessions
        except AgenvoyError:  # e.g. sessions/ made a symlink: refused, nothing to watch
            return []
        now = {n: file_identity(os.path.join(root, n, "history.json")) for n in folder_names(root)}
        before, self.stamps = self.stamps, now
        out = []
        for name, stamp in now.items():
            if stamp is None or (before.get(name) == stamp if before is not None
                                 else name not in wanted):
                continue
            try:
                if align_if_written_elsewhere(self.store, name):
                    out.append(name)
                self.failed.discard(name)
            except AgenvoyError as exc:  # e.g. a file caught half-written: next look
                self.stamps[name] = (before or {}).get(name)
                if name not in self.failed:
                    sys.stderr.write(f"agenvoy: warning: history.json of {name} changed "
                                     f"but could not be synced: {exc}\n")
                    self.failed.add(name)
        return out
