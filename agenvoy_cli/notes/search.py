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
from agenvoy_cli.notes.store import Note, Warn, quiet
from agenvoy_cli.search.results import Note as SearchNote

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.relevance import Relevance

MODES = ("hybrid", "keyword", "semantic")
DEFAULT_MODE = "hybrid"
SNIPPET = 240  # characters of a hit's snippet
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


def _checked(query: str, mode: str, limit: int, match: str | None) -> str:
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if match is not None and match not in ("all", "any"):
        raise BadInput("match is 'all' or 'any'")
    query = " ".join((query or "")[:MAX_QUERY].split())
    if not query:
        raise BadInput("the query is empty")
    return query


def search_notes(store: Store, query: str, mode: str = DEFAULT_MODE, *, limit: int = DEFAULT_LIMIT,
           match: str | None = None, budget: float | None = None,
           warn: Warn = quiet, relevance: Relevance | None = None,
           window: tuple[int | None, int | None] = (None, None)) -> SearchResult:
    """Notes related to a query, best first (keyword, semantic or hybrid: the retrieval
    pipeline, search/pipeline.py, over the notes' corpus, notes/corpus.py); nothing by
    meaning when the relevance floor finds nothing related (`relevance`: the holder's);
    `window`: only the notes last changed in [lo, hi) (UTC ns)."""
    from agenvoy_cli.notes.corpus import NotesCorpus
    from agenvoy_cli.search import pipeline
    from agenvoy_cli.search.query import Query

    query = _checked(query, mode, limit, match)
    result = SearchResult(query, mode)
    conn = store.db_readonly()
    if conn is None or not note_store.count(conn):
        result.note("no_notes", "there are no notes (add one with `agenvoy notes add`)")
        if mode == "keyword":
            result.match = "none" if not _terms(query) else "all"
        return result
    corpus = NotesCorpus(store, warn)
    found = pipeline.search(corpus, Query.of(query), mode, limit=limit, match=match,
                            budget=budget, relevance=relevance, window=window)
    result.match, result.score_kind = found.match, found.score_kind
    result.unindexed_count = found.unindexed_count
    for code, message in found.notes:
        result.note(code, message)
    with store.read_lock():
        conn = store.db_readonly()
        assert conn is not None
        ranked = [(int(i), s, corpus.passage.get(int(i)))  # type: ignore[call-overload]
                  for i, s in found.ranked]
        result.results = _hits(conn, ranked, _terms(query))
    return result


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
