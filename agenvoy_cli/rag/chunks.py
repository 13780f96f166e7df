"""RAG chunks as the retrieval pipeline reads them (rag/corpus.py, rag/search.py): the
full-text ranking (every term with "quoted phrases" whole and one-character CJK terms by
their text, or any term; BM25), the vector ranking over the databases' collections, the
hits of a ranking, the text each chunk's vector was made of, and the pending files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.home import fts
from agenvoy_cli.rag.records import Database, _index, _mismatch, _rebuild_hint, _relpath

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.corpus import Found


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


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def _part_tokens(quoted: str, bare: str) -> list[str]:
    """A quoted phrase's tokens (in order), or a bare word's."""
    if quoted:
        return [t for word in quoted.split() for t in fts.term_tokens(word)]
    return fts.term_tokens(bare)


def _one_cjk(toks: list[str]) -> bool:
    return len(toks) == 1 and len(toks[0]) == 1 and fts._is_cjk(toks[0])


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
        toks = _part_tokens(quoted, bare)
        if not quoted and _one_cjk(toks):
            singles.append(toks[0])
        elif toks:
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
    where, ids = _in_dbs(db_ids)
    args: list[Any] = list(ids)
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


def _pending_note(conn: sqlite3.Connection, dbs: Sequence[Database], result: Found) -> None:
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


def _embedded_text(hit: Hit) -> str:
    """The text a chunk's vector was made of (rag/source_sync.py `_embed_text`)."""
    head = f"{hit.relpath} · {hit.heading}" if hit.heading else hit.relpath
    return f"{head}\n{hit.text}"
