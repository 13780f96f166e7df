"""Searching a session's memory (SPEC §2): keyword, semantic, hybrid; catch-up indexing.

keyword   Our FTS5 index (``messages_fts``: CJK bigrams + unicode61/porter, see fts.py) over
          the archive part (rows with seq below the first message of history.json, so
          nothing is found twice), plus a substring match over the recent part
          (history.json). Every term must appear, in any order, case-insensitively; when
          no message has them all, any term will do and the result says ``match: any``.
          Ranked by BM25, then recency. Never imports chromadb, never creates a file.
semantic  Cosine similarity in the Chroma collection over the recent part, leaving out the
          context window (the last ``max_history_messages``); every hit is expanded to
          2 messages before and 1 after, and touching windows merge into segments. Each
          message is embedded together with the end of the message before it (doc_text).
hybrid    BM25 over any query term (stopwords dropped) over the whole history, fused with
          the vector ranking by reciprocal ranks plus neighbour smoothing (constants
          measured on LoCoMo: docs/benchmarks.md). Window exclusion and expansion as in
          semantic.

The vector index is derived (SPEC invariant 3); search.catchup keeps it up to date before
every semantic/hybrid search, within the search's time budget: messages it had no time to
embed are still ranked by keyword (``unindexed_count`` says how many).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from agenvoy_cli.conversation import archive
from agenvoy_cli.conversation.messages import NS, Message
from agenvoy_cli.errors import BadInput
from agenvoy_cli.home import fts
from agenvoy_cli.search.catchup import (  # noqa: F401 - re-exported for callers and benches
    CatchUp,
    Notice,
    Progress,
    catch_up,
    doc_text,
    index_session,
    pending_vectors,
)

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store

MODES = ("semantic", "keyword", "hybrid")
DEFAULT_LIMIT = 8
BEFORE, AFTER = 2, 1  # expansion of a semantic/hybrid hit (upstream's history window)
POOL = 50  # candidates per ranker before fusion
# BM25 ranks the newest RANK_WINDOW matches of a query: exact for any term in fewer
# messages, and a bounded cost (~0.1 s) for a term found in nearly all of a million.
RANK_WINDOW = 5_000

# Hybrid fusion: reciprocal ranks, score = sum w / (k + rank), then each message passes
# FUSION_NEIGHBOUR of its score to the messages just before and after it (a turn next to
# a strong match is often the answer). Measured on LoCoMo categories 1-4, chosen on even
# conversations and checked on odd ones (bench/locomo.py --tune, docs/benchmarks.md).
FUSION_K = 5.0
FUSION_W_KEYWORD = 1.0
FUSION_W_VECTOR = 1.0
FUSION_NEIGHBOUR = 0.2


# Words that carry no topic; dropped from any-term (BM25 OR) queries only. The every-term
# keyword mode keeps them: a user who types "the" asks for "the".
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


# ----------------------------------------------------------------------------- time windows


@dataclass(frozen=True)
class TimeWindow:
    """send_at bounds in UTC ns: lo inclusive, hi exclusive; None is open."""

    lo: int | None = None
    hi: int | None = None

    def __contains__(self, ns: int) -> bool:
        return (self.lo is None or ns >= self.lo) and (self.hi is None or ns < self.hi)

    @property
    def open(self) -> bool:
        return self.lo is None and self.hi is None

    def as_dict(self) -> dict[str, int | None]:
        return {"from": self.lo, "to": self.hi}


def time_window(range_: str = "all", since: str | None = None, until: str | None = None,
                now: datetime | None = None) -> TimeWindow:
    """--range DURATION|all combined with --since/--until (the one parser: timespec)."""
    from agenvoy_cli import timespec

    return TimeWindow(*timespec.window(range_, since, until, now))


# ----------------------------------------------------------------------------- reading


# ----------------------------------------------------------------------------- results


def rfc3339(ns: int) -> str:
    """Local time with its offset, as upstream prints it (2025-01-02T15:04:05+08:00)."""
    return datetime.fromtimestamp(ns // NS).astimezone().isoformat(timespec="seconds")


@dataclass
class Row:
    source: str  # "archive" | "recent"
    segment: int
    hit: bool  # False for a neighbour added by the expansion
    seq: int
    send_at: int
    role: str
    content: str  # header stripped
    score: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "segment": self.segment, "hit": self.hit,
                "seq": self.seq, "sent_at": rfc3339(self.send_at), "sent_at_ns": self.send_at,
                "role": self.role, "content": self.content,
                "score": None if self.score is None else round(self.score, 6)}


@dataclass
class SearchResult:
    session_id: str
    query: str
    mode: str
    results: list[Row] = field(default_factory=list)
    match: str | None = None  # keyword: "all" | "any" | "none" (nothing searchable)
    indexed: int = 0  # messages embedded by the catch-up before this search
    unindexed_count: int | None = None  # left without a vector (budget); None for keyword
    unsearchable_count: int = 0  # vectors an inconsistent index left out (doctor --repair)
    window: TimeWindow = field(default_factory=TimeWindow)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"session_id": self.session_id, "query": self.query,
                               "mode": self.mode}
        if self.match is not None:
            doc["match"] = self.match
        if self.mode != "keyword":
            doc["indexed"] = self.indexed
        doc["unindexed_count"] = self.unindexed_count
        doc["unsearchable_count"] = self.unsearchable_count if self.mode != "keyword" else None
        doc["results"] = [r.as_dict() for r in self.results]
        return doc


# ----------------------------------------------------------------------------- keyword


def _fold(text: str) -> str:
    """Case and diacritics folded, as FTS5's unicode61 (remove_diacritics) does."""
    decomposed = unicodedata.normalize("NFKD", text)
    if decomposed.isascii():
        return decomposed.casefold()
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _term_patterns(query: str) -> list[re.Pattern[str]]:
    """One pattern per whitespace term: its word pieces in order, punctuation between them
    optional (so `don't` finds "don't" and "dont"). Terms without a letter or digit are
    ignored, as the FTS tokenizer ignores them."""
    return [p for _, p in _term_pairs(query)]


def _term_pairs(query: str) -> list[tuple[str, re.Pattern[str]]]:
    pairs = []
    for term in query.split():
        pieces = [_fold(p) for p in fts.word_pattern().findall(term)]
        if pieces:
            pairs.append((term, re.compile(r"[\W_]*".join(re.escape(p) for p in pieces))))
    return pairs


def content_query(query: str) -> str:
    """The query without stopwords (unless nothing would be left), for any-term ranking."""
    terms = query.split()
    kept = [t for t in terms if _fold(t).strip("?!.,;:'\"()") not in STOPWORDS]
    return " ".join(kept) if kept and fts.query_terms(" ".join(kept)) else query


def split_single_cjk(query: str) -> tuple[str, list[str]]:
    """(the rest of the query, its one-character CJK terms). Bigrams find any CJK substring
    of 2+ characters; a single character at the end of a run is inside no bigram's prefix,
    so such terms are matched by instr() on the indexed text (header already stripped)."""
    rest, singles = [], []
    for term in query.split():
        toks = fts.term_tokens(term)
        if len(toks) == 1 and len(toks[0]) == 1 and fts._is_cjk(toks[0]):
            singles.append(toks[0])
        else:
            rest.append(term)
    return " ".join(rest), singles


def fts_ranking(conn: sqlite3.Connection, session_id: str, match: str | None, n: int, *,
                lo_seq: int = 0, hi_seq: int | None = None,
                window: TimeWindow | None = None,
                contains: Sequence[str] = (),
                exclude: Sequence[int] = ()) -> list[tuple[int, float]]:
    """(seq, score) by BM25 (higher is better), then recency, from our FTS5 index; every
    string of `contains` must also be in the indexed text (without match: recency only)."""
    if match is None:
        if not contains:
            return []
        sql = "SELECT m.seq, 0.0 AS s FROM messages m WHERE m.session_id = ? AND m.seq >= ?"
        args: list[Any] = [session_id, lo_seq]
    else:
        # FTS5 drives the join (CROSS JOIN keeps that order) and streams matches newest
        # first, so the cost is bounded by RANK_WINDOW, not by how common a term is.
        sql = ("SELECT m.seq AS seq, m.send_at AS send_at, bm25(messages_fts) AS s "
               "FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid "
               "WHERE messages_fts MATCH ? AND m.session_id = ? AND m.seq >= ?")
        args = [match, session_id, lo_seq]
    for text in contains:
        sql += " AND instr(m.tokens, ?) > 0"
        args.append(text)
    if hi_seq is not None:
        sql += " AND m.seq < ?"
        args.append(hi_seq)
    if exclude:  # the messages in history.json (the recent part), wherever they are
        sql += " AND m.seq NOT IN (SELECT value FROM json_each(?))"
        args.append(orjson.dumps(list(exclude)).decode())
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


def substring_ranking(messages: Sequence[Message], query: str, n: int, *, every: bool,
                      window: TimeWindow | None = None) -> list[tuple[int, float]]:
    """The recent part: messages containing every (or any) term as a case-insensitive
    substring, ranked by BM25 over substring counts (length in characters), then recency."""
    patterns = _term_patterns(query)
    if not patterns or n <= 0:
        return []
    docs = [(m, _fold(m.body)) for m in messages if window is None or m.send_at in window]
    if not docs:
        return []
    counts = [[len(p.findall(text)) for p in patterns] for _, text in docs]
    df = [sum(1 for c in counts if c[j]) for j in range(len(patterns))]
    total = len(docs)
    avg = sum(len(text) for _, text in docs) / total or 1.0
    k1, b = 1.2, 0.75
    idf = [math.log(1 + (total - d + 0.5) / (d + 0.5)) for d in df]
    scored = []
    for (msg, text), c in zip(docs, counts):
        found = sum(1 for x in c if x)
        if not found or (every and found < len(patterns)):
            continue
        norm = k1 * (1 - b + b * len(text) / avg)
        score = sum(w * x * (k1 + 1) / (x + norm) for w, x in zip(idf, c) if x)
        scored.append((score, msg.send_at, msg.seq))
    scored.sort(key=lambda s: (-s[0], -s[1], -s[2]))
    return [(seq, score) for score, _, seq in scored[:n]]


def _exact_cjk(conn: sqlite3.Connection, session_id: str, query: str,
               ranked: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Drop bigram false positives: "ABC" is the phrase "AB" "BC", which also matches
    "AB，BC" (punctuation is no token). Terms with CJK must be real substrings."""
    cjk = [p for t, p in _term_pairs(query) if fts._CJK_RUN.search(t)]
    if not cjk or not ranked:
        return ranked
    bodies = {m.seq: _fold(m.body) for m in _rows(conn, session_id, [s for s, _ in ranked])}
    return [(seq, sc) for seq, sc in ranked
            if all(p.search(bodies.get(seq, "")) for p in cjk)]


def keyword_search(store: Store, session_id: str, query: str, *, limit: int = DEFAULT_LIMIT,
                   window: TimeWindow | None = None) -> SearchResult:
    """Two groups, archive (FTS5, rows trimmed out of history.json) then recent
    (history.json); each at most `limit` hits."""
    query = _checked_query(query)
    window = window or TimeWindow()
    result = SearchResult(session_id, query, "keyword", window=window)
    with store.read_lock():
        store.require(session_id)
        recent = store.recent(session_id)
        conn = store.db_readonly()
        # the archive part: every row whose message is not in history.json (trimmed, or
        # removed from its middle by Agenvoy's /compact or by hand)
        in_history = [m.seq for m in recent]
        by_seq = {m.seq: m for m in recent}
        if fts.match_all(query) is None:
            result.match = "none"
            return result
        for every in (True, False):
            old: list[tuple[int, float]] = []
            if conn is not None:
                if every:
                    rest, singles = split_single_cjk(query)
                    old = fts_ranking(conn, session_id, fts.match_all(rest), 2 * limit + 10,
                                      window=window, contains=singles, exclude=in_history)
                    old = _exact_cjk(conn, session_id, query, old)[:limit]
                else:
                    old = fts_ranking(conn, session_id, fts.match_any(content_query(query)),
                                      limit, window=window, exclude=in_history)
            new = substring_ranking(recent, query if every else content_query(query), limit,
                                    every=every, window=window)
            result.match = "all" if every else "any"
            if old or new or len(fts.query_terms(query)) < 2:
                break
        rows_old = {m.seq: m for m in _rows(conn, session_id, [s for s, _ in old])}
    segment = 0
    for source, ranked, pool in (("archive", old, rows_old), ("recent", new, by_seq)):
        for seq, score in ranked:
            msg = pool.get(seq)
            if msg is None:
                continue
            result.results.append(_row(source, segment, True, msg, score))
            segment += 1
    return result


# ----------------------------------------------------------------------------- vectors


def _checked_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise BadInput("the search query is empty")
    if "\x00" in query:
        raise BadInput("the search query contains a NUL character")
    return query.strip()


def _seq_where(session_id: str, lo: int, hi: int | None,
               window: TimeWindow | None = None) -> dict[str, Any]:
    conds: list[dict[str, Any]] = [{"session_id": session_id}, {"seq": {"$gte": lo}}]
    if hi is not None:
        conds.append({"seq": {"$lt": hi}})
    if window is not None and window.lo is not None:
        conds.append({"send_at": {"$gte": window.lo}})
    if window is not None and window.hi is not None:
        conds.append({"send_at": {"$lt": window.hi}})
    return {"$and": conds}


def vector_ranking(store: Store, session_id: str, vector: Sequence[float], n: int, *,
                   lo_seq: int, hi_seq: int | None,
                   window: TimeWindow | None = None) -> list[tuple[int, float]]:
    """(seq, cosine similarity), best first. Hold the write lock (Chroma access)."""
    from agenvoy_cli.vectors import index as vectors

    if n <= 0 or (hi_seq is not None and hi_seq <= lo_seq):
        return []
    if not vectors.index_exists(store, vectors.MESSAGES):
        return []
    index = vectors.VectorIndex(store, vectors.MESSAGES, create=False)
    hits = index.query(vector, n, where=_seq_where(session_id, lo_seq, hi_seq, window))
    return [(int(h.metadata["seq"]), 1.0 - float(h.distance)) for h in hits]


# ----------------------------------------------------------------------------- fusion


def fuse(keyword: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]], *,
         k: float = FUSION_K, w_keyword: float = FUSION_W_KEYWORD,
         w_vector: float = FUSION_W_VECTOR, neighbour: float = FUSION_NEIGHBOUR,
         lo: int = 0, hi: int | None = None) -> list[tuple[int, float]]:
    """Weighted reciprocal-rank fusion with neighbour smoothing inside [lo, hi); ties go to
    the newer message."""
    scores: dict[int, float] = {}
    for weight, ranked in ((w_keyword, keyword), (w_vector, vector)):
        for rank, (seq, _) in enumerate(ranked, 1):
            scores[seq] = scores.get(seq, 0.0) + weight / (k + rank)
    if neighbour:
        smoothed = dict(scores)
        for seq, score in scores.items():
            for near in (seq - 1, seq + 1):
                if near >= lo and (hi is None or near < hi):
                    smoothed[near] = smoothed.get(near, 0.0) + neighbour * score
        scores = smoothed
    return sorted(scores.items(), key=lambda kv: (-kv[1], -kv[0]))


# ----------------------------------------------------------------------------- rankings


@dataclass
class _Scope:
    """Where a semantic/hybrid search looks: [0, cutoff) for keyword, [start, cutoff) for
    vectors, where cutoff leaves out the context window."""

    start: int  # seq of history.json's first message (the archive is below it)
    cutoff: int | None
    recent: list[Message]
    next_seq: int  # SQLite's next place: no vector at or beyond it is ever returned


def _scope(store: Store, session_id: str, exclude_window: bool) -> _Scope:
    recent = store.recent(session_id)
    conn = store.db_readonly()
    rows = archive.session_rows(conn, session_id) if conn is not None else None
    start = recent[0].seq if recent else (rows.next_seq if rows else 0)
    if rows is not None and rows.start_seq is not None:
        start = max(start, rows.start_seq)  # never a vector older than the trim point
    cutoff = None
    if exclude_window:
        n = store.settings.max_history_messages
        cutoff = recent[-n].seq if len(recent) >= n else (recent[0].seq if recent else start)
    return _Scope(start, cutoff, recent, rows.next_seq if rows else 0)


def rank(store: Store, session_id: str, query: str, mode: str, n: int = POOL, *,
         exclude_window: bool = False, window: TimeWindow | None = None,
         vector: Sequence[float] | None = None) -> list[tuple[int, float]]:
    """The ranking a search mode starts from, before context expansion: (seq, score).
    keyword here is BM25 over any term (stopwords dropped) over the whole history — the
    ranking hybrid fuses and the benchmark measures. Indexes first for semantic/hybrid."""
    query = _checked_query(query)
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r}")
    if mode != "keyword" and vector is None:
        from agenvoy_cli.vectors import index as vectors

        index_session(store, session_id)
        vector = vectors.embedder(store).embed_query(query)
    lock = store.read_lock() if mode == "keyword" else store.write_lock()
    with lock:
        scope = _scope(store, session_id, exclude_window)
        return _rank_in(store, session_id, query, mode, n, scope, window, vector)


def _rank_in(store: Store, session_id: str, query: str, mode: str, n: int, scope: _Scope,
             window: TimeWindow | None, vector: Sequence[float] | None
             ) -> list[tuple[int, float]]:
    kw: list[tuple[int, float]] = []
    if mode in ("keyword", "hybrid"):
        conn = store.db_readonly()
        match = fts.match_any(content_query(query))
        if conn is not None and match is not None:
            kw = fts_ranking(conn, session_id, match, max(n, POOL), hi_seq=scope.cutoff,
                             window=window)
        if mode == "keyword":
            return kw[:n]
    assert vector is not None
    hi = scope.next_seq if scope.cutoff is None else min(scope.cutoff, scope.next_seq)
    vec = vector_ranking(store, session_id, vector, max(n, POOL) if mode == "hybrid" else n,
                         lo_seq=scope.start, hi_seq=hi, window=window)
    if mode == "semantic":
        return vec[:n]
    # a neighbour may lie outside a time window: no smoothing then
    smooth = FUSION_NEIGHBOUR if window is None or window.open else 0.0
    return fuse(kw, vec, hi=hi, neighbour=smooth)[:n]


# ----------------------------------------------------------------------------- expansion


def _rows(conn: sqlite3.Connection | None, session_id: str, seqs: Iterable[int]
          ) -> list[Message]:
    seqs = sorted(set(seqs))
    if conn is None or not seqs:
        return []
    out: list[Message] = []
    for i in range(0, len(seqs), 500):
        part = seqs[i:i + 500]
        marks = ",".join("?" * len(part))
        sql = (f"SELECT seq, send_at, role, content, message FROM messages "
               f"WHERE session_id = ? AND seq IN ({marks}) ORDER BY seq")
        for seq, send_at, role, content, raw in conn.execute(sql, [session_id, *part]):
            out.append(Message(seq, send_at, role, content, orjson.loads(raw) if raw else {}))
    return out


def _row(source: str, segment: int, hit: bool, msg: Message, score: float | None) -> Row:
    return Row(source, segment, hit, msg.seq, msg.send_at, msg.role, msg.body,
               score)


def expand(hits: Sequence[tuple[int, float]], lo: int, hi: int) -> list[list[int]]:
    """Each hit widened to [seq-2, seq+1] within [lo, hi); touching or overlapping windows
    merge. Segments in time order, each a list of seqs."""
    wanted: set[int] = set()
    for seq, _ in hits:
        wanted.update(s for s in range(seq - BEFORE, seq + AFTER + 1) if lo <= s < hi)
    segments: list[list[int]] = []
    for seq in sorted(wanted):
        if segments and seq == segments[-1][-1] + 1:
            segments[-1].append(seq)
        else:
            segments.append([seq])
    return segments


def _cap_per_source(ranked: Sequence[tuple[int, float]], start: int, limit: int
                    ) -> list[tuple[int, float]]:
    taken = {"archive": 0, "recent": 0}
    out = []
    for seq, score in ranked:
        source = "archive" if seq < start else "recent"
        if taken[source] < limit:
            taken[source] += 1
            out.append((seq, score))
    return out


def vector_search(store: Store, session_id: str, query: str, mode: str = "semantic", *,
                  limit: int = DEFAULT_LIMIT, window: TimeWindow | None = None,
                  progress: Progress | None = None, budget: float | None = None,
                  notice: Notice | None = None) -> SearchResult:
    """Semantic or hybrid search as a user sees it: context window left out, hits expanded
    2 before / 1 after into merged segments. The catch-up before it embeds for at most
    `budget` seconds (None: everything); what it left is ranked by keyword."""
    from agenvoy_cli.vectors import index as vectors

    query = _checked_query(query)
    window = window or TimeWindow()
    with store.read_lock():
        store.require(session_id)
    result = SearchResult(session_id, query, mode, window=window,
                          match="any" if mode == "hybrid" else None)
    # the query first: it loads the model, so that the budget is spent on embedding only
    vector = vectors.embedder(store).embed_query(query)  # outside the lock
    caught = catch_up(store, session_id, budget, progress=progress, notice=notice)
    result.indexed, result.unindexed_count = caught.indexed, len(caught.unindexed)
    with store.write_lock():
        scope = _scope(store, session_id, exclude_window=True)
        ranked = _rank_in(store, session_id, query, mode, max(POOL, 2 * limit), scope,
                          window, vector)
        if mode == "semantic" and caught.unindexed:
            ranked = _with_unindexed(store, session_id, query, ranked, caught.unindexed,
                                     scope, window)
        hits = _cap_per_source(ranked, scope.start, limit)
        hi = scope.cutoff if scope.cutoff is not None else scope.start
        lo = 0 if mode == "hybrid" else scope.start
        segments = expand(hits, lo, hi)
        conn = store.db_readonly()
        by_seq = {m.seq: m for m in scope.recent}
        need = [s for seg in segments for s in seg if s not in by_seq]
        by_seq.update((m.seq, m) for m in _rows(conn, session_id, need))
        missing = _unarchived(conn, session_id, scope)
    from agenvoy_cli.vectors.messages import last_unsearchable

    result.unsearchable_count = last_unsearchable.pop(session_id, 0)
    if missing:
        result.notes.append(f"{missing} message(s) of history.json are not in SQLite yet, so "
                            "not indexed; run `agenvoy backfill` for this session")
    if caught.unindexed:
        result.notes.append(
            f"{len(caught.unindexed)} message(s) are not embedded yet and were searched by "
            f"keyword only; `agenvoy backfill --vectors {session_id}` embeds them now, a "
            "running `agenvoy mcp` server keeps them embedded ahead of searches")
    scores = dict(hits)
    for number, seg in enumerate(segments):
        for seq in seg:
            msg = by_seq.get(seq)
            if msg is not None:
                source = "archive" if seq < scope.start else "recent"
                result.results.append(_row(source, number, seq in scores, msg,
                                           scores.get(seq)))
    return result


def _with_unindexed(store: Store, session_id: str, query: str,
                    ranked: list[tuple[int, float]], unindexed: Sequence[int], scope: _Scope,
                    window: TimeWindow | None) -> list[tuple[int, float]]:
    """Semantic ranking plus the keyword ranking (any term, BM25) of the messages the
    catch-up had no time to embed, fused by reciprocal ranks."""
    conn = store.db_readonly()
    match = fts.match_any(content_query(query))
    if conn is None or match is None:
        return ranked
    wanted = set(unindexed)
    hi = scope.next_seq if scope.cutoff is None else min(scope.cutoff, scope.next_seq)
    kw = [(seq, score) for seq, score in fts_ranking(
        conn, session_id, match, POOL, lo_seq=max(scope.start, min(wanted)), hi_seq=hi,
        window=window) if seq in wanted]
    return fuse(kw, ranked, neighbour=0.0) if kw else ranked


def _unarchived(conn: sqlite3.Connection | None, session_id: str, scope: _Scope) -> int:
    if not scope.recent:
        return 0
    if conn is None:
        return len(scope.recent)
    nxt = archive.session_rows(conn, session_id).next_seq
    return sum(1 for m in scope.recent if m.seq >= nxt)


def search(store: Store, session_id: str, query: str, mode: str = "semantic", *,
           limit: int = DEFAULT_LIMIT, window: TimeWindow | None = None,
           progress: Progress | None = None, budget: float | None = None,
           notice: Notice | None = None) -> SearchResult:
    """`agenvoy search`: dispatch on the mode (budget/notice: see catchup.catch_up)."""
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    if mode == "keyword":
        return keyword_search(store, session_id, query, limit=limit, window=window)
    return vector_search(store, session_id, query, mode, limit=limit, window=window,
                         progress=progress, budget=budget, notice=notice)
