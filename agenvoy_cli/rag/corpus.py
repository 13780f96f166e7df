"""RAG chunks as a corpus of the retrieval pipeline (search/pipeline.py).

A unit is a chunk of the searched databases, keyed by its id; the full-text index holds its
tokens (the databases a column weighed 0); its vector was made of "relpath · heading" and
its text (rag/source_sync.py `_embed_text`). Keyword mode's every-term rule keeps "quoted
phrases" whole and finds a one-character CJK term by its text (rag/search.py
`match_every`). The chunks of files an interrupted sync left pending may have no vector:
they are found by keyword until the next sync (no catch-up at search time). A broken index
is raised with the rebuild command (it does not degrade). Fixed fusion weights; a chunk's
neighbours by id are the chunks around it in its file (search/fusion.py NEIGHBOUR). A
chunk's time (the time window) is its file's modification time as the last sync saw it:
when the document was written or changed, not when it was indexed.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from agenvoy_cli.search.corpus import HomeModel
from agenvoy_cli.search.fusion import FUSION_NEIGHBOUR

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.rag.records import Database
    from agenvoy_cli.search.corpus import Found
    from agenvoy_cli.search.fusion import Weights
    from agenvoy_cli.search.query import Query
    from agenvoy_cli.search.relevance import Relevance


class RagCorpus(HomeModel):
    """The chunks of some databases of one home, for one search."""

    unit = "chunk"
    degrades = False
    near_misses = True  # search/corpus.py `near_miss`
    unindexed_note = False
    neighbour = FUSION_NEIGHBOUR

    def __init__(self, store: Store, dbs: Sequence[Database]) -> None:
        self.store = store
        self.ids = [db.id for db in dbs]
        self.dbs = list(dbs)  # the databases with vectors (catch_up narrows them)
        self.pending: set[Hashable] = set()

    def _conn(self) -> sqlite3.Connection:
        from agenvoy_cli.rag.records import _readonly

        conn = _readonly(self.store)
        assert conn is not None
        return conn

    def term_count(self, query: Query) -> int:
        from agenvoy_cli.rag.chunks import match_every
        from agenvoy_cli.search.query import term_count

        match, singles, _ = match_every(query.text)
        if match is None and not singles:
            return 0
        phrases = len(re.findall(r'"[^"]*"', query.text))
        return phrases + term_count(re.sub(r'"[^"]*"', " ", query.text))

    def keyword(self, query: Query, n: int, every: bool) -> list[tuple[Hashable, float]]:
        from agenvoy_cli.home import fts
        from agenvoy_cli.rag.chunks import fts_ranking, match_every

        with self.store.read_lock():
            if every:
                match, singles, _ = match_every(query.text)
                return list(fts_ranking(self._conn(), self.ids, match, n, singles))
            return list(fts_ranking(self._conn(), self.ids, fts.match_any(query.content), n))

    def within(self, lo: int | None, hi: int | None) -> tuple[set[Hashable], int]:
        """The chunks of the files last modified (their mtime when synced) in [lo, hi)."""
        with self.store.read_lock():
            marks = ",".join("?" * len(self.ids))
            rows = self._conn().execute(
                "SELECT c.id, f.mtime_ns FROM rag_chunks c JOIN rag_files f ON f.id = "
                f"c.file_id WHERE f.db_id IN ({marks})", self.ids).fetchall()
        keep: set[Hashable] = {i for i, at in rows
                               if (lo is None or at >= lo) and (hi is None or at < hi)}
        return keep, len(rows)

    def catch_up(self, budget: float | None, found: Found) -> int | None:
        """No catch-up: the pending files' chunks wait for `rag sync` (noted); None when no
        searched database has vectors."""
        from agenvoy_cli.rag.chunks import _pending_chunks, _pending_note
        from agenvoy_cli.vectors.location import has_vectors

        with self.store.read_lock():
            conn = self._conn()
            _pending_note(conn, self.dbs, found)
            for db in self.dbs:
                if not db.vectors:
                    found.note("no_vectors", f"{db.name!r} has no vectors (indexed with "
                               "--no-vectors): keyword results only; embed it with "
                               f"`agenvoy rag sync {db.name} --vectors`")
            self.dbs = [db for db in self.dbs if db.vectors]
            if not self.dbs or not has_vectors(self.store):
                return None  # nothing was ever embedded
            self.pending = set(_pending_chunks(conn, [db.id for db in self.dbs]))
        return len(self.pending)

    def unavailable(self, exc: Exception, found: Found) -> None:  # pragma: no cover - raises
        raise exc

    def unembedded(self) -> set[Hashable]:
        return self.pending

    def vectors(self, vector: Sequence[float], n: int, found: Found
                ) -> list[tuple[Hashable, float]]:
        from agenvoy_cli.rag.chunks import vector_ranking

        with self.store.write_lock():
            return list(vector_ranking(self.store, self.dbs, vector, n))

    def embedded_texts(self, keys: Sequence[Hashable]) -> dict[Hashable, str]:
        from agenvoy_cli.rag.chunks import _embedded_text, _hits

        with self.store.read_lock():
            hits = _hits(self._conn(), [(k, 0.0) for k in keys])  # type: ignore[misc]
        return {h.chunk_id: _embedded_text(h) for h in hits}

    def stored_vectors(self, keys: Sequence[Hashable]) -> dict[Hashable, Sequence[float]]:
        """The chunks' stored vectors: a chunk's vector was made of exactly its
        `embedded_texts` by its database's (the index) model, and a changed file's chunks
        are new rows whose old vectors are deleted first (rag/commit.py), so the floor
        embeds none of them again."""
        from agenvoy_cli.rag.records import _index

        ids = [str(k) for k in keys]
        out: dict[Hashable, Sequence[float]] = {}
        with self.store.write_lock():  # Chroma needs the lock
            for db in self.dbs:
                index = _index(self.store, db, create=False)
                if index is not None:
                    out.update((int(i), v) for i, v in index.vectors(ids).items())
        return out

    def indexed_text(self, key: Hashable) -> str | None:
        from agenvoy_cli.rag.chunks import _hits

        with self.store.read_lock():
            hits = _hits(self._conn(), [(key, 0.0)])  # type: ignore[list-item]
        return hits[0].text if hits else None

    def weights(self, query: Query, kw: Sequence[tuple[Hashable, float]],
                vec: Sequence[tuple[Hashable, float]]) -> Weights:
        from agenvoy_cli.search.fusion import Weights

        return Weights()

    def relevance(self) -> Relevance:
        from agenvoy_cli.search.relevance import choose
        from agenvoy_cli.vectors.context import of

        return choose(self.store.settings, of(self.store).models)
