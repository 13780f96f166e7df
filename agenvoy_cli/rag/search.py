"""Searching RAG databases: keyword (a short query every term, else any term; a long one
any term; each hit with its matched_terms; BM25; never imports
chromadb, creates no file), semantic (cosine similarity over the chunk vectors), hybrid
(any-term BM25 fused with the vector ranking by the reciprocal-rank fusion of
conversation search)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home import fts
from agenvoy_cli.rag.chunks import (  # noqa: F401 - fts_ranking, match_every: rag search's
    Hit,
    _hits,
    _quote,
    fts_ranking,
    match_every,
)
from agenvoy_cli.rag.records import (
    DEFAULT_LIMIT,
    DEFAULT_MODE,
    MODES,
    Database,
    _all_databases,
    _readonly,
    _require,
    checked_name,
)
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.results import Note

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.relevance import Relevance


# What a RAG search's notes say (docs/json-vocabulary.md lists the codes; the text output
# prints the same messages). MCP tool calls add `warning` (server/handlers.call).
NOTE_CODES = {
    "any_term": "a short query no chunk matched with every term: any term ranks",
    "nothing_searchable": "the query has no searchable word",
    "pending": "files an interrupted sync left not fully indexed",
    "no_vectors": "a database kept without vectors: keyword results only",
    "not_related": "no chunk is related closely enough (the relevance floor)",
    "uncalibrated": "the embedding model has no calibration profile: no relevance floor "
                    "(models/profiles.py)",
}


@dataclass
class SearchResult:
    query: str
    mode: str
    databases: list[str]
    results: list[Hit] = field(default_factory=list)
    match: str | None = None  # keyword: all | any | none
    notes: list[Note] = field(default_factory=list)
    unindexed_count: int | None = None  # chunks without a vector (pending files); None: keyword
    score_kind: str = "bm25"  # bm25 (keyword), cosine (semantic), rrf (hybrid, fused)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"query": self.query, "mode": self.mode,
                               "databases": self.databases, "match": self.match}
        doc["unindexed_count"] = self.unindexed_count
        doc["results"] = [h.as_dict(i, self.score_kind)
                          for i, h in enumerate(self.results, 1)]
        doc["count"] = len(self.results)
        doc["notes"] = [n.as_dict() for n in self.notes]
        return doc

    def note(self, code: str, message: str) -> None:
        assert code in NOTE_CODES, code
        self.notes.append(Note(code, message))


def _databases(store: Store, conn: sqlite3.Connection | None, names: Sequence[str] | None
               ) -> list[Database]:
    if names is None:
        return _all_databases(conn)
    return [_require(conn, n, store.layout.home) for n in dict.fromkeys(names)]


def search(store: Store, names: Sequence[str] | None, query: str, mode: str = DEFAULT_MODE,
           *, limit: int = DEFAULT_LIMIT, match: str | None = None,
           relevance: Relevance | None = None,
           window: tuple[int | None, int | None] = (None, None)) -> SearchResult:
    """search_rag over the named databases (None: all of them), by the retrieval pipeline
    (search/pipeline.py) over their chunks (rag/corpus.py); `match` ("all" | "any"):
    keyword mode's every term or any term (default: by the query's length); nothing by
    meaning when the relevance floor finds no chunk related (`relevance`: the holder's);
    `window`: only the chunks of files last modified in [lo, hi) (UTC ns)."""
    from agenvoy_cli.rag.corpus import RagCorpus
    from agenvoy_cli.search import pipeline

    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    text = " ".join(query.split())
    if not text:
        raise BadInput("the query is empty")
    for name in names or ():
        checked_name(name)
    with store.read_lock():
        conn = _readonly(store)
        dbs = _databases(store, conn, names)
    result = SearchResult(text, mode, [db.name for db in dbs])
    if conn is None or not dbs:
        return result
    parsed = Query.of(text)
    found = pipeline.search(RagCorpus(store, dbs), parsed, mode, limit=limit, match=match,
                            relevance=relevance, window=window)
    result.match, result.score_kind = found.match, found.score_kind
    result.unindexed_count = found.unindexed_count
    for code, message in found.notes:
        result.note(code, message)
    with store.read_lock():
        conn = _readonly(store)
        assert conn is not None
        result.results = _hits(conn, found.ranked)  # type: ignore[arg-type]
        _matched_terms(conn, parsed, result.results)
    return result


def query_terms(query: str) -> list[tuple[str, str | None]]:
    """The query's terms as a hit lists them, each with its MATCH phrase (None: matched
    by its text, CJK): "quoted phrases" whole, bare words without stop-words."""
    from agenvoy_cli.search.query import content_query

    out: list[tuple[str, str | None]] = []
    bare = " ".join(b for _, b in re.findall(r'"([^"]*)"|(\S+)', query) if b)
    for quoted in re.findall(r'"([^"]*)"', query):
        toks = [t for word in quoted.split() for t in fts.term_tokens(word)]
        if toks:
            out.append((quoted, None if fts.has_cjk(quoted) else " + ".join(map(_quote, toks))))
    for word in content_query(bare).split() if bare else []:
        toks = fts.term_tokens(word)
        if toks:
            shown = word.strip("?!.,;:'\"()") or word
            out.append((shown, None if fts.has_cjk(word) else " + ".join(map(_quote, toks))))
    return out


def _matched_terms(conn: sqlite3.Connection, query: Query, hits: list[Hit]) -> None:
    """Each hit's matched_terms: by the FTS index (stemming as the ranking), CJK terms by
    the chunk's text."""
    from agenvoy_cli.search.query import fold

    if not hits:
        return
    ids = [h.chunk_id for h in hits]
    marks = ",".join("?" * len(ids))
    found: dict[str, set[int]] = {}
    terms = query_terms(query.text)
    for term, phrase in terms:
        if phrase is not None:
            found[term] = {r[0] for r in conn.execute(
                f"SELECT rowid FROM rag_chunks_fts WHERE rag_chunks_fts MATCH ? "
                f"AND rowid IN ({marks})", [f"tokens : ({phrase})", *ids])}
    for hit in hits:
        text = fold(hit.text)
        hit.matched_terms = [t for t, p in terms
                             if (hit.chunk_id in found[t] if p is not None
                                 else "".join(fold(t).split()) in "".join(text.split()))]


