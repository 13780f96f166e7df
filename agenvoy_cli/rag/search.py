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
from agenvoy_cli.rag.records import (
    DEFAULT_LIMIT,
    DEFAULT_MODE,
    MODES,
    Database,
    _all_databases,
    _index,
    _mismatch,
    _readonly,
    _rebuild_hint,
    _relpath,
    _require,
    checked_name,
)
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.results import Note

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.pipeline import Found
    from agenvoy_cli.search.relevance import Relevance


@dataclass
class Hit:
    database: str
    path: str
    relpath: str
    format: str | None
    line_start: int
    line_end: int
    heading: str | None
    text: str
    score: float
    chunk_id: int
    matched_terms: list[str] = field(default_factory=list)  # the query terms it holds

    def as_dict(self, rank: int = 1, score_kind: str = "bm25") -> dict[str, Any]:
        return {"rank": rank, "database": self.database, "path": self.path,
                "relpath": self.relpath, "format": self.format,
                "line_start": self.line_start, "line_end": self.line_end,
                "heading": self.heading, "score": round(self.score, 6),
                "score_kind": score_kind, "text": self.text,
                "matched_terms": self.matched_terms}


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
                               "databases": self.databases}
        if self.match is not None:
            doc["match"] = self.match
        doc["unindexed_count"] = self.unindexed_count
        doc["results"] = [h.as_dict(i, self.score_kind)
                          for i, h in enumerate(self.results, 1)]
        doc["count"] = len(self.results)
        doc["notes"] = [n.as_dict() for n in self.notes]
        return doc

    def note(self, code: str, message: str) -> None:
        assert code in NOTE_CODES, code
        self.notes.append(Note(code, message))


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def match_every(query: str) -> tuple[str | None, list[str], int]:
    """MATCH requiring every term (any order) and every "quoted phrase" (in order), the
    one-character CJK terms (matched by instr(): a bigram index cannot find them), and
    how many terms that is (a quoted phrase is one)."""
    from agenvoy_cli.search.query import content_query

    phrases: list[list[str]] = []
    singles: list[str] = []
    parts = re.findall(r'"([^"]*)"|(\S+)', query)
    bare_words = " ".join(b for _, b in parts if b)
    kept = set(content_query(bare_words).split()) if bare_words else set()
    for quoted, bare in parts:
        if bare and bare not in kept:  # a stop-word (unless the query is only those)
            continue
        if quoted:
            toks = [t for word in quoted.split() for t in fts.term_tokens(word)]
        else:
            toks = fts.term_tokens(bare)
            if len(toks) == 1 and len(toks[0]) == 1 and fts._is_cjk(toks[0]):
                singles.append(toks[0])
                continue
        if toks:
            phrases.append(toks)
    match = " AND ".join(" + ".join(_quote(t) for t in p) for p in phrases) or None
    return match, singles, len(phrases) + len(singles)


def _in_dbs(db_ids: Sequence[int]) -> tuple[str, list[int]]:
    return f"f.db_id IN ({','.join('?' * len(db_ids))})", list(db_ids)


def db_filter(db_ids: Sequence[int]) -> str:
    """MATCH term for rag_chunks_fts's db_id column: one token per database."""
    return "db_id : (" + " OR ".join(_quote(str(i)) for i in db_ids) + ")"


def fts_ranking(conn: sqlite3.Connection, db_ids: Sequence[int], match: str | None, n: int,
                contains: Sequence[str] = ()) -> list[tuple[int, float]]:
    """(chunk id, -bm25) best first; every string of `contains` must be in the tokens."""
    if not db_ids or (match is None and not contains):
        return []
    where, args = _in_dbs(db_ids)
    if match is None:
        sql = ("SELECT c.id, 0.0 AS s FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
               f"WHERE {where}")
    else:
        # the databases are a column of the index (migration 011): the MATCH seeks to
        # their rows and weighs them 0 in BM25; FTS5 drives the join (CROSS JOIN)
        sql = ("SELECT c.id, bm25(rag_chunks_fts, 1.0, 0.0) AS s FROM rag_chunks_fts "
               "CROSS JOIN rag_chunks c ON c.id = rag_chunks_fts.rowid "
               "WHERE rag_chunks_fts MATCH ?")
        args = [f"{db_filter(db_ids)} AND tokens : ({match})"]
    for text in contains:
        sql += " AND instr(c.tokens, ?) > 0"
        args.append(text)
    sql += " ORDER BY s, c.id LIMIT ?"
    args.append(n)
    return [(cid, -score) for cid, score in conn.execute(sql, args)]


def vector_ranking(store: Store, dbs: Sequence[Database], vector: Sequence[float], n: int
                   ) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) over the databases' collections, best first. Hold the
    write lock (Chroma)."""
    ranked: list[tuple[int, float]] = []
    for db in dbs:
        index = _index(store, db, create=False)
        if index is None:
            continue
        try:
            hits = index.query(vector, n)
        except _mismatch() as exc:
            raise _rebuild_hint(db)(exc) from None
        ranked.extend((int(h.id), 1.0 - float(h.distance)) for h in hits)
    ranked.sort(key=lambda kv: -kv[1])
    return ranked[:n]


def _hits(conn: sqlite3.Connection, ranked: Sequence[tuple[int, float]]) -> list[Hit]:
    """The chunks of a ranking, in its order (ids whose chunk is gone are left out)."""
    ids = [cid for cid, _ in ranked]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = {r[0]: r for r in conn.execute(
        "SELECT c.id, d.name, f.path, f.source, f.format, c.line_start, c.line_end, "
        "c.heading, c.text FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
        f"JOIN rag_dbs d ON d.id = f.db_id WHERE c.id IN ({marks})", ids)}
    out = []
    for cid, score in ranked:
        row = rows.get(cid)
        if row is None:
            continue
        _, dbname, path, source, fmt, lo, hi, heading, text = row
        out.append(Hit(dbname, path, _relpath(path, source), fmt, lo, hi, heading, text,
                       score, cid))
    return out


def _pending_note(conn: sqlite3.Connection, dbs: Sequence[Database],
                  result: SearchResult | Found) -> None:
    for db in dbs:
        n = conn.execute("SELECT count(*) FROM rag_files WHERE db_id = ? AND state = "
                         "'pending'", (db.id,)).fetchone()[0]
        if n:
            result.note("pending", f"{n} file(s) of {db.name!r} are not fully indexed (an "
                        f"interrupted sync?): run `agenvoy rag sync {db.name}`")


def _pending_chunks(conn: sqlite3.Connection, db_ids: Sequence[int]) -> set[int]:
    """Chunks of files an interrupted sync left 'pending': their vectors may be missing."""
    marks = ",".join("?" * len(db_ids))
    return {r[0] for r in conn.execute(
        "SELECT c.id FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
        f"WHERE f.state = 'pending' AND f.db_id IN ({marks})", list(db_ids))}


def _databases(store: Store, conn: sqlite3.Connection | None, names: Sequence[str] | None
               ) -> list[Database]:
    if names is None:
        return _all_databases(conn)
    return [_require(conn, n, store.layout.home) for n in dict.fromkeys(names)]


def search(store: Store, names: Sequence[str] | None, query: str, mode: str = DEFAULT_MODE,
           *, limit: int = DEFAULT_LIMIT, match: str | None = None,
           relevance: Relevance | None = None) -> SearchResult:
    """search_rag over the named databases (None: all of them), by the retrieval pipeline
    (search/pipeline.py) over their chunks (rag/corpus.py); `match` ("all" | "any"):
    keyword mode's every term or any term (default: by the query's length); nothing by
    meaning when the relevance floor finds no chunk related (`relevance`: the holder's)."""
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
                            relevance=relevance)
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


def _embedded_text(hit: Hit) -> str:
    """The text a chunk's vector was made of (rag/source_sync.py `_embed_text`)."""
    head = f"{hit.relpath} · {hit.heading}" if hit.heading else hit.relpath
    return f"{head}\n{hit.text}"


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


