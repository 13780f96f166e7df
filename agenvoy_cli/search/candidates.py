"""The first stage of a semantic or hybrid search (search/engine.py): under the store lock,
the rankings and what the later stages read, so that the lock is held once and Chroma read
once per kind.

- the vector ranking (search/semantic.py) of the searched range, and for hybrid the keyword
  ranking over the whole history (search/keyword.py) with how much of the query its best hit
  covers (search/fusion.py weighs it); for semantic, the keyword ranking of the messages the
  catch-up left without a vector;
- the texts of the top hits and the messages around them (attribution reads them before
  and after fusion) and their kept text vectors (vectors/attribution.py);
- what the Relevance asks for (search/relevance.py Needs): the query's similarity to a
  background sample of the session, the index vectors of the sample and of the top hits,
  their texts and the vectors the Relevance keeps beside the index;
- what the fitted ranking reads (search/ranking.py, when `fitted`): its pool, the query's
  similarity to the index vector of each pool message and of its neighbours, the pool's
  texts, and (`second`) the second model's kept vectors of the pool's and the sample's
  texts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.home import fts
from agenvoy_cli.search import fusion, ranking, semantic
from agenvoy_cli.search.keyword import keyword_ranking
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.relevance import Needs
from agenvoy_cli.search.results import rows_of
from agenvoy_cli.search.scope import Scope
from agenvoy_cli.search.timewindow import TimeWindow
from agenvoy_cli.vectors import attribution

if TYPE_CHECKING:
    import sqlite3

    from agenvoy_cli.conversation.store import Store

POOL = 50  # candidates per ranking before fusion
ARCHIVED_KEPT = 50_000  # archived messages' (text, role) a holder keeps (a search reads ~150)


@dataclass
class Background:
    """What the Relevance asked to be gathered (its Needs): a sample of the session, the
    query's similarity to each sampled message and their mean (None: too few to sample), the
    index vectors of the sample and of the top hits, and the vectors the Relevance keeps
    beside the index for those messages (by seq)."""

    typical: float | None = None
    sample: list[int] = field(default_factory=list)
    similarities: list[float] = field(default_factory=list)
    vectors: dict[int, Any] = field(default_factory=dict)
    kept: dict[int, Sequence[float]] = field(default_factory=dict)


@dataclass
class Candidates:
    keyword: list[tuple[int, float]]  # hybrid: the keyword ranking of the whole history
    vector: list[tuple[int, float]]  # the vector ranking of the searched range
    unindexed: list[tuple[int, float]]  # semantic: keyword ranking of messages without a vector
    coverage: float | None  # share of the query's tokens in the best keyword hit
    unsearchable: int  # vectors an inconsistent index left out
    texts: dict[int, str]  # texts of the top hits, the messages around them, the sample
    roles: dict[int, str]  # ... and their roles (attribution reads them)
    text_vectors: dict[int, Sequence[float]]  # kept vectors of those texts (attribution)
    background: Background
    pool: list[int] = field(default_factory=list)  # the fitted ranking's (empty: not asked)
    similarity: dict[int, float] = field(default_factory=dict)  # pool and neighbours (index)
    second_vectors: dict[int, Sequence[float]] = field(default_factory=dict)  # kept, by seq


@dataclass(frozen=True)
class Wanted:
    """What the fitted ranking (search/ranking.py) asks gather for: its pool (fitted), the
    second model's kept vectors under `second` (None: not read)."""

    fitted: bool = False
    second: str | None = None


def gather(store: Store, session_id: str, query: Query, mode: str, scope: Scope,
           window: TimeWindow, vector: Sequence[float], unindexed: Sequence[int],
           needs: Needs, n: int = POOL, wanted: Wanted = Wanted()) -> Candidates:
    """Hold the write lock (Chroma access). `n` candidates per ranking."""
    conn = store.db_readonly()
    keyword, cover = _keyword(conn, session_id, query, mode, scope, window, n)
    vec, unsearchable = semantic.vector_hits(store, session_id, vector, n, lo_seq=scope.start,
                                             hi_seq=scope.vector_hi, window=window)
    texts, roles = _texts(conn, session_id, scope, vec, keyword)
    late = _unindexed(conn, session_id, query, mode, scope, window, unindexed)
    tops = _tops(vec, needs)
    pool, near = _pool(vec, keyword, mode, scope, window, wanted)
    ground = Background()
    if (needs.background or pool) and vec:
        ground = _background(store, session_id, vector, scope, tops | near)
    relevance_at: set[int] = set()
    if needs.kept:  # the Relevance reads their texts too (no sample: the tops' alone)
        relevance_at = set(ground.sample) | tops
    second_at = set(pool) | set(ground.sample) if wanted.second and ground.sample else set()
    more = _archived(store, conn, session_id, (relevance_at | second_at | set(pool)) - set(texts))
    for seq, (body, role) in more.items():
        texts[seq], roles[seq] = body, role
    found = Candidates(keyword, vec, late, cover, unsearchable, texts, roles, {}, ground, pool)
    if pool and ground.sample:
        found.similarity = _similarity(ground, near, vector)
    if vec:
        found.text_vectors, ground.kept, found.second_vectors = _kept(
            store, session_id, _attribution_at(mode, vec, texts, pool),
            (relevance_at, needs.kept), (second_at, wanted.second))
    return found


def _pool(vec: Sequence[tuple[int, float]], keyword: Sequence[tuple[int, float]], mode: str,
          scope: Scope, window: TimeWindow, wanted: Wanted) -> tuple[list[int], set[int]]:
    """The fitted ranking's pool (search/ranking.py; empty: not wanted) and the messages
    whose index similarity it reads (the pool and the messages next to each)."""
    if not wanted.fitted or not vec:
        return [], set()
    pool = ranking.pool(vec, keyword, 0 if mode == "hybrid" else scope.start,
                        scope.vector_hi, window.open)
    lo, hi = scope.start, scope.vector_hi  # (a property: not once per place)
    return pool, {x for s in pool for x in (s - 1, s, s + 1) if lo <= x < hi}


def _background(store: Store, session_id: str, vector: Sequence[float], scope: Scope,
                also: set[int]) -> Background:
    """The background sample (search/semantic.py background), with the index vectors of
    `also` read in the same call."""
    ground = Background()
    ground.sample, ground.similarities, ground.vectors = semantic.background(
        store, session_id, vector, scope.start, scope.vector_hi, sorted(also))
    sims = ground.similarities
    ground.typical = sum(sims) / len(sims) if sims else None
    return ground


def _attribution_at(mode: str, vec: Sequence[tuple[int, float]], texts: dict[int, str],
                    pool: Sequence[int]) -> list[int]:
    """The messages whose kept own-text vectors attribution and credit read: hybrid, every
    text gathered; semantic, the top hits and the messages before them, and the fitted
    ranking's pool (its top is attributed too) with the messages before its members."""
    checked = max(semantic.ATTRIBUTION_TOP, semantic.CREDIT_TOP)
    if mode == "hybrid":
        return sorted(texts)
    tops = [s for s, _ in vec[:checked]] + list(pool)
    return sorted({x for s in tops for x in (s - 1, s)} & set(texts))


def _similarity(ground: Background, near: set[int], vector: Sequence[float]
                ) -> dict[int, float]:
    """The query's similarity to the index vector of each of these messages (read with the
    background)."""
    at = sorted(s for s in near if s in ground.vectors)
    return dict(zip(at, semantic.cosines([ground.vectors[s] for s in at], vector)))


def _keyword(conn: sqlite3.Connection | None, session_id: str, query: Query, mode: str,
             scope: Scope, window: TimeWindow, n: int
             ) -> tuple[list[tuple[int, float]], float | None]:
    """Hybrid: the any-term keyword ranking of the history before the context window, and
    the share of the query's tokens its best hit holds."""
    if mode != "hybrid" or conn is None:
        return [], None
    ranked, _ = keyword_ranking(conn, session_id, query, n, hi_seq=scope.cutoff,
                                window=window, match="any")
    if not ranked:
        return ranked, None
    best = rows_of(conn, session_id, [ranked[0][0]])
    tokens = fts.term_tokens(best[0].body) if best else []
    return ranked, fusion.coverage(query.tokens, tokens)


def _texts(conn: sqlite3.Connection | None, session_id: str, scope: Scope,
           vec: Sequence[tuple[int, float]], keyword: Sequence[tuple[int, float]]
           ) -> tuple[dict[int, str], dict[int, str]]:
    """Texts and roles for the attribution check, before and after fusion (smoothing adds
    neighbours): the top hits of both rankings, two messages before each and one after."""
    top = [s for s, _ in [*vec[:2 * semantic.ATTRIBUTION_TOP],
                          *keyword[:2 * semantic.ATTRIBUTION_TOP]]]
    want = {x for s in top for x in (s - 2, s - 1, s, s + 1) if x >= 0}
    by_seq = getattr(scope.recent, "by_seq", None)  # a warm store's (server/recent_cache.py)
    if by_seq is None:
        found = [m for m in scope.recent if m.seq in want]
    else:  # the same messages in the same order, without a walk of the whole list
        found = [m for _, m in sorted(by_seq[s] for s in want if s in by_seq)]
    found += rows_of(conn, session_id, want - {m.seq for m in found})
    return {m.seq: m.body for m in found}, {m.seq: m.role for m in found}


def _archived(store: Store, conn: sqlite3.Connection | None, session_id: str,
              seqs: set[int]) -> dict[int, tuple[str, str]]:
    """(text, role) of these archived messages, in place order, as rows_of reads them, kept
    by the holder (vectors/context.py `archived`) while the database files are unchanged
    (home/sqlite.py change_stamp: any process's commit changes it): a warm server's
    searches read ~150 each, mostly the same. Hold the store lock."""
    from agenvoy_cli.home.sqlite import change_stamp
    from agenvoy_cli.vectors import context

    held = context.of(store).archived
    stamp = change_stamp(store.layout.db)
    if held.get(None) != stamp or len(held) > ARCHIVED_KEPT:
        held.clear()
        held[None] = stamp
    wanted = sorted(seqs)
    for m in rows_of(conn, session_id, [s for s in wanted if (session_id, s) not in held]):
        held[(session_id, m.seq)] = (m.body, m.role)
    return {s: held[(session_id, s)] for s in wanted if (session_id, s) in held}


def _unindexed(conn: sqlite3.Connection | None, session_id: str, query: Query, mode: str,
               scope: Scope, window: TimeWindow, unindexed: Sequence[int]
               ) -> list[tuple[int, float]]:
    """Semantic: the keyword ranking of the messages the catch-up left without a vector."""
    if mode != "semantic" or not unindexed or conn is None:
        return []
    wanted = set(unindexed)
    ranked, _ = keyword_ranking(conn, session_id, query, POOL, hi_seq=scope.vector_hi,
                                window=window, match="any")
    return [(seq, sc) for seq, sc in ranked if seq in wanted]


def _tops(vec: Sequence[tuple[int, float]], needs: Needs) -> set[int]:
    """The top hits the Relevance reads, as attribution may leave them (a hit or the message
    before it)."""
    return {x for s, _ in vec[:needs.top] for x in (s - 1, s) if x >= 0}


def _kept(store: Store, session_id: str, attribution_at: Sequence[int],
          relevance: tuple[set[int], str | None], second: tuple[set[int], str | None]
          ) -> tuple[dict[int, Sequence[float]], dict[int, Sequence[float]],
                     dict[int, Sequence[float]]]:
    """The kept text vectors attribution reads, those the Relevance reads and those the
    fitted ranking reads (each: (places, key); no key or no place: none), in one read."""
    own = attribution.OWN_TEXT
    asked = [(at, key) for at, key in (relevance, second) if at and key]
    keys = tuple(dict.fromkeys([own, *(key for _, key in asked)]))
    places = set(attribution_at).union(*(at for at, _ in asked))
    loaded = attribution.load_keys(store, session_id, sorted(places), keys)
    keep_at = set(attribution_at)
    text_vectors = {s: v for s, v in loaded.get(own, {}).items() if s in keep_at}

    def of(at: set[int], key: str | None) -> dict[int, Sequence[float]]:
        return dict(loaded.get(key, {})) if at and key else {}

    return text_vectors, of(*relevance), of(*second)
