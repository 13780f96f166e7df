"""In the server: the vectors of messages' own texts, kept between searches and made ahead.

A semantic search checks its top hits against their predecessors by the message text alone
(search/semantic.py, attribution): up to 10 texts of up to 600 characters embedded per
search, ~0.6 s with the default model, most of a warm search. Those vectors do not depend
on the query, so the server keeps them (an LRU of SIZE vectors), and its background indexer
embeds the texts of the newest WARM_MAX messages of the sessions it keeps indexed when it
has nothing else to do, so that attribution finds them ready. Only small calls are cached
(attribution's, and a search's first catch-up batch); the indexer's document batches go to
the model directly.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from typing import Any

SIZE = 4096  # vectors kept (exact doubles: ~3 KB each at 384-d)
SMALL = 10  # calls with at most this many texts are cached (attribution: 2 x 5)
WARM_MAX = 500  # newest messages per session whose texts are embedded ahead
WARM_BATCH = 2  # texts per background step (a search's query waits at most one step)


class CachingEmbedder:
    """The configured embedder, with an LRU of document vectors for small calls."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._lru: OrderedDict[str, array] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)  # type: ignore[no-any-return]

    def _keep(self, texts: list[str], vecs: list[list[float]]) -> None:
        with self._lock:
            for text, vec in zip(texts, vecs):
                self._lru[text] = array("d", vec)
                self._lru.move_to_end(text)
            while len(self._lru) > SIZE:
                self._lru.popitem(last=False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) > SMALL:
            return self.inner.embed_documents(texts)  # type: ignore[no-any-return]
        have: dict[str, list[float]] = {}
        with self._lock:
            for text in texts:
                vec = self._lru.get(text)
                if vec is not None:
                    self._lru.move_to_end(text)
                    have[text] = vec.tolist()
        missing = [t for t in dict.fromkeys(texts) if t not in have]
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            vecs = self.inner.embed_documents(missing)
            self._keep(missing, vecs)
            have.update(zip(missing, vecs))
        return [have[t] for t in texts]

    def lacking(self, texts: list[str]) -> list[str]:
        with self._lock:
            return [t for t in texts if t not in self._lru]

    def warm(self, texts: list[str]) -> None:
        """Embed texts ahead (on the indexer's embedding thread)."""
        if texts:
            self._keep(texts, self.inner.embed_documents(texts))


def ahead(store: Any, cache: CachingEmbedder, sessions: set[str]) -> list[str]:
    """The next texts to embed ahead: the newest messages of the sessions, outside the
    context window (the part a semantic search looks at), that the cache lacks. On the
    store thread."""
    from agenvoy_cli.search.semantic import ATTRIBUTION_CHARS

    window = store.settings.max_history_messages
    for session_id in sorted(sessions):
        try:
            with store.read_lock():
                recent = store.recent(session_id)
        except Exception:  # noqa: BLE001 - a session gone or damaged: nothing to warm
            continue
        texts = [m.body[:ATTRIBUTION_CHARS] for m in reversed(recent[:-window] if window
                                                               else recent)][:WARM_MAX]
        todo = cache.lacking([t for t in texts if t.strip()])
        if todo:
            return todo[:WARM_BATCH]
    return []
