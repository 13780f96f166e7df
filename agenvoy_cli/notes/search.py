"""Searching the knowledge notes.

- keyword: FTS5 over the names and contents (CJK as bigrams: any 2+ character substring
  is found, as in messages), BM25 with the name weighted 2:1; a short keyword query (1-3
  terms, not a question) asks every term, else any term (conversation search's rule).
- semantic: cosine similarity of the query and the notes' passages (a note ranks by its
  best passage), after the notes without vectors are embedded (for at most the budget;
  the rest are found by keyword meanwhile).
- hybrid: the any-term keyword ranking fused with the vector ranking (search/fusion.py,
  with its weights from the query: a query in another script than the notes leans on the
  vectors).
- upstream (find_knowledge mode=search): keywords matched as case-insensitive substrings of
  name + "\\n" + content, ranked by how many match (ties: name order), names only.

Every hit carries a snippet: the passage that matched (semantic) or the text around the
first matched term, whitespace folded, at most SNIPPET characters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.contract import moment
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home import fts
from agenvoy_cli.notes import store as note_store
from agenvoy_cli.notes.names import DEFAULT_LIMIT, MAX_LIMIT
from agenvoy_cli.notes.store import NOTES, Note, Warn, one_line, quiet
from agenvoy_cli.search.results import Note as SearchNote

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.relevance import Relevance

MODES = ("hybrid", "keyword", "semantic")
DEFAULT_MODE = "hybrid"
SNIPPET = 240  # characters of a hit's snippet
POOL = 64  # candidates per ranking before fusion
MAX_QUERY = 4_000

# What a notes search's notes say (docs/json-vocabulary.md lists the codes).
NOTE_CODES = {
    "any_term": "a short query no note matched with every term: any term ranks",
    "nothing_searchable": "the query has no searchable word",
    "no_notes": "the home has no notes",
    "unindexed": "notes without a vector yet, found by keyword only",
    "no_vectors": "semantic matching unavailable: keyword results only",
    "not_related": "no note is related closely enough (the relevance floor)",
    "uncalibrated": "the embedding model has no calibration profile: no relevance floor "
                    "(models/profiles.py)",
}


@dataclass
class Hit:
    note: Note
    score: float
    snippet: str = ""
    matched_terms: list[str] = field(default_factory=list)
    passage: int | None = None  # the passage that matched (semantic), None: keyword

    def as_dict(self, rank: int, score_kind: str) -> dict[str, Any]:
        return {"rank": rank, "name": self.note.name, "score": round(self.score, 6),
                "score_kind": score_kind, "snippet": self.snippet,
                "matched_terms": self.matched_terms, "bytes": self.note.bytes,
                **moment("updated", self.note.updated_at)}


@dataclass
class SearchResult:
    query: str
    mode: str
    results: list[Hit] = field(default_factory=list)
    match: str | None = None  # keyword: all | any | none
    notes: list[SearchNote] = field(default_factory=list)
    unindexed_count: int | None = None  # notes without a vector (None: keyword)
    score_kind: str = "bm25"

    def note(self, code: str, message: str) -> None:
        assert code in NOTE_CODES, code
        self.notes.append(SearchNote(code, message))

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "mode": self.mode, "match": self.match,
                "unindexed_count": self.unindexed_count,
                "results": [h.as_dict(i, self.score_kind)
                            for i, h in enumerate(self.results, 1)],
                "count": len(self.results), "notes": [n.as_dict() for n in self.notes]}


# --------------------------------------------------------------------------- keyword


def _terms(query: str) -> list[str]:
    from agenvoy_cli.search.query import content_query

    return [t for t in content_query(query).split() if fts.term_tokens(t)]


def fts_ranking(conn: sqlite3.Connection, match: str | None, n: int) -> list[tuple[int, float]]:
    """(note id, -bm25) best first."""
    if match is None:
        return []
    return [(i, -s) for i, s in conn.execute(
        "SELECT rowid, bm25(notes_fts, 2.0, 1.0) AS s FROM notes_fts WHERE notes_fts MATCH ? "
        "ORDER BY s, rowid LIMIT ?", (match, n))]


def _matched(conn: sqlite3.Connection, terms: Sequence[str], ids: Sequence[int]
             ) -> dict[int, list[str]]:
    """Per note, the query terms it holds (by the FTS index: stemming as the ranking)."""
    out: dict[int, list[str]] = {i: [] for i in ids}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))
    for term in terms:
        expr = fts.match_all(term)
        if expr is None:
            continue
        for (rowid,) in conn.execute(f"SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? "
                                     f"AND rowid IN ({marks})", [expr, *ids]):
            out[rowid].append(term.strip("?!.,;:'\"()") or term)
    return out


def keyword_ranking(conn: sqlite3.Connection, query: str, n: int, want: str | None,
                    result: SearchResult) -> list[tuple[int, float]]:
    from agenvoy_cli.search.query import default_match

    terms = _terms(query)
    if not terms:
        result.match = "none"
        result.note("nothing_searchable", f"nothing searchable in: {query}")
        return []
    how = want or default_match(query, len(terms))
    ranked = fts_ranking(conn, fts.match_all(" ".join(terms)), n)
    result.match = "all"
    if how == "any" or (not ranked and want is None and len(terms) > 1):
        seen = {i for i, _ in ranked}
        ranked += [(i, s) for i, s in fts_ranking(conn, fts.match_any(" ".join(terms)), n)
                   if i not in seen]
        ranked = ranked[:n]
        result.match = "any"
        if how == "all" and ranked:
            result.note("any_term", "no note has every term of the query; showing notes "
                        "with any of them")
    return ranked


# --------------------------------------------------------------------------- snippets


def _clip(text: str, start: int, end: int) -> str:
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    return head + " ".join(text[start:end].split()) + tail


def snippet(text: str, terms: Sequence[str] = ()) -> str:
    """The text around the first term found in it (case-insensitively; a word's first five
    letters stand in for its stemmed forms), else its beginning; at most SNIPPET characters,
    cut at spaces."""
    from agenvoy_cli.search.query import fold

    low = fold(text) if len(fold(text)) == len(text) else text.lower()
    at = -1
    for term in terms:
        for probe in (fold(term), fold(term)[:5] if len(term) > 5 else ""):
            if probe and (hit := low.find(probe)) >= 0:
                at = hit if at < 0 else min(at, hit)
                break
    if at < 0 or len(text) <= SNIPPET:
        start = 0
    else:
        start = max(0, at - SNIPPET // 3)
        space = text.rfind(" ", max(0, start - 20), start + 1)
        start = space + 1 if space > 0 else start
    end = min(len(text), start + SNIPPET)
    if end < len(text):
        space = text.rfind(" ", start + SNIPPET // 2, end)
        end = space if space > 0 else end
    return _clip(text, start, end)


# --------------------------------------------------------------------------- upstream


def substring_search(notes: Sequence[Note], keywords: Sequence[str], limit: int
                     ) -> list[tuple[Note, int]]:
    """upstream knowledge.Search: each keyword (trimmed, lower-cased, empty ones dropped)
    a substring of lower(name + "\\n" + content); notes matching any, by how many match
    (stable: ties keep name order); `limit` outside 1..MAX_LIMIT is DEFAULT_LIMIT."""
    terms = [t for t in (k.strip().lower() for k in keywords) if t]
    if not terms:
        return []
    if limit <= 0 or limit > MAX_LIMIT:
        limit = DEFAULT_LIMIT
    out = []
    for note in notes:
        body = (note.name + "\n" + note.content).lower()
        matched = sum(1 for t in terms if t in body)
        if matched:
            out.append((note, matched))
    out.sort(key=lambda pair: -pair[1])
    return out[:limit]


# --------------------------------------------------------------------------- search


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


def _vector_hits(store: Store, vector: list[float] | None, emb: Any, query: str,
                 relevance: Relevance | None, warn: Warn, result: SearchResult
                 ) -> tuple[list[tuple[int, float, int]], bool]:
    """The vector ranking (note id, cosine, passage), best first, and whether the
    relevance floor found none of it related (then it is dropped: `floored`). The floor is
    the holder's Relevance (search/corpus.py), decided outside the lock."""
    if vector is None:
        return [], False
    with store.write_lock():  # Chroma needs the lock
        try:
            vec = _vector_ranking(store, vector, POOL)
        except Exception as exc:  # noqa: BLE001 - missing, stale or broken index
            warn(f"agenvoy: warning: the notes' vector index is unusable "
                 f"({one_line(exc)}); keyword matching only (`agenvoy doctor --repair`)")
            result.note("no_vectors", "the notes' vector index is unusable: keyword "
                        "results only")
            return [], False
        alive = note_store.by_ids(store.db(), [i for i, _, _ in vec])
    vec = [v for v in vec if v[0] in alive]  # vectors of a replaced note: ignored
    from agenvoy_cli.notes.vector_sync import passages
    from agenvoy_cli.search import corpus
    from agenvoy_cli.search.query import Query

    units = []
    for note_id, sim, passage in vec:
        texts = passages(alive[note_id])
        units.append(corpus.Unit(note_id, sim, texts[passage] if passage < len(texts)
                                 else alive[note_id].content))
    decision = corpus.decide(relevance or default_relevance(store), Query.of(query), units,
                             emb, vector)
    if vec and not decision.related:
        result.note("not_related", f"no note is related closely enough to: {query}")
        return [], True
    return vec, False


def default_relevance(store: Store) -> Relevance:
    """The home's Relevance (search/relevance.py choose), the store holder's models."""
    from agenvoy_cli.search.relevance import choose
    from agenvoy_cli.vectors.context import of

    return choose(store.settings, of(store).models)


def search_notes(store: Store, query: str, mode: str = DEFAULT_MODE, *, limit: int = DEFAULT_LIMIT,
           match: str | None = None, budget: float | None = None,
           warn: Warn = quiet, relevance: Relevance | None = None) -> SearchResult:
    """Notes related to a query, best first (keyword, semantic or hybrid); nothing by
    meaning when the relevance floor finds nothing related (`relevance`: the holder's)."""
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if match is not None and match not in ("all", "any"):
        raise BadInput("match is 'all' or 'any'")
    query = " ".join((query or "")[:MAX_QUERY].split())
    if not query:
        raise BadInput("the query is empty")
    result = SearchResult(query, mode)
    conn = store.db_readonly()
    if conn is None or not note_store.count(conn):
        result.note("no_notes", "there are no notes (add one with `agenvoy notes add`)")
        if mode == "keyword":
            result.match = "none" if not _terms(query) else "all"
        return result
    terms = _terms(query)
    if mode == "keyword":
        with store.read_lock():
            conn = store.db_readonly()
            assert conn is not None
            by_words = keyword_ranking(conn, query, limit, match, result)
            result.results = _hits(conn, [(i, s, None) for i, s in by_words], terms)
        return result
    result.unindexed_count = 0
    vector: list[float] | None = None
    emb: Any = None
    try:
        from agenvoy_cli.notes.vector_sync import catch_up
        from agenvoy_cli.vectors import api as vectors

        result.unindexed_count = catch_up(store, budget, warn)

        emb = vectors.embedder(store)
        vector = emb.embed_query(query)  # outside the lock
        _note_uncalibrated(result, emb.model_id)
    except Exception as exc:  # noqa: BLE001 - a search never fails because of vectors
        warn(f"agenvoy: warning: semantic matching unavailable ({one_line(exc)}); "
             "keyword matching only")
        result.note("no_vectors", f"semantic matching unavailable ({one_line(exc)}): "
                    "keyword results only")
    if result.unindexed_count:
        result.note("unindexed", f"{result.unindexed_count} note(s) have no vector yet: "
                    "found by keyword only")
    vec, floored = _vector_hits(store, vector, emb, query, relevance, warn, result)
    with store.read_lock():
        conn = store.db_readonly()
        assert conn is not None
        unembedded = {n.id for n in note_store.fetch(conn, "vector_model IS NULL")}
        kw: list[tuple[int, float]] = []
        if mode == "hybrid" or unembedded or vector is None:
            from agenvoy_cli.search.query import content_query

            expr = fts.match_any(content_query(query)) if terms else None
            kw = fts_ranking(conn, expr, POOL)
            if mode == "semantic" and vector is not None:
                kw = [(i, s) for i, s in kw if i in unembedded]  # not embedded yet
            result.match = "any"
        if floored:  # nothing related by meaning: keyword matches only when they hold the query
            kw = _not_incidental(conn, query, terms, kw)
        alive = note_store.by_ids(conn, [i for i, _, _ in vec])
        passage = {i: p for i, _, p in vec}
        order: list[tuple[int, float, int | None]]
        if not kw:
            order = [(i, s, p) for i, s, p in vec[:limit]]
            result.score_kind = "cosine"
        elif not vec:
            order = [(i, s, None) for i, s in kw[:limit]]
            result.score_kind = "bm25"
        else:
            from agenvoy_cli.search.fusion import Ranking, coverage, fuse, weights
            from agenvoy_cli.search.query import Query

            memories = [alive[i].content[:500] for i, _, _ in vec[:5]]
            best_kw = note_store.by_ids(conn, [kw[0][0]]).get(kw[0][0])
            cov = coverage(fts.term_tokens(" ".join(terms)),
                           fts.term_tokens(best_kw.name + " " + best_kw.content)) \
                if best_kw and terms else None
            w = weights(Query.of(query), memories, cov)
            fused = fuse([Ranking("keyword", kw, w.keyword),
                          Ranking("vector", [(i, s) for i, s, _ in vec], w.vector)],
                         neighbour=0.0)
            order = [(i, s, passage.get(i)) for i, s in fused[:limit]]
            result.score_kind = "rrf"
        result.results = _hits(conn, order, terms)
    return result


def _not_incidental(conn: sqlite3.Connection, query: str, terms: Sequence[str],
                    kw: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The keyword ranking, or nothing when its best match holds only a small share of
    the query's words (search/fusion.py `incidental`, message search's rule)."""
    from agenvoy_cli.search.fusion import coverage, incidental
    from agenvoy_cli.search.query import Query

    if not kw or not terms:
        return []
    best = note_store.by_ids(conn, [kw[0][0]]).get(kw[0][0])
    if best is None:
        return []
    cov = coverage(fts.term_tokens(" ".join(terms)),
                   fts.term_tokens(best.name + " " + best.content))
    return [] if incidental(Query.of(query), cov) else kw


def _note_uncalibrated(result: SearchResult, model_id: str) -> None:
    from agenvoy_cli.models.profiles import uncalibrated

    why = uncalibrated(model_id)
    if why is not None:
        result.note("uncalibrated", why)


def _hits(conn: sqlite3.Connection, ranked: Sequence[tuple[int, float, int | None]],
          terms: Sequence[str]) -> list[Hit]:
    notes = note_store.by_ids(conn, [i for i, _, _ in ranked])
    matched = _matched(conn, terms, [i for i in notes])
    out = []
    for note_id, score, passage in ranked:
        note = notes.get(note_id)
        if note is None:
            continue
        held = matched.get(note_id, [])
        if passage is not None and not held:
            from agenvoy_cli.notes.vector_sync import passages

            texts = passages(note)
            text = texts[passage].partition("\n")[2] if passage < len(texts) else note.content
            snip = snippet(text)
        else:
            snip = snippet(note.content, held)
        out.append(Hit(note, score, snip, held, passage))
    return out
