"""In the server: attribution's message-text vectors made ahead, and query vectors kept.

A semantic search checks its top hits against their predecessors by the message text alone
(search/semantic.py, attribution): up to 10 texts of up to 600 characters, ~0.5 CPU-s with
the default model when none is kept. Those vectors do not depend on the query and are kept
in the message's own vector entry (vectors/attribution.py), so the server's background
indexer, when all is indexed and no tool call runs, embeds the texts of every searchable
message of the sessions it keeps indexed that lacks one, STEP at a time, and keeps them
there: a warm search then embeds its query and nothing else. The vectors of the same texts
the Relevance keeps (search/relevance.py Needs.kept: the floor's second model's) are made
ahead the same way once those are done, when it keeps any. `fill` does the same at
once (bench/mcp_http.py builds a warm home with it).

The query's vector is embedded before the search job reaches the store thread (in a thread
of its own: the model needs no store) and kept in an LRU of QUERIES, so that the store
thread does only the index and database work of a search.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agenvoy_cli.vectors.attribution import OWN_TEXT

QUERIES = 1024  # query vectors kept (exact doubles: ~3 KB each at 384-d)
STEP = 8  # texts per background step (~0.3 s with the default model: a search's query
# waits at most one step for the model)
CHUNK = 256  # message places looked at per step of a scan of the index (~10 ms)


class QueryCache:
    """The configured embedder, with an LRU of query vectors (documents go through)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._lru: OrderedDict[str, array] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[str, threading.Event] = {}  # queries being embedded now
        self.hits = self.misses = 0

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed_query(self, text: str) -> list[float]:
        """The query's vector: kept, or being embedded by another thread (a search whose
        call ran out of time while the server's embedding step still runs, asked again):
        then waited for, not embedded twice; a failed one is embedded here (the search
        reports what fails)."""
        while True:
            with self._lock:
                vec = self._lru.get(text)
                if vec is not None:
                    self._lru.move_to_end(text)
                    self.hits += 1
                    return vec.tolist()
                running = self._pending.get(text)
                if running is None:
                    running = self._pending[text] = threading.Event()
                    break
            running.wait()  # then kept, or it failed: this caller (or another) embeds it
        self.misses += 1
        try:
            out: list[float] = self.inner.embed_query(text)
            with self._lock:
                self._lru[text] = array("d", out)
                while len(self._lru) > QUERIES:
                    self._lru.popitem(last=False)
        finally:
            with self._lock:
                del self._pending[text]
            running.set()
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents(texts)  # type: ignore[no-any-return]


@dataclass
class Ahead:
    """Which searchable messages still lack a kept vector: per session, every place below
    `done` was looked at (places re-added later are embedded by the search that needs
    them); `todo` are places found lacking, not embedded yet."""

    done: dict[str, int] = field(default_factory=dict)
    todo: dict[str, list[int]] = field(default_factory=dict)
    scanning: bool = False  # the last look stopped after one CHUNK: look again soon


def _texts(store: Any, session_id: str, seqs: list[int]) -> dict[int, str]:
    from agenvoy_cli.search.results import rows_of
    from agenvoy_cli.search.semantic import ATTRIBUTION_CHARS

    rows = rows_of(store.db_readonly(), session_id, seqs)
    return {m.seq: m.body[:ATTRIBUTION_CHARS] for m in rows if m.body.strip()}


def _scan(store: Any, session_id: str, state: Ahead, key: str) -> list[int]:
    """The places of the next CHUNK of the session's searchable range that lack a kept
    vector (state.scanning: more of the range is left to look at)."""
    from agenvoy_cli.search.scope import scope_of
    from agenvoy_cli.vectors import attribution

    scope = scope_of(store, session_id, exclude_window=True)
    lo, hi = max(state.done.get(session_id, 0), scope.start), scope.vector_hi
    if lo >= hi:
        return []
    top = min(hi, lo + CHUNK)
    lacking = attribution.lacking(store, session_id, range(lo, top), key)
    state.done[session_id] = top
    state.scanning = state.scanning or top < hi
    return lacking


def ahead(store: Any, sessions: set[str], state: Ahead, key: str = OWN_TEXT
          ) -> tuple[str, dict[int, str]] | None:
    """(session, place -> text) of the next STEP messages to embed ahead for `key` (OWN_TEXT
    or a Relevance's key), or None when none was found (state.scanning: in this
    look; else every searchable message of the sessions has its vector). On the store
    thread; each call is short (one CHUNK looked at per session at most)."""
    state.scanning = False
    for session_id in sorted(sessions):
        try:
            with store.write_lock():
                todo = state.todo.get(session_id) or _scan(store, session_id, state, key)
                if not todo:
                    continue
                step, state.todo[session_id] = todo[:STEP], todo[STEP:]
                state.scanning = state.scanning or bool(todo[STEP:])
                texts = _texts(store, session_id, step)
        except Exception:  # noqa: BLE001 - a session gone or damaged: nothing to make ahead
            state.todo.pop(session_id, None)
            continue
        if texts:
            return session_id, texts
    return None


def keep(store: Any, session_id: str, texts: dict[int, str],
         vecs: list[list[float]], key: str = OWN_TEXT) -> int:
    """Keep the vectors made ahead for the messages whose text is still the one embedded.
    On the store thread. How many were kept."""
    from agenvoy_cli.vectors import attribution

    with store.write_lock():
        now = _texts(store, session_id, sorted(texts))
        return attribution.save(store, session_id, {
            seq: vec for (seq, text), vec in zip(texts.items(), vecs) if now.get(seq) == text},
            key)


def fill(store: Any, session_id: str, embed: Callable[[list[str]], list[list[float]]],
         key: str = OWN_TEXT) -> int:
    """Every searchable message of the session with its kept vector (`key`), now (in one
    thread: a tool, a bench). How many were made."""
    state, made = Ahead(), 0
    while (job := ahead(store, {session_id}, state, key)) is not None or state.scanning:
        if job is not None:
            made += keep(store, session_id, job[1], embed(list(job[1].values())), key)
    return made
