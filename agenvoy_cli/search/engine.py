"""Searching a session's memory (SPEC §2): the entry point `agenvoy search` calls, and the
catch-up indexing that runs before a semantic or hybrid search.

keyword   one BM25 ranking over the whole session from our FTS5 index (search/keyword.py);
          each hit labelled archive (trimmed out of history.json) or recent.
semantic  cosine similarity over the recent part (search/semantic.py), leaving out the
          context window (the last ``max_history_messages``); hits attributed to the
          message that matches; nothing below the relevance floor.
hybrid    the keyword ranking over the whole history fused with the vector ranking
          (search/fusion.py), weights from the query. Window exclusion as in semantic.
Every hit of semantic/hybrid is expanded to 2 messages before and 1 after; touching windows
merge into segments (search/results.py); results are best first, each hit with its rank.

The vector index is derived (SPEC invariant 3); search.catchup keeps it up to date before
every semantic/hybrid search, within the search's time budget: messages it had no time to
embed are still ranked by keyword (``unindexed_count`` says how many).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import BadInput
from agenvoy_cli.home import fts
from agenvoy_cli.search import floor as floors
from agenvoy_cli.search import fusion, semantic
from agenvoy_cli.search.catchup import (
    Notice,
    Progress,
    catch_up,
)
from agenvoy_cli.search.defaults import DEFAULT_LIMIT, MODES  # noqa: F401 - the interface
from agenvoy_cli.search.fusion import fuse
from agenvoy_cli.search.keyword import (
    CJK_STOP_BIGRAMS,
    MATCHES,
    content_query,
    default_match,
    keyword_ranking,
    unarchived_ranking,
)
from agenvoy_cli.search.results import SearchResult, rows_of
from agenvoy_cli.search.scope import Scope, fill, note_unarchived, scope_of, unarchived
from agenvoy_cli.search.timewindow import TimeWindow

if TYPE_CHECKING:

    from agenvoy_cli.conversation.store import Store

POOL = 50  # candidates per ranker before fusion


def checked_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise BadInput("the search query is empty")
    if "\x00" in query:
        raise BadInput("the search query contains a NUL character")
    return query.strip()


# ----------------------------------------------------------------------------- modes


def keyword_search(store: Store, session_id: str, query: str, *, limit: int = DEFAULT_LIMIT,
                   window: TimeWindow | None = None, match: str | None = None
                   ) -> SearchResult:
    """One BM25 ranking over the whole session: a short query's every-term matches only
    (any term when none has every term: then a note says so), a long one's any-term
    ranking; `match` ("all" | "any") forces either."""
    query = checked_query(query)
    if match is not None and match not in MATCHES:
        raise BadInput(f"unknown match {match!r} (expected {', '.join(MATCHES)})")
    window = window or TimeWindow()
    result = SearchResult(session_id, query, "keyword", window=window)
    with store.read_lock():
        store.require(session_id)
        scope = scope_of(store, session_id, exclude_window=False)
        conn = store.db_readonly()
        if fts.match_all(query) is None:
            result.match = "none"
            result.note("nothing_searchable", f"nothing searchable in: {query}")
            return result
        want = match or default_match(query)
        missing = unarchived(conn, session_id, scope)
        note_unarchived(result, missing)

        def ranked(how: str) -> tuple[list[tuple[int, float]], str]:
            hits, got = ([], how) if conn is None else keyword_ranking(
                conn, session_id, query, limit, window=window, match=how)
            late = unarchived_ranking(scope.recent[-missing:], query, limit, window,
                                      match=how) if missing else []
            return (hits + late)[:limit], got

        hits, result.match = ranked(want)
        tokens = {t for term in fts.query_terms(content_query(query)) for t in term}
        if not hits and want == "all" and match is None and len(tokens) > 1:
            hits, result.match = ranked("any")
            if hits:
                result.note("any_term", "no message has every term of the query; showing "
                            "messages with any of them")
            else:
                result.match = "all"
    fill(result, store, session_id, scope, hits, expand_lo=None)
    return result


TOKENS_KEPT = 50_000  # message texts whose tokens a holder keeps for the floor's rare words


@dataclass
class _Candidates:
    keyword: list[tuple[int, float]]
    vector: list[tuple[int, float]]
    bodies: dict[int, str]  # texts of the top vector hits and their predecessors
    coverage: float | None  # share of the query's tokens in the best keyword hit
    unindexed: list[tuple[int, float]]  # keyword ranking of messages left without a vector
    typical: float | None = None  # the query's mean similarity to the session (the floor)
    unsearchable: int = 0  # vectors an inconsistent index left out
    alone: dict[int, Sequence[float]] | None = None  # kept attribution vectors
    background: list[int] = field(default_factory=list)  # the floor's background sample
    judged: dict[int, Sequence[float]] = field(default_factory=dict)  # kept judge vectors
    ask: bool = False  # whether the floor asks its second opinion (search/floor.py)
    indexed: dict[int, Any] = field(default_factory=dict)  # its index vectors


def _candidates(store: Store, session_id: str, query: str, mode: str, n: int,
                scope: Scope, window: TimeWindow, vector: Sequence[float],
                unindexed: Sequence[int], floor: float = 0.0,
                second: bool = False) -> _Candidates:
    """Under the write lock: both rankings and the texts the rest needs."""
    conn = store.db_readonly()
    kw: list[tuple[int, float]] = []
    cover = None
    if mode == "hybrid" and conn is not None:
        kw, _ = keyword_ranking(conn, session_id, query, n, hi_seq=scope.cutoff,
                                window=window, match="any")
        if kw:
            top = rows_of(conn, session_id, [kw[0][0]])
            tokens = fts.term_tokens(top[0].body) if top else []
            cover = fusion.coverage(
                [t for term in fts.query_terms(content_query(query)) for t in term], tokens)
    vec, unsearchable = semantic.vector_hits(store, session_id, vector, n,
                                             lo_seq=scope.start, hi_seq=scope.vector_hi,
                                             window=window)
    # texts for the attribution check, before and after fusion (smoothing adds neighbours)
    top = [s for s, _ in vec[:2 * semantic.ATTRIBUTION_TOP] + kw[:2 * semantic.ATTRIBUTION_TOP]]
    want = {x for s in top for x in (s - 2, s - 1, s, s + 1) if x >= 0}
    by_seq = {m.seq: m.body for m in scope.recent if m.seq in want}
    by_seq.update((m.seq, m.body) for m in rows_of(conn, session_id, want - set(by_seq)))
    late: list[tuple[int, float]] = []
    if mode == "semantic" and unindexed and conn is not None:
        wanted = set(unindexed)
        late = [(seq, sc) for seq, sc in keyword_ranking(
            conn, session_id, query, POOL, hi_seq=scope.vector_hi, window=window,
            match="any")[0] if seq in wanted]
    # the top hits as attribution may leave them (a hit or the message before it): the
    # second opinion's (search/floor.py), their vectors read with the background's
    tops = {x for s, _ in vec[:floors.SECOND_TOP] for x in (s - 1, s) if x >= 0} \
        if second else set()
    typical, sample, indexed = semantic.background(
        store, session_id, vector, scope.start, scope.vector_hi,
        sorted(tops)) if floor and vec else (None, [], {})
    from agenvoy_cli.vectors import attribution

    ask = second and typical is not None
    judge_at: set[int] = set()
    if ask:  # the second opinion's texts
        judge_at = set(sample) | tops
        fresh = rows_of(conn, session_id, judge_at - set(by_seq))
        by_seq.update((m.seq, m.body) for m in fresh)
    # semantic: attribution checks the vector ranking's top hits only (hybrid: the fused
    # ranking's too, which may hold any of by_seq)
    kept = sorted(by_seq) if mode == "hybrid" else sorted(
        {x for s, _ in vec[:semantic.ATTRIBUTION_TOP] for x in (s - 1, s)} & set(by_seq))
    keys = (attribution.ALONE, attribution.JUDGE) if judge_at else (attribution.ALONE,)
    loaded = attribution.load_keys(store, session_id, sorted(set(kept) | judge_at),
                                   keys) if vec else {}
    keep_at = set(kept)
    alone = {s: v for s, v in loaded.get(attribution.ALONE, {}).items() if s in keep_at}
    judged = loaded.get(attribution.JUDGE, {}) if judge_at else {}
    return _Candidates(kw, vec, by_seq, cover, late, typical, unsearchable, alone,
                       sample, judged, ask, indexed)


def _evidence(store: Store, session_id: str, query: str, vector: Sequence[float],
              model_id: str, cand: _Candidates, ranked: Sequence[tuple[int, float]]
              ) -> floors.Evidence | None:
    """The second opinion's evidence (search/floor.py): both models' similarity of the query
    to the top hits as the search shows them (`ranked`: attribution done) and to the
    background sample, with each message's hubness; the judge's text vectors it embedded
    kept for the next search (vectors/attribution JUDGE). None when the judge or a model's
    reference vectors cannot be had (the floor then decides on the similarity alone)."""
    from agenvoy_cli.models.base import EmbedderError
    from agenvoy_cli.search.hubness import Reference
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors import attribution

    top = [s for s, _ in ranked[:floors.SECOND_TOP] if s in cand.bodies]
    sample = [s for s in cand.background if s in cand.bodies]
    if not cand.ask or not top or not sample:
        return None
    if _shares_rare_word(store, query, [cand.bodies[s] for s in top[:floors.SHARED_TOP]],
                         [cand.bodies[s] for s in sample]):
        return floors.Evidence(floors.NO_LIFT, floors.NO_LIFT, shared=True)
    own_ref = Reference.of(store, floors.OWN_SPEC)
    judge_ref = Reference.of(store, floors.JUDGE_SPEC)
    if own_ref is None or judge_ref is None or own_ref.model_id != model_id:
        return None
    cut = semantic.ATTRIBUTION_CHARS
    try:
        judge = _kept_embedder(vectors.local_model(store, floors.JUDGE_SPEC), cand,
                               cand.judged)
        if judge_ref.model_id != judge.model_id:
            return None
        texts = judge.embed_documents([cand.bodies[s][:cut] for s in top + sample])
        judge_query = judge.embed_query(query)
    except EmbedderError:
        return None
    _keep_new(store, session_id, judge, cand, attribution.JUDGE)
    k = len(top)
    own_top = [cand.indexed[s] for s in top if s in cand.indexed]
    own_bg = [cand.indexed[s] for s in sample if s in cand.indexed]
    return floors.Evidence(
        own=floors.Lift(semantic.cosines(own_top, vector), own_ref.hubness(own_top),
                        semantic.cosines(own_bg, vector), own_ref.hubness(own_bg)),
        judge=floors.Lift(semantic.cosines(texts[:k], judge_query), judge_ref.hubness(texts[:k]),
                          semantic.cosines(texts[k:], judge_query),
                          judge_ref.hubness(texts[k:])))


def _shares_rare_word(store: Store, query: str, top: Sequence[str],
                      background: Sequence[str]) -> bool:
    """search/floor.py shares_rare_word over keyword mode's tokens (stop-words dropped); the
    messages' tokens kept by the holder (a warm server's searches share their background)."""
    from agenvoy_cli.vectors import api as vectors

    known: dict[str, frozenset[str]] = vectors.model_data(store, "search-tokens", dict)

    def tokens(body: str) -> frozenset[str]:
        found = known.get(body)
        if found is None:
            if len(known) >= TOKENS_KEPT:
                known.clear()
            found = known[body] = frozenset(fts.term_tokens(body))
        return found

    words = {t for term in fts.query_terms(content_query(query)) for t in term
             if len(t) > 1 and t not in CJK_STOP_BIGRAMS}
    hits = [tokens(body) for body in top]
    common = {w for w in words if any(w in hit for hit in hits)}
    if not common:
        return False
    return floors.shares_rare_word(common, hits, [tokens(body) for body in background])


def _kept_embedder(emb: Any, cand: _Candidates, kept: dict[int, Sequence[float]] | None = None
                   ) -> Any:
    """The embedder for message texts (attribution's, or with `kept` the judge's): texts
    whose vector is kept cost nothing."""
    from agenvoy_cli.vectors.attribution import KeptEmbedder

    cut = semantic.ATTRIBUTION_CHARS
    vecs = cand.alone if kept is None else kept
    return KeptEmbedder(emb, {cand.bodies[s][:cut]: v for s, v in (vecs or {}).items()
                              if s in cand.bodies})


def _keep_new(store: Store, session_id: str, kept: Any, cand: _Candidates,
              key: str = "alone") -> None:
    """Store the message-text vectors this search embedded (vectors/attribution.py, under
    `key`: attribution's ALONE or the judge's JUDGE)."""
    if not kept.new:
        return
    from agenvoy_cli.vectors import attribution

    cut = semantic.ATTRIBUTION_CHARS
    new = {s: kept.new[b[:cut]] for s, b in cand.bodies.items() if b[:cut] in kept.new}
    with store.write_lock():
        attribution.save(store, session_id, new, key)


def vector_search(store: Store, session_id: str, query: str, mode: str = "semantic", *,
                  limit: int = DEFAULT_LIMIT, window: TimeWindow | None = None,
                  progress: Progress | None = None, budget: float | None = None,
                  notice: Notice | None = None) -> SearchResult:
    """Semantic or hybrid search as a user sees it: context window left out, hits
    attributed, floor applied, fused (hybrid), expanded 2 before / 1 after. The catch-up
    before it embeds for at most `budget` seconds (None: everything); what it left is
    ranked by keyword."""
    from agenvoy_cli.vectors import api as vectors

    query = checked_query(query)
    window = window or TimeWindow()
    with store.read_lock():
        store.require(session_id)
    result = SearchResult(session_id, query, mode, window=window,
                          match="any" if mode == "hybrid" else None)
    # the query first: it loads the model, so that the budget is spent on embedding only
    emb = vectors.embedder(store)
    vector = emb.embed_query(query)  # outside the lock
    caught = catch_up(store, session_id, budget, progress=progress, notice=notice)
    result.indexed, result.unindexed_count = caught.indexed, len(caught.unindexed)
    n = max(POOL, limit)
    result.floor = semantic.floor(store, emb.model_id)
    second = semantic.second_opinion(store, emb.model_id)
    with store.write_lock():
        scope = scope_of(store, session_id, exclude_window=True)
        cand = _candidates(store, session_id, query, mode, n, scope, window, vector,
                           caught.unindexed, result.floor, second)
        note_unarchived(result, unarchived(store.db_readonly(), session_id, scope))
    result.unsearchable_count = cand.unsearchable
    if caught.unindexed:
        spent = f"the {budget:g} s budget for embedding was spent: " if budget else ""
        result.note("budget_spent" if spent else "unindexed",
                    f"{spent}{len(caught.unindexed)} message(s) are not embedded yet and were "
                    f"searched by keyword only; `agenvoy backfill --vectors {session_id}` "
                    "embeds them now, a running `agenvoy mcp` server keeps them embedded "
                    "ahead of searches")
    if result.unsearchable_count:
        result.note("unsearchable", f"{result.unsearchable_count} vector(s) of an "
                    "inconsistent index were left out; `agenvoy doctor --repair` rebuilds it")
    lo = scope.start if mode == "semantic" else 0
    result.message_count = len(scope.recent) if mode == "semantic" else scope.next_seq
    result.searchable_count = max(0, (scope.cutoff if scope.cutoff is not None
                                      else scope.next_seq) - lo)
    if not result.searchable_count:
        result.note("context_window", f"all {result.message_count} messages are in the "
                    "context window: nothing else to search")
        return result
    attribution = semantic.Attribution()
    kept = _kept_embedder(emb, cand)
    vec = semantic.attribute(cand.vector, vector, kept, cand.bodies, attribution)
    # the judge over the hits as attribution left them (bench/floor_fit.py measured that)
    evidence = _evidence(store, session_id, query, vector, emb.model_id, cand,
                         vec) if cand.ask else None
    floored = not semantic.relevant(vec, result.floor, cand.typical, emb.model_id, query,
                                    [cand.bodies.get(s, "") for s, _ in
                                     vec[:semantic.ATTRIBUTION_TOP]], evidence)
    if floored:
        vec = []  # nothing clearly related: better nothing than the nearest noise
    if mode == "semantic":
        ranked = fuse(cand.unindexed, vec, neighbour=0.0) if cand.unindexed else vec
    else:
        w = fusion.weights(query, [cand.bodies[s] for s, _ in vec[:semantic.ATTRIBUTION_TOP]
                                   if s in cand.bodies], cand.coverage)
        smooth = fusion.FUSION_NEIGHBOUR if window.open else 0.0  # a neighbour may lie
        ranked = fuse(cand.keyword, vec, w_keyword=w.keyword, w_vector=w.vector,  # outside
                      hi=scope.vector_hi, neighbour=smooth)
        if vec:  # hits that came by vectors: keep them attributed after fusion too
            ranked = semantic.attribute(ranked, vector, kept, cand.bodies, attribution)
    _keep_new(store, session_id, kept, cand)
    fill(result, store, session_id, scope, ranked[:limit], expand_lo=lo)
    if floored and not result.results:
        result.note("not_related", f"no message is related closely enough to: {query}")
    return result


def search(store: Store, session_id: str, query: str, mode: str = "semantic", *,
           limit: int = DEFAULT_LIMIT, window: TimeWindow | None = None,
           progress: Progress | None = None, budget: float | None = None,
           notice: Notice | None = None, match: str | None = None) -> SearchResult:
    """`agenvoy search`: dispatch on the mode, the stable entry point (budget/notice: see
    catchup.catch_up; match: keyword only, see keyword_search)."""
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    if mode == "keyword":
        return keyword_search(store, session_id, query, limit=limit, window=window,
                              match=match)
    return vector_search(store, session_id, query, mode, limit=limit, window=window,
                         progress=progress, budget=budget, notice=notice)
