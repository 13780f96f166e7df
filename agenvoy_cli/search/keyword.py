"""Keyword search: one BM25 ranking over the whole session from our FTS5 index.

``messages_fts`` indexes every archived message (CJK runs as bigrams, the rest through
unicode61 + porter: home/fts.py), so stemming and Chinese substrings work the same for the
archive and for the messages still in history.json; each hit is labelled by where it is.
Messages holding every term rank above messages holding some (``match`` says which the
first hit is); long natural-language queries and Chinese without spaces are tokenised,
stop-words dropped, and ranked any-term. The session is a column of the index (migration
009): MATCH ``session : "<hex>" AND tokens : (...)`` seeks the doclists to the session's
rows, so the cost follows the session's own matches, not the home's. Never imports
chromadb, never creates a file.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agenvoy_cli.conversation.messages import Message
from agenvoy_cli.home import fts
from agenvoy_cli.search.results import rows_of
from agenvoy_cli.search.timewindow import TimeWindow

if TYPE_CHECKING:
    import sqlite3

# BM25 ranks the newest RANK_WINDOW matches of a query inside the session: exact for any
# term in fewer messages, and a bounded cost for a term found in nearly all of a million.
RANK_WINDOW = 5_000
LONG_QUERY_TERMS = 8  # more terms than this: natural language, ranked any-term only

# Words that carry no topic; dropped from any-term (BM25 OR) queries only. The every-term
# ranking keeps them: a user who types "the" asks for "the".
_STOPWORDS = """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each else ever few for
from further had has have having he her here hers herself him himself his how i if in into
is it its itself just let like likely may me might more most must my myself no nor not now
of off on once only or other ought our ours ourselves out over own same shall she should so
some such than that the their theirs them themselves then there these they this those
through to too under until up upon us very was we were what when where which while who whom
whose why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORDS.split())
# Chinese function bigrams (question words, pronouns, fillers): in nearly every dialogue
# turn, so they only add noise to an any-term ranking of a whole Chinese sentence.
_CJK_STOP = """
什麼 什么 怎麼 怎么 為什 为什 我們 我们 你們 你们 他們 他们 這個 这个 那個 那个 一個 一个 一下
之前 以前 還記 还记 記得 记得 跟你 你說 你说 我說 我说 說過 说过 的時 的时 時候 时候 是不 不是
可以 沒有 没有 就是 知道 覺得 觉得 因為 因为 所以 但是 如果 然後 然后 已經 已经 現在 现在 來著 来着
我的 你的 他的 她的 的是 了嗎 了吗 是什 有沒 有没 嗎？ 呢？
"""
CJK_STOP_BIGRAMS = frozenset(_CJK_STOP.split())


def fold(text: str) -> str:
    """Case and diacritics folded, as FTS5's unicode61 (remove_diacritics) does."""
    decomposed = unicodedata.normalize("NFKD", text)
    if decomposed.isascii():
        return decomposed.casefold()
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def content_query(query: str) -> str:
    """The query without stopwords (unless nothing would be left), for any-term ranking."""
    terms = query.split()
    kept = [t for t in terms if fold(t).strip("?!.,;:'\"()") not in STOPWORDS]
    return " ".join(kept) if kept and fts.query_terms(" ".join(kept)) else query


def any_term_match(query: str) -> str | None:
    """MATCH for any content token of the query: stopwords and Chinese function bigrams
    dropped (unless nothing would be left)."""
    tokens = sorted({tok for term in fts.query_terms(content_query(query)) for tok in term})
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


def keyword_ranking(conn: sqlite3.Connection, session_id: str, query: str, n: int, *,
                    hi_seq: int | None = None, window: TimeWindow | None = None
                    ) -> tuple[list[tuple[int, float]], str]:
    """(ranking, match): messages with every term first (BM25), then messages with some of
    them (BM25 over the content tokens); match is "all" when the best hit has every term,
    "any" when only some, "none" when the query has nothing searchable."""
    terms = fts.query_terms(query)
    if not terms:
        return [], "none"
    every: list[tuple[int, float]] = []
    if len(terms) <= LONG_QUERY_TERMS:
        rest, singles = split_single_cjk(query)
        every = fts_ranking(conn, session_id, fts.match_all(rest), n + 10, hi_seq=hi_seq,
                            window=window, contains=singles)
        every = _exact_cjk(conn, session_id, query, every)[:n]
    if len(every) >= n:
        return every, "all"
    some = fts_ranking(conn, session_id, any_term_match(query), n, hi_seq=hi_seq,
                       window=window)
    seen = {seq for seq, _ in every}
    merged = every + [(seq, sc) for seq, sc in some if seq not in seen]
    return merged[:n], "all" if every else "any"


def unarchived_ranking(messages: Sequence[Message], query: str, n: int,
                       window: TimeWindow | None = None) -> list[tuple[int, float]]:
    """Messages of history.json that SQLite lacks (another writer's, before a backfill):
    BM25 over the query's content tokens, every-term matches first, as keyword_ranking
    does; they are few, so this runs in Python."""
    wanted = sorted({t for term in fts.query_terms(content_query(query)) for t in term})
    docs = [(m, fts.term_tokens(m.body)) for m in messages
            if window is None or m.send_at in window]
    if not wanted or not docs or n <= 0:
        return []
    df = {t: sum(1 for _, toks in docs if t in toks) for t in wanted}
    avg = sum(len(toks) for _, toks in docs) / len(docs) or 1.0
    scored = []
    for msg, toks in docs:
        counts = {t: toks.count(t) for t in wanted if t in toks}
        if not counts:
            continue
        norm = 1.2 * (0.25 + 0.75 * len(toks) / avg)
        score = sum(math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) * c * 2.2 / (c + norm)
                    for t, c in counts.items())
        scored.append((len(counts) == len(wanted), score, msg.seq))
    scored.sort(reverse=True)
    return [(seq, score) for _, score, seq in scored[:n]]
