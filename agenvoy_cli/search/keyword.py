"""Keyword search: one BM25 ranking over the whole session from our FTS5 index.

``messages_fts`` indexes every archived message (CJK runs as bigrams, the rest through
unicode61 + porter: home/fts.py), so stemming and Chinese substrings work the same for the
archive and for the messages still in history.json; each hit is labelled by where it is.
A short keyword query (at most SHORT_QUERY_TERMS terms after stop-words; a Chinese run counts
one term per three characters; not phrased as a question) returns only messages holding every
term, unless no message does: then, as for longer or question-phrased queries, messages
holding any term rank (BM25 over the content tokens, every-term matches first) and ``match``
says "any". Each hit carries the query terms it holds (matched_terms). The session is a
column of the index (migration 009): MATCH ``session : "<hex>" AND tokens : (...)`` seeks
the doclists to the session's rows, so the cost follows the session's own matches, not the
home's. The query's rules (stop-words, every term or any) are search/query.py's. Never
imports chromadb, never creates a file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.home import fts
from agenvoy_cli.search.query import CJK_STOP_BIGRAMS, Query, fold
from agenvoy_cli.search.results import rows_of
from agenvoy_cli.search.timewindow import TimeWindow

if TYPE_CHECKING:
    import sqlite3

# BM25 ranks the newest RANK_WINDOW matches of a query inside the session: exact for any
# term in fewer messages, and a bounded cost for a term found in nearly all of a million.
RANK_WINDOW = 5_000
LONG_QUERY_TERMS = 8  # more terms than this: no every-term pass even in an any ranking


def any_term_match(query: Query) -> str | None:
    """MATCH for any content token of the query: stopwords and Chinese function bigrams
    dropped (unless nothing would be left)."""
    tokens = sorted(query.tokens)
    kept = [t for t in tokens if t not in CJK_STOP_BIGRAMS] or tokens
    return " OR ".join(fts.quote(t) for t in kept) if kept else None


def split_single_cjk(query: str) -> tuple[str, list[str]]:
    """(the rest of the query, its one-character CJK terms). Bigrams find any CJK substring
    of 2+ characters; a single character at the end of a run is inside no bigram's prefix,
    so such terms are matched by instr() on the indexed text (header already stripped)."""
    rest, singles = [], []
    for term in query.split():
        toks = fts.term_tokens(term)
        if len(toks) == 1 and len(toks[0]) == 1 and fts.is_cjk(toks[0]):
            singles.append(toks[0])
        else:
            rest.append(term)
    return " ".join(rest), singles


def _fts_scan(session_id: str, match: str) -> tuple[str, list[Any]]:
    """The FTS5 scan of one session's matches: FTS5 drives the join (CROSS JOIN keeps that
    order) and seeks its doclists to the session's rows; the session column weighs 0 in
    BM25. (Store.db_readonly upgrades an older schema before anything reads it.)"""
    return ("SELECT m.seq AS seq, m.send_at AS send_at, bm25(messages_fts, 1.0, 0.0) AS s "
            "FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid "
            "WHERE messages_fts MATCH ? AND m.session_id = ?",
            [f"{fts.session_filter(session_id)} AND tokens : ({match})", session_id])


def fts_ranking(conn: sqlite3.Connection, session_id: str, match: str | None, n: int, *,
                hi_seq: int | None = None, window: TimeWindow | None = None,
                contains: Sequence[str] = ()) -> list[tuple[int, float]]:
    """(seq, score) by BM25 (higher is better), then recency, from our FTS5 index; every
    string of `contains` must also be in the indexed text (without match: recency only)."""
    if n <= 0:
        return []
    if match is None:
        if not contains:
            return []
        sql = "SELECT m.seq, 0.0 AS s FROM messages m WHERE m.session_id = ?"
        args: list[Any] = [session_id]
    else:  # the session's newest RANK_WINDOW matches at most
        sql, args = _fts_scan(session_id, match)
    for text in contains:
        sql += " AND instr(m.tokens, ?) > 0"
        args.append(text)
    if hi_seq is not None:
        sql += " AND m.seq < ?"
        args.append(hi_seq)
    if window is not None and window.lo is not None:
        sql += " AND m.send_at >= ?"
        args.append(window.lo)
    if window is not None and window.hi is not None:
        sql += " AND m.send_at < ?"
        args.append(window.hi)
    if match is None:
        sql += " ORDER BY m.seq DESC LIMIT ?"
        args.append(n)
    else:
        sql = (f"SELECT seq, s FROM ({sql} ORDER BY messages_fts.rowid DESC LIMIT ?) "
               "ORDER BY s, send_at DESC, seq DESC LIMIT ?")
        args += [RANK_WINDOW, n]
    return [(seq, -score) for seq, score in conn.execute(sql, args)]


def _term_pairs(query: str) -> list[tuple[str, re.Pattern[str]]]:
    pairs = []
    for term in query.split():
        pieces = [fold(p) for p in fts.pieces(term)]
        if pieces:
            pairs.append((term, re.compile(r"[\W_]*".join(re.escape(p) for p in pieces))))
    return pairs


def _exact_cjk(conn: sqlite3.Connection, session_id: str, query: str,
               ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Drop bigram false positives: "ABC" is the phrase "AB" "BC", which also matches
    "AB，BC" (punctuation is no token). Terms with CJK must be real substrings."""
    cjk = [p for t, p in _term_pairs(query) if fts.has_cjk(t)]
    if not cjk or not ranked:
        return ranked
    bodies = {m.seq: fold(m.body) for m in rows_of(conn, session_id, [s for s, _ in ranked])}
    return [(seq, sc) for seq, sc in ranked if all(p.search(bodies.get(seq, "")) for p in cjk)]


def keyword_ranking(conn: sqlite3.Connection, session_id: str, query: Query, n: int, *,
                    hi_seq: int | None = None, window: TimeWindow | None = None,
                    match: str | None = None) -> tuple[list[tuple[int, float]], str]:
    """(ranking, match). match "all" (default for a short query): only messages with every
    content term (BM25); "any" (default for a long one): those first, then messages with
    some of them (BM25 over the content tokens). The match returned is true of every hit;
    "none" when the query has nothing searchable. (The fallback of a short query with no
    every-term hit is the caller's: search.engine.keyword_search.)"""
    if not query.terms:
        return [], "none"
    want = match or query.default_match
    words = query.content
    every: list[tuple[int, float]] = []
    if want == "all" or len(query.terms) <= LONG_QUERY_TERMS:
        rest, singles = split_single_cjk(words)
        every = fts_ranking(conn, session_id, fts.match_all(rest), n + 10, hi_seq=hi_seq,
                            window=window, contains=singles)
        every = _exact_cjk(conn, session_id, words, every)[:n]
    if want == "all" or len(every) >= n:
        return every, want
    some = fts_ranking(conn, session_id, any_term_match(query), n, hi_seq=hi_seq,
                       window=window)
    seen = {seq for seq, _ in every}
    merged = every + [(seq, sc) for seq, sc in some if seq not in seen]
    return merged[:n], "any"


def _held_runs(term: str, body: str) -> list[str]:
    """The longest pieces (2+ characters) of a CJK term that the folded body holds, left
    to right: what an any-term hit shares with a Chinese phrase it does not hold whole."""
    out, i = [], 0
    while i < len(term) - 1:
        j = next((j for j in range(len(term), i + 1, -1) if term[i:j] in body), None)
        if j is None:
            i += 1
        else:
            out.append(term[i:j])
            i = j
    return out


def _held_by_fts(conn: sqlite3.Connection | None, session_id: str, terms: Sequence[str],
                 indexed: Sequence[int]) -> dict[str, set[int]]:
    """Per non-CJK term, which of the archived messages at `indexed` the FTS index says hold
    it (stemming as the ranking does)."""
    if conn is None or not indexed:
        return {}
    # driven by the few hits' rows (FTS5 then checks one rowid each), not by the term's
    # doclist: a common word's is most of the session (~20 ms per term at 10k messages)
    marks = ",".join("?" * len(indexed))
    sql = ("SELECT m.seq FROM messages m CROSS JOIN messages_fts ON messages_fts.rowid "
           f"= m.id WHERE m.session_id = ? AND m.seq IN ({marks}) AND messages_fts MATCH ?")
    by_fts: dict[str, set[int]] = {}
    for term in terms:
        if not fts.has_cjk(term):
            match = _fts_scan(session_id, fts.match_all(term) or '""')[1][0]
            by_fts[term] = {r[0] for r in conn.execute(sql, [session_id, *indexed, match])}
    return by_fts


def matched_terms(conn: sqlite3.Connection | None, session_id: str, query: Query,
                  bodies: dict[int, str], archived: set[int]) -> dict[int, list[str]]:
    """For each message (seq -> text), the content terms of the query it holds, in query
    order: by the FTS index for archived messages (stemming as the ranking does), by its
    text for CJK terms and for messages SQLite lacks."""
    terms = [t for t in dict.fromkeys(query.content.split()) if fts.term_tokens(t)]
    pairs = dict(_term_pairs(" ".join(terms)))
    indexed = sorted(s for s in bodies if s in archived)
    by_fts = _held_by_fts(conn, session_id, terms, indexed)
    shown = {t: t.strip("?!.,;:'\"()") or t for t in terms}
    out: dict[int, list[str]] = {}
    for seq, body in bodies.items():
        folded = fold(body)
        held: list[str] = []
        for term in terms:
            if term in by_fts and seq in indexed:
                if seq in by_fts[term]:
                    held.append(shown[term])
            elif pairs[term].search(folded):
                held.append(shown[term])
            elif fts.has_cjk(term):
                held += _held_runs(fold(term), folded)
        out[seq] = held
    return out


def _bm25(docs: Sequence[tuple[Message, list[str]]], wanted: Sequence[str], match: str
          ) -> list[tuple[bool, float, int]]:
    """(holds every wanted token, BM25 score, seq) of each message holding any (every, with
    match "all") of the wanted tokens."""
    df = {t: sum(1 for _, toks in docs if t in toks) for t in wanted}
    avg = sum(len(toks) for _, toks in docs) / len(docs) or 1.0
    scored = []
    for msg, toks in docs:
        counts = {t: toks.count(t) for t in wanted if t in toks}
        if not counts or (match == "all" and len(counts) < len(wanted)):
            continue
        norm = 1.2 * (0.25 + 0.75 * len(toks) / avg)
        score = sum(math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) * c * 2.2 / (c + norm)
                    for t, c in counts.items())
        scored.append((len(counts) == len(wanted), score, msg.seq))
    return scored


def unarchived_ranking(messages: Sequence[Message], query: Query, n: int,
                       window: TimeWindow | None = None, match: str = "any"
                       ) -> list[tuple[int, float]]:
    """Messages of history.json that SQLite lacks (another writer's, before a backfill):
    BM25 over the query's content tokens, every-term matches first, as keyword_ranking
    does; they are few, so this runs in Python."""
    wanted = sorted(query.tokens)
    docs = [(m, fts.term_tokens(m.body)) for m in messages
            if window is None or m.send_at in window]
    if not wanted or not docs or n <= 0:
        return []
    scored = _bm25(docs, wanted, match)
    scored.sort(reverse=True)
    return [(seq, score) for _, score, seq in scored[:n]]
