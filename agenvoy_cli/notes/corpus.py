"""The knowledge notes as a corpus of the retrieval pipeline (search/pipeline.py).

A unit is a note, keyed by its id; the full-text index holds its name and content (BM25,
the name weighted 2:1); its vectors are its passages' (notes/vector_sync.py), a note
ranking by its best passage, which the adapter remembers for the hit's snippet. A failing
model or index leaves keyword results (`degrades`). Hybrid's weights follow the query
(search/fusion.py `weights`: a query in another script than the notes leans on the
vectors); no neighbour smoothing (a note's id neighbours are unrelated notes). A note's
time (the time window) is when it last changed: written, edited or replaced (updated_at).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

from agenvoy_cli.home import fts
from agenvoy_cli.notes import store as note_store
from agenvoy_cli.notes.store import NOTES, Warn, one_line
from agenvoy_cli.search.corpus import HomeModel

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.corpus import Found
    from agenvoy_cli.search.fusion import Weights
    from agenvoy_cli.search.query import Query
    from agenvoy_cli.search.relevance import Relevance


def terms(query: Query) -> list[str]:
    """The query's content words that hold a searchable token."""
    return [t for t in query.content.split() if fts.term_tokens(t)]


def fts_ranking(conn: sqlite3.Connection, match: str | None, n: int) -> list[tuple[int, float]]:
    """(note id, -bm25) best first."""
    if match is None:
        return []
    return [(i, -s) for i, s in conn.execute(
        "SELECT rowid, bm25(notes_fts, 2.0, 1.0) AS s FROM notes_fts WHERE notes_fts MATCH ? "
        "ORDER BY s, rowid LIMIT ?", (match, n))]


def _vector_ranking(store: Store, vector: Sequence[float], n: int
                    ) -> list[tuple[int, float, int]]:
    """(note id, cosine, passage) best first, one per note. Hold the write lock."""
    from agenvoy_cli.vectors import api as vectors

    if not note_store.has_vector_dir(store) or not vectors.index_exists(store, NOTES):
        return []
    index = vectors.open_index(store, NOTES, create=False)
    best: dict[int, tuple[float, int]] = {}
    for hit in index.query(vector, n):
        note_id = note_store.note_of(hit.id)
        if note_id is None:
            continue
        sim = 1.0 - float(hit.distance)
        passage = int(hit.id.partition(":")[2])
        if note_id not in best or sim > best[note_id][0]:
            best[note_id] = (sim, passage)
    return sorted(((i, s, p) for i, (s, p) in best.items()), key=lambda t: -t[1])


class NotesCorpus(HomeModel):
    """The notes of one home, for one search."""

    unit = "note"
    degrades = True
    near_misses = True  # search/corpus.py `near_miss`
    unindexed_note = True
    neighbour = 0.0

    def __init__(self, store: Store, warn: Warn) -> None:
        self.store = store
        self.warn = warn
        self.passage: dict[int, int] = {}  # note id -> the passage its vector ranked by

    def _conn(self) -> sqlite3.Connection:
        conn = self.store.db_readonly()
        assert conn is not None
        return conn

    def term_count(self, query: Query) -> int:
        return len(terms(query))

    def keyword(self, query: Query, n: int, every: bool) -> list[tuple[Hashable, float]]:
        words = " ".join(terms(query))
        if not words:
            return []
        with self.store.read_lock():
            return list(fts_ranking(self._conn(), fts.match_all(words) if every
                                    else fts.match_any(words), n))

    def within(self, lo: int | None, hi: int | None) -> tuple[set[Hashable], int]:
        """The notes last changed (updated_at: written, edited or replaced) in [lo, hi)."""
        with self.store.read_lock():
            rows = self._conn().execute("SELECT id, updated_at FROM notes").fetchall()
        keep: set[Hashable] = {i for i, at in rows
                               if (lo is None or at >= lo) and (hi is None or at < hi)}
        return keep, len(rows)

    def catch_up(self, budget: float | None, found: Found) -> int | None:
        from agenvoy_cli.notes.vector_sync import catch_up

        return int(catch_up(self.store, budget, self.warn))

    def unembedded(self) -> set[Hashable]:
        with self.store.read_lock():
            return {n.id for n in note_store.fetch(self._conn(), "vector_model IS NULL")}

    def vectors(self, vector: Sequence[float], n: int, found: Found
                ) -> list[tuple[Hashable, float]]:
        with self.store.write_lock():  # Chroma needs the lock
            try:
                vec = _vector_ranking(self.store, vector, n)
            except Exception as exc:  # noqa: BLE001 - missing, stale or broken index
                self.warn(f"agenvoy: warning: the notes' vector index is unusable "
                          f"({one_line(exc)}); keyword matching only (`agenvoy doctor "
                          "--repair`)")
                found.note("no_vectors", "the notes' vector index is unusable: keyword "
                           "results only")
                return []
            alive = note_store.by_ids(self.store.db(), [i for i, _, _ in vec])
        self.passage = {i: p for i, _, p in vec if i in alive}  # a replaced note's: ignored
        return [(i, s) for i, s, _ in vec if i in alive]

    def embedded_texts(self, keys: Sequence[Hashable]) -> dict[Hashable, str]:
        from agenvoy_cli.notes.vector_sync import passages

        with self.store.read_lock():
            notes = note_store.by_ids(self._conn(), [int(k) for k in keys])  # type: ignore[call-overload]
        out: dict[Hashable, str] = {}
        for note_id, note in notes.items():
            texts = passages(note)
            at = self.passage.get(note_id, 0)
            out[note_id] = texts[at] if at < len(texts) else note.content
        return out

    def stored_vectors(self, keys: Sequence[Hashable]) -> dict[Hashable, Sequence[float]]:
        """The stored vectors of the passages the notes ranked by (`passage`): a note's
        content never changes under its id (a new content is a new row), so a note whose
        vectors were made by the index model holds exactly its `embedded_texts`' vector;
        the floor then embeds none of them again."""
        from agenvoy_cli.vectors import api as vectors

        model = self.embedder().model_id
        with self.store.read_lock():
            notes = note_store.by_ids(self._conn(), [int(k) for k in keys])  # type: ignore[call-overload]
        want = {note_store.vector_id(i, self.passage.get(i, 0)): i for i, n in notes.items()
                if n.vector_model == model and self.passage.get(i, 0) < n.vector_count}
        if not want:
            return {}
        with self.store.write_lock():  # Chroma needs the lock
            if not vectors.index_exists(self.store, NOTES):
                return {}
            got = vectors.open_index(self.store, NOTES, create=False).vectors(list(want))
        return {want[v]: vec for v, vec in got.items()}

    def indexed_text(self, key: Hashable) -> str | None:
        with self.store.read_lock():
            note = note_store.by_ids(self._conn(), [key]).get(key)  # type: ignore[list-item, call-overload]
        return None if note is None else note.name + " " + note.content

    def weights(self, query: Query, kw: Sequence[tuple[Hashable, float]],
                vec: Sequence[tuple[Hashable, float]]) -> Weights:
        from agenvoy_cli.search.fusion import coverage, weights

        with self.store.read_lock():
            conn = self._conn()
            top = note_store.by_ids(conn, [k for k, _ in vec[:5]])  # type: ignore[misc]
            best = note_store.by_ids(conn, [kw[0][0]]).get(kw[0][0])  # type: ignore[list-item, call-overload]
        memories = [top[k].content[:500] for k, _ in vec[:5] if k in top]
        words = terms(query)
        cov = coverage(fts.term_tokens(" ".join(words)),
                       fts.term_tokens(best.name + " " + best.content)) \
            if best is not None and words else None
        return weights(query, memories, cov)

    def relevance(self) -> Relevance:
        from agenvoy_cli.search.relevance import choose
        from agenvoy_cli.vectors.context import of

        return choose(self.store.settings, of(self.store).models)

