"""Searching RAG databases: keyword (every term, else any term; BM25; never imports
chromadb, creates no file), semantic (cosine similarity over the chunk vectors), hybrid
(any-term BM25 fused with the vector ranking by the reciprocal-rank fusion of
conversation search)."""

from __future__ import annotations

import os
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
    POOL,
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

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store


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

    def as_dict(self, rank: int = 1, score_kind: str = "bm25") -> dict[str, Any]:
        return {"rank": rank, "database": self.database, "path": self.path,
                "relpath": self.relpath, "format": self.format,
                "line_start": self.line_start, "line_end": self.line_end,
                "heading": self.heading, "score": round(self.score, 6),
                "score_kind": score_kind, "text": self.text}


@dataclass
class SearchResult:
    query: str
    mode: str
    databases: list[str]
    results: list[Hit] = field(default_factory=list)
    match: str | None = None  # keyword: all | any | none
    notes: list[str] = field(default_factory=list)
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
        return doc


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def match_every(query: str) -> tuple[str | None, list[str], int]:
    """MATCH requiring every term (any order) and every "quoted phrase" (in order), the
    one-character CJK terms (matched by instr(): a bigram index cannot find them), and
    how many terms that is (a quoted phrase is one)."""
    phrases: list[list[str]] = []
    singles: list[str] = []
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', query):
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


def _any_match(query: str) -> str | None:
    from agenvoy_cli.search.engine import content_query

    return fts.match_any(content_query(query))


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


def _pending_note(conn: sqlite3.Connection, dbs: Sequence[Database]) -> list[str]:
    notes = []
    for db in dbs:
        n = conn.execute("SELECT count(*) FROM rag_files WHERE db_id = ? AND state = "
                         "'pending'", (db.id,)).fetchone()[0]
        if n:
            notes.append(f"{n} file(s) of {db.name!r} are not fully indexed (an interrupted "
                         f"sync?): run `agenvoy rag sync {db.name}`")
    return notes


def _pending_chunks(conn: sqlite3.Connection, db_ids: Sequence[int]) -> set[int]:
    """Chunks of files an interrupted sync left 'pending': their vectors may be missing."""
    marks = ",".join("?" * len(db_ids))
    return {r[0] for r in conn.execute(
        "SELECT c.id FROM rag_chunks c JOIN rag_files f ON f.id = c.file_id "
        f"WHERE f.state = 'pending' AND f.db_id IN ({marks})", list(db_ids))}


def search(store: Store, names: Sequence[str] | None, query: str, mode: str = DEFAULT_MODE,
           *, limit: int = DEFAULT_LIMIT) -> SearchResult:
    """search_rag over the named databases (None: all of them)."""
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    query = " ".join(query.split())
    if not query:
        raise BadInput("the query is empty")
    for name in names or ():
        checked_name(name)
    with store.read_lock():
        conn = _readonly(store)
        if names is None:
            dbs = _all_databases(conn)
        else:
            dbs = [_require(conn, n, store.layout.home) for n in dict.fromkeys(names)]
        result = SearchResult(query, mode, [db.name for db in dbs])
        if conn is None or not dbs:
            return result
        ids = [db.id for db in dbs]
        if mode == "keyword":
            return _keyword(conn, ids, query, limit, result)
        kw: list[tuple[int, float]] = []
        if mode == "hybrid":
            kw = fts_ranking(conn, ids, _any_match(query), POOL)
            result.match = "any"
        result.notes.extend(_pending_note(conn, dbs))
        result.notes.extend(
            f"{db.name!r} has no vectors (indexed with --no-vectors): keyword results only; "
            f"embed it with `agenvoy rag sync {db.name} --vectors`"
            for db in dbs if not db.vectors)
        dbs = [db for db in dbs if db.vectors]
        if not dbs or not (store.layout.chroma.is_dir()
                           or os.environ.get("AGENVOY_CHROMA_URL")):
            result.results = _hits(conn, kw[:limit])  # nothing was ever embedded
            return result
        pending = _pending_chunks(conn, [db.id for db in dbs])
        result.unindexed_count = len(pending)
        if mode == "semantic" and pending:  # no vector yet: found by keyword meanwhile
            kw = [(c, s) for c, s in fts_ranking(conn, ids, _any_match(query), POOL)
                  if c in pending]
    from agenvoy_cli.vectors import index as vectors

    vector = vectors.embedder(store).embed_query(query)  # outside the lock
    with store.write_lock():
        vec = vector_ranking(store, dbs, vector, POOL if mode == "hybrid" else limit)
        if mode == "semantic" and not kw:
            ranked = vec[:limit]
            result.score_kind = "cosine"
        else:
            result.score_kind = "rrf"
            from agenvoy_cli.search.engine import fuse

            ranked = fuse(kw, vec)[:limit]
        conn = _readonly(store)
        assert conn is not None
        result.results = _hits(conn, ranked)
    return result


def _keyword(conn: sqlite3.Connection, ids: list[int], query: str, limit: int,
             result: SearchResult) -> SearchResult:
    match, singles, terms = match_every(query)
    if match is None and not singles:
        result.match = "none"
        return result
    ranked = fts_ranking(conn, ids, match, limit, singles)
    result.match = "all"
    if not ranked and terms > 1:
        any_match = _any_match(query)
        ranked = fts_ranking(conn, ids, any_match, limit)
        result.match = "any"
    result.results = _hits(conn, ranked)
    return result

