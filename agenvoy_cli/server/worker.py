"""The one thread that touches the Store, and the background indexer that runs on it.

A Store is not thread-safe (its SQLite connections, and the lock's bookkeeping, which counts
nesting per process), so every tool call and every indexing step is a job on one thread, in
order. Indexing plans and adds on that thread, but embeds beside it (the slow part needs no
store), so a tool call never waits for the model; a search's query waits at most one batch.

What to index: the session the server is bound to, sessions used through the server, and
any session whose archive grows while the server runs (an agent appending through the CLI,
Agenvoy itself). Growth is noticed cheaply: a stat of the database files every POLL seconds,
then, only when they changed, one index lookup per session. Messages another program wrote
only to history.json are noticed by a stat of each session's file every HISTORY_POLL seconds
and synced into SQLite first (server/history_watch.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from agenvoy_cli.conversation.store import Store
from agenvoy_cli.home.sqlite import change_stamp
from agenvoy_cli.server.history_watch import HISTORY_POLL, Watcher
from agenvoy_cli.server.recent_cache import WarmStore

if TYPE_CHECKING:
    from agenvoy_cli.search.relevance import Relevance

T = TypeVar("T")
POLL = 0.25  # seconds between looks at the database files
AHEAD_IDLE = 5.0  # seconds between looks for attribution texts to embed, once none were left
FAILED_PAUSE = 1.0  # seconds before an indexing step that failed is tried again
QUIET = 0.5  # seconds without a tool call before the attribution warm-up takes a step
BATCH = 2  # messages embedded per step (a search's query embedding waits at most one:
# ~0.4 s with the default model; the CPU per message is the same for any batch size)


class StoreThread:
    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agenvoy-store")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wrap_future(self.pool.submit(fn, *args))

    def close(self) -> None:
        """Wait for the job in progress (a tool call or one indexing step), drop the rest."""
        self.pool.shutdown(wait=True, cancel_futures=True)


class Heap:
    """Python's cyclic collector in a long-lived server: what a warm search keeps (the
    models, each session's kept matrix and metadata, its recent messages) is hundreds of
    thousands of objects that every full collection walks again, a pause of tens of ms in
    whichever search triggers it (the p99). Once that state changed (first search, a new
    generation), everything is collected and the survivors frozen (gc.freeze: left out of
    later collections); unfrozen first, so what the last freeze held and has since become
    garbage is collected too. Run on the store thread after a tool call."""

    def __init__(self) -> None:
        self.seen: tuple[int, ...] = ()

    def settle(self, store: Store) -> None:
        import gc

        from agenvoy_cli.vectors import context

        try:
            kept = list(context.of(store).exact.values())
        except TypeError:  # a Store without the vector index
            return
        recent = store.kept_lists() if isinstance(store, WarmStore) else []
        state = tuple(id(x) for x in [*kept, *recent])
        if state == self.seen:
            return
        self.seen = state
        gc.unfreeze()
        gc.collect()
        gc.freeze()


class Indexer:
    """State of the background indexing; its methods run on the store thread."""

    def __init__(self, store: Store, bound: str | None,
                 relevance: Relevance | None = None) -> None:
        self.store = store
        self.relevance = relevance  # the server's (search/relevance.py): what it keeps
        self.wanted: set[str] = {bound} if bound else set()
        self.dirty: set[str] = set(self.wanted)
        self.seen: dict[str, int] | None = None  # session -> next_seq last looked at
        self.stamp: tuple[Any, ...] | None = None
        self.failed: set[str] = set()
        self.stopped = False  # set on shutdown: no new step starts
        self.watcher = Watcher(store)
        self.queries: Any = None  # attribution_vectors.QueryCache, once installed
        self.made_ahead: dict[str, Any] = {}  # kept-vector key -> attribution_vectors.Ahead
        self.ahead_after = 0.0  # monotonic time before which ahead() does not look
        self.last_call = 0.0  # monotonic end of the last tool call (set by the app)
        self.watched_at = -HISTORY_POLL
        self.imported = False  # import_heavy() has run
        self.last_failure = ""  # the last indexing failure said on stderr
        self.notes_dirty = True  # the database changed since notes were last looked at

    def histories(self) -> None:
        """Every HISTORY_POLL seconds: sync the sessions whose history.json another program
        wrote, and index them."""
        import time

        if time.monotonic() - self.watched_at < HISTORY_POLL:
            return
        self.watched_at = time.monotonic()
        self.dirty.update(self.watcher.look(self.wanted))

    def touched(self, session_id: str) -> None:
        self.wanted.add(session_id)
        self.dirty.add(session_id)

    def changed(self) -> bool:
        """Cheap (two stats): did any process write the database since the last look?"""
        stamp = change_stamp(self.store.layout.db)
        if stamp == self.stamp:
            return False
        self.stamp = stamp
        self.notes_dirty = True
        return True

    def look(self) -> None:
        """Which sessions grew since the last look (their next seq moved)."""
        from agenvoy_cli.conversation import archive

        with self.store.read_lock():
            conn = self.store.db_readonly()
            if conn is None:
                return
            now = archive.next_seqs(conn)
        if self.seen is not None:
            self.dirty.update(sid for sid, nxt in now.items() if self.seen.get(sid) != nxt)
        self.seen = now

    def import_heavy(self) -> None:
        """chromadb (numpy with it) imported on the store thread, before any embedding thread
        starts: two threads importing numpy at once can meet it half-initialised ("cannot
        import name 'NDArray' from partially initialized module"). Every embedding waits for
        this (App.embed_query, index_forever)."""
        if self.imported:
            return
        from agenvoy_cli.vectors.hooks import preload

        try:
            preload()
        except ImportError:
            pass  # chromadb missing or broken: the search that needs it says so
        self.imported = True

    def next_job(self) -> tuple[str, Any, list[Any]] | None:
        """The next batch to embed: (session, index, messages), or None when all is done."""
        from agenvoy_cli.errors import AgenvoyError
        from agenvoy_cli.search import catchup

        while self.dirty and not self.stopped:
            session_id = min(self.dirty)
            try:
                index, todo = catchup.todo(self.store, session_id)
            except AgenvoyError as exc:  # e.g. an unreachable Chroma server: say it once
                if session_id not in self.failed:
                    sys.stderr.write(f"agenvoy: warning: background indexing of "
                                     f"{session_id}: {exc}\n")
                    self.failed.add(session_id)
                todo = []
            if todo:
                return session_id, index, todo[:BATCH]
            self.dirty.discard(session_id)
        return None

    def embed(self, batch: list[Any]) -> list[list[float]]:
        """On a thread of its own: the model needs no store (and locks itself)."""
        from agenvoy_cli.vectors import api as vectors

        emb = vectors.embedder(self.store)
        return getattr(emb, "inner", emb).embed_documents([t.text for t in batch])  # uncached

    def note_job(self) -> list[Any] | None:
        """Knowledge notes without vectors (a batch), caught up like messages; None when
        there are none (looked at again after the next write)."""
        from agenvoy_cli.notes.vector_sync import BATCH as NOTE_BATCH
        from agenvoy_cli.notes.vector_sync import pending

        if self.stopped or not self.notes_dirty:
            return None
        todo = pending(self.store)
        if not todo:
            self.notes_dirty = False
            return None
        return todo[:NOTE_BATCH]

    def embed_notes(self, batch: list[Any]) -> tuple[list[Any], str]:
        """On a thread of its own, as embed()."""
        from agenvoy_cli.notes.vector_sync import embed_notes

        return embed_notes(self.store, batch)

    def add_notes(self, batch: list[Any], made: tuple[list[Any], str]) -> None:
        from agenvoy_cli.notes.store import add_vectors

        with self.store.write_lock():
            add_vectors(self.store, list(zip(batch, made[0])), made[1])

    def ahead(self) -> tuple[str, str, dict[int, str]] | None:
        """(key, session, texts): messages whose text to embed ahead (server.
        attribution_vectors): attribution's first, then the ones the Relevance keeps
        (search/relevance.py Needs.kept) when it keeps any."""
        import time

        from agenvoy_cli.server.attribution_vectors import Ahead, ahead
        from agenvoy_cli.vectors import attribution

        if self.stopped or time.monotonic() < self.ahead_after:
            return None
        kept = self.kept_by_relevance()
        keys = [attribution.OWN_TEXT] + ([kept[0]] if kept else [])
        scanning = False
        for key in keys:
            state = self.made_ahead.setdefault(key, Ahead())
            job = ahead(self.store, self.wanted - self.failed, state, key)
            if job is not None:
                return key, *job
            scanning = scanning or state.scanning
            if scanning:
                break  # the first key's look is not finished: the next waits for it
        if not scanning:  # all made: look again later
            self.ahead_after = time.monotonic() + AHEAD_IDLE  # (each look reads recent)
        return None

    def kept_by_relevance(self) -> tuple[str, str] | None:
        """(metadata key, local model) of the text vectors the Relevance keeps beside the
        index for searches by the index's model, or None."""
        from agenvoy_cli.vectors.collection import embedder

        if self.relevance is None:
            return None
        try:
            needs = self.relevance.needs(str(embedder(self.store).model_id))
        except Exception:  # noqa: BLE001 - no embedder, a bad setting: nothing to make ahead
            return None
        return (needs.kept, needs.kept_by) if needs.kept and needs.kept_by else None

    def embed_ahead(self, key: str, texts: dict[int, str]) -> list[list[float]]:
        """On a thread of its own, as embed(): by the index's model, or by the model of the
        vectors the Relevance keeps."""
        from agenvoy_cli.vectors.attribution import OWN_TEXT
        from agenvoy_cli.vectors.collection import embedder, local_model

        kept = self.kept_by_relevance()
        if key != OWN_TEXT and kept is not None and key == kept[0]:
            return local_model(self.store, kept[1]).embed_documents(list(texts.values()))
        emb = embedder(self.store)
        return getattr(emb, "inner", emb).embed_documents(list(texts.values()))

    def keep_ahead(self, key: str, session_id: str, texts: dict[int, str],
                   vecs: list[Any]) -> None:
        from agenvoy_cli.server.attribution_vectors import keep

        keep(self.store, session_id, texts, vecs, key)

    def add(self, session_id: str, index: Any, batch: list[Any], vecs: list[Any]) -> None:
        from agenvoy_cli.search import catchup

        catchup.add(self.store, index, session_id, batch, vecs)
        if not batch:
            return
        first = min(t.msg.seq for t in batch)
        for state in self.made_ahead.values():  # new entries: look at them again
            state.done[session_id] = min(state.done.get(session_id, 0), first)


async def index_forever(thread: StoreThread, indexer: Indexer, wake: asyncio.Event,
                        idle: asyncio.Event) -> None:
    """Poll for other processes' writes; index what is new. Planning and adding are jobs on
    the store thread; embedding (the slow part) runs beside it, so tool calls never wait
    for the model. No new batch starts while a tool call runs (`idle` is clear): a search
    catches up itself, and the two would embed the same messages."""
    while True:
        pause = POLL
        try:
            if await _index_step(thread, indexer, idle):
                continue  # new messages first
        except Exception as exc:  # noqa: BLE001 - indexing must not take the server down
            if indexer.stopped:  # shutting down: the store thread refuses new jobs
                return
            said = f"{type(exc).__name__}: {exc}"
            if said != indexer.last_failure:  # once, not every poll
                indexer.last_failure = said
                traceback.print_exc(file=sys.stderr)
                sys.stderr.write(f"agenvoy: warning: background indexing failed ({said}); "
                                 "it is tried again, tool calls are not affected\n")
            pause = FAILED_PAUSE
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), pause)
        except asyncio.TimeoutError:
            pass


async def _index_step(thread: StoreThread, indexer: Indexer, idle: asyncio.Event) -> bool:
    """Index what is new, then one step of attribution texts; True when that step ran."""
    import time

    import anyio

    await thread.run(indexer.histories)
    if await thread.run(indexer.changed):
        await thread.run(indexer.look)
    while (job := await thread.run(indexer.next_job)) is not None:
        session_id, index, batch = job
        await idle.wait()
        await thread.run(indexer.import_heavy)  # before the embedding thread (no-op after)
        # abandoned on shutdown: it writes nothing, and EOF must not wait for the model
        vecs = await anyio.to_thread.run_sync(indexer.embed, batch, abandon_on_cancel=True)
        await thread.run(indexer.add, session_id, index, batch, vecs)
    while (notes := await thread.run(indexer.note_job)) is not None:
        await idle.wait()
        await thread.run(indexer.import_heavy)
        note_vectors = await anyio.to_thread.run_sync(indexer.embed_notes, notes,
                                                      abandon_on_cancel=True)
        await thread.run(indexer.add_notes, notes, note_vectors)
    # when all is indexed and the agent is not calling: attribution's texts, a step at a
    # time (opportunistic: back-to-back searches must not share the store thread with it)
    calm = idle.is_set() and time.monotonic() - indexer.last_call >= QUIET
    made = await thread.run(indexer.ahead) if calm else None
    if made is None:
        return False
    await idle.wait()
    await thread.run(indexer.import_heavy)
    key, session_id, texts = made
    vecs = await anyio.to_thread.run_sync(indexer.embed_ahead, key, texts,
                                          abandon_on_cancel=True)
    await thread.run(indexer.keep_ahead, key, session_id, texts, vecs)
    return True
