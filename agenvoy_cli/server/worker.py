"""The one thread that touches the Store, and the background indexer that runs on it.

A Store is not thread-safe (its SQLite connections, and the lock's bookkeeping, which counts
nesting per process), so every tool call and every indexing step is a job on one thread, in
order. Indexing goes in steps of a fraction of a second (catch_up with a small budget), so a
tool call waits at most one step.

What to index: the session the server is bound to, sessions used through the server, and
any session whose archive grows while the server runs (an agent appending through the CLI,
Agenvoy itself). Growth is noticed cheaply: a stat of the database files every POLL seconds,
then, only when they changed, one index lookup per session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from agenvoy_cli.conversation.store import Store

T = TypeVar("T")
POLL = 0.25  # seconds between looks at the database files
STEP = 0.4  # seconds of embedding per indexing step


class StoreThread:
    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agenvoy-store")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self.pool.submit(fn, *args))

    def close(self) -> None:
        """Wait for the job in progress (a tool call or one indexing step), drop the rest."""
        self.pool.shutdown(wait=True, cancel_futures=True)


def _stamp(store: Store) -> tuple[Any, ...]:
    out: list[Any] = []
    db = store.layout.db
    for path in (db, db.with_name(db.name + "-wal")):
        try:
            st = os.stat(path)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


class Indexer:
    """State of the background indexing; its methods run on the store thread."""

    def __init__(self, store: Store, bound: str | None) -> None:
        self.store = store
        self.wanted: set[str] = {bound} if bound else set()
        self.dirty: set[str] = set(self.wanted)
        self.seen: dict[str, int] | None = None  # session -> next_seq last looked at
        self.stamp: tuple[Any, ...] | None = None
        self.failed: set[str] = set()
        self.stopped = False  # set on shutdown: no new step starts

    def touched(self, session_id: str) -> None:
        self.wanted.add(session_id)
        self.dirty.add(session_id)

    def changed(self) -> bool:
        """Cheap (two stats): did any process write the database since the last look?"""
        stamp = _stamp(self.store)
        if stamp == self.stamp:
            return False
        self.stamp = stamp
        return True

    def look(self) -> None:
        """Which sessions grew since the last look (their next seq moved)."""
        from agenvoy_cli.conversation import archive

        with self.store.read_lock():
            conn = self.store.db_readonly()
            if conn is None:
                return
            ids = [r[0] for r in conn.execute("SELECT session_id FROM session_meta")]
            now = {sid: archive.session_rows(conn, sid).next_seq for sid in ids}
        if self.seen is not None:
            self.dirty.update(sid for sid, nxt in now.items() if self.seen.get(sid) != nxt)
        self.seen = now

    def step(self) -> bool:
        """Embed for about STEP seconds in one dirty session; False when nothing is left."""
        from agenvoy_cli.errors import AgenvoyError
        from agenvoy_cli.search.catchup import catch_up

        while self.dirty and not self.stopped:
            session_id = min(self.dirty)
            try:
                left = catch_up(self.store, session_id, STEP).unindexed
            except AgenvoyError as exc:  # e.g. an unreachable Chroma server: say it once
                if session_id not in self.failed:
                    sys.stderr.write(f"agenvoy: warning: background indexing of "
                                     f"{session_id}: {exc}\n")
                    self.failed.add(session_id)
                left = []
            if left:
                return True
            self.dirty.discard(session_id)
        return False


async def index_forever(thread: StoreThread, indexer: Indexer, wake: asyncio.Event) -> None:
    """Poll for other processes' writes; index what is new, one step per job."""
    while True:
        if await thread.run(indexer.changed):
            await thread.run(indexer.look)
        while await thread.run(indexer.step):
            pass
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), POLL)
        except asyncio.TimeoutError:
            pass
