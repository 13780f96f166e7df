"""Searching a session's memory (SPEC §2): the entry point `agenvoy search` calls.

keyword   one BM25 ranking over the whole session from our FTS5 index (search/keyword.py);
          each hit labelled archive (trimmed out of history.json) or recent.
semantic  cosine similarity over the recent part (search/semantic.py), leaving out the
          context window (the last ``max_history_messages``); hits attributed to the
          message that matches; nothing when nothing is related closely enough.
hybrid    the keyword ranking over the whole history fused with the vector ranking
          (search/fusion.py), weights from the query. Window exclusion as in semantic.
Every hit of semantic/hybrid is expanded to 2 messages before and 1 after; touching windows
merge into segments (search/results.py); results are best first, each hit with its rank.

A semantic or hybrid search is a pipeline of stages, each a function below, the query parsed
once (search/query.py) and handed to each:

  catch up   embed what the vector index lacks, within the budget (search/catchup.py)
  gather     under the store lock: the rankings, texts, kept vectors, and what the
             Relevance needs (search/candidates.py)
  attribute  each top hit against the message before it (search/semantic.py)
  relevance  whether anything is related closely enough (search/relevance.py: the Relevance
             the caller holds, or the home's default)
  rank       the built-in model: the pool scored by the fitted ranking (search/ranking.py),
             then attributed again; other models:
  fuse       hybrid: the rankings fused, weights from the query (search/fusion.py)
  credit     a hit that owes its place to the hit before it is that hit's context
             (search/semantic.py credit)
  expand     each hit with its neighbours, into segments (search/scope.py, results.py)

The vector index is derived (SPEC invariant 3): the catch-up keeps it up to date before every
semantic/hybrid search, within the search's time budget: messages it had no time to embed are
still ranked by keyword (``unindexed_count`` says how many).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from agenvoy_cli.errors import BadInput
from agenvoy_cli.search import fusion, semantic
from agenvoy_cli.search.catchup import TEXT_CHARS, CatchUp, Notice, Pacer, Progress, catch_up
from agenvoy_cli.search.defaults import DEFAULT_LIMIT, MODES
from agenvoy_cli.search.keyword import keyword_ranking, unarchived_ranking
from agenvoy_cli.search.query import MATCHES, Query, about_the_user
from agenvoy_cli.search.results import SCORE_KINDS, SearchResult, note_uncalibrated
from agenvoy_cli.search.scope import Scope, fill, note_unarchived, scope_of, unarchived
from agenvoy_cli.search.timewindow import TimeWindow

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.search.candidates import Candidates, Wanted
    from agenvoy_cli.search.relevance import Decision, Relevance

OTHER_SCRIPT_SAMPLE = 50  # recent messages whose script a failed keyword search compares
# What the catch-up keeps back of the budget (at most catchup.RESERVE_SHARE of it) for
# attribution: the own texts of ATTRIBUTION_TOP hits, the best-ranked pairs' first
ATTRIBUTION_RESERVE = semantic.ATTRIBUTION_TOP * (semantic.ATTRIBUTION_CHARS + TEXT_CHARS)

# The vector pipeline's modules (candidates, relevance, the vector index's) are imported by the
# functions that run it: at the top they cost every keyword search ~12 ms CPU (216 vs 204 ms
# a process, 11 interleaved runs), which append, context and keyword search do not pay.


# ----------------------------------------------------------------------------- keyword


def keyword_search(store: Store, session_id: str, query: Query, *, limit: int = DEFAULT_LIMIT,
                   window: TimeWindow | None = None, match: str | None = None
                   ) -> SearchResult:
    """One BM25 ranking over the whole session: a short query's every-term matches only
    (any term when none has every term: then a note says so), a long one's any-term
    ranking; `match` ("all" | "any") forces either."""
    if match is not None and match not in MATCHES:
        raise BadInput(f"unknown match {match!r} (expected {', '.join(MATCHES)})")
    window = window or TimeWindow()
    result = SearchResult(session_id, query.text, "keyword", window=window)
    with store.read_lock():
        store.require(session_id)
        scope = scope_of(store, session_id, exclude_window=False)
        if not query.searchable:
            result.match = "none"
            result.note("nothing_searchable", f"nothing searchable in: {query.text}")
            return result
        want = match or query.default_match
        missing = unarchived(store.db_readonly(), session_id, scope)
        note_unarchived(result, missing)
        hits, result.match = _keyword_hits(store, session_id, query, scope, limit, window,
                                           want, missing)
        if not hits and want == "all" and match is None and len(query.tokens) > 1:
            hits, result.match = _keyword_hits(store, session_id, query, scope, limit, window,
                                               "any", missing)
            if hits:
                result.note("any_term", "no message has every term of the query; showing "
                            "messages with any of them")
            else:
                result.match = "all"
        if not hits:
            _note_other_script(result, query, scope)
    fill(result, store, session_id, scope, hits, query, expand_lo=None)
    return result


def _note_other_script(result: SearchResult, query: Query, scope: Scope) -> None:
    """Nothing found, and the query is in another script than the recent memories (a
    Chinese question about English messages: no word can match): say so, and that
    semantic search matches across languages (issue #40)."""
    texts = [m.body for m in scope.recent[-OTHER_SCRIPT_SAMPLE:] if m.body.strip()]
    if fusion.scripts_differ(query, texts):
        result.note("other_script", f"no matches with keyword: {query.text} (the query and "
                    "the memories are written in different scripts, so no word can match; "
                    "`--mode semantic` matches across languages)")


def _keyword_hits(store: Store, session_id: str, query: Query, scope: Scope, limit: int,
                  window: TimeWindow, how: str, missing: int
                  ) -> tuple[list[tuple[int, float]], str]:
    """The archive's ranking, then the messages SQLite lacks; (hits, the match true of
    them). Hold the read lock."""
    conn = store.db_readonly()
    hits, got = ([], how) if conn is None else keyword_ranking(
        conn, session_id, query, limit, window=window, match=how)
    late = unarchived_ranking(scope.recent[-missing:], query, limit, window,
                              match=how) if missing else []
    return (hits + late)[:limit], got


# ----------------------------------------------------------------------------- vectors


def vector_search(store: Store, session_id: str, query: Query, mode: str = "semantic", *,
                  limit: int = DEFAULT_LIMIT, window: TimeWindow | None = None,
                  progress: Progress | None = None, budget: float | None = None,
                  notice: Notice | None = None, relevance: Relevance | None = None
                  ) -> SearchResult:
    """Semantic or hybrid search as a user sees it: context window left out, hits
    attributed, nothing when nothing is related closely enough (`relevance`: the holder's;
    None: the home's default), fused (hybrid), expanded 2 before / 1 after. The catch-up
    before it embeds for at most `budget` seconds (None: everything); what it left is
    ranked by keyword."""
    from agenvoy_cli.search import candidates
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.attribution import OWN_TEXT

    window = window or TimeWindow()
    with store.read_lock():
        store.require(session_id)
    result = SearchResult(session_id, query.text, mode, window=window,
                          match="any" if mode == "hybrid" else None)
    emb = vectors.embedder(store)
    relevance = relevance or _default_relevance(store)
    needs = relevance.needs(emb.model_id)  # a bad setting fails before anything is embedded
    # the query first: it loads the model, so that the budget is spent on embedding only
    vector = query.vector(emb)  # outside the lock
    # one budget for the catch-up and attribution's own-text vectors (search/catchup.py)
    pacer = Pacer(budget, reserve=ATTRIBUTION_RESERVE, floor=needs.kept_by)
    caught = catch_up(store, session_id, budget, progress=progress, notice=notice,
                      pacer=pacer)
    result.indexed, result.unindexed_count = caught.indexed, len(caught.unindexed)
    wanted = _wanted(mode, query, emb.model_id)
    with store.write_lock():
        scope = scope_of(store, session_id, exclude_window=True)
        cand = candidates.gather(store, session_id, query, mode, scope, window, vector,
                                 caught.unindexed, needs, max(candidates.POOL, limit), wanted)
        note_unarchived(result, unarchived(store.db_readonly(), session_id, scope))
    _note_left_out(result, caught, cand.unsearchable, budget)
    lo = _searched(result, scope, mode)
    if not result.searchable_count:
        return _all_in_window(store, session_id, query, mode, result, limit, window)
    state = semantic.Attribution(about_user=about_the_user(query.text), roles=cand.roles,
                                 index=dict(cand.vector),
                                 typical=cand.background.typical)
    own_text = _own_text_embedder(emb, cand, pacer)
    vec = semantic.attribute(cand.vector, vector, own_text, cand.texts, state)
    # relevance over the hits as attribution left them (bench/floor_fit.py measured that)
    decision = _decide(relevance, query, cand, vec, vector, emb.model_id, pacer)
    _note_second(result, pacer, budget, "floor")
    note_uncalibrated(result, emb.model_id, store.settings.search_floor is not None)
    _keep(store, session_id, cand.texts, decision.embedded, needs.kept)
    related = set(decision.related)
    floored = bool(vec) and not related
    vec = [(seq, score) for seq, score in vec if seq in related]
    ranked = _order(store, session_id, mode, query, cand, vec, decision, floored, result,
                    partial(semantic.attribute, vector=vector, embedder=own_text,
                            bodies=cand.texts, state=state), window, scope, pacer)
    _note_second(result, pacer, budget, "ranking")
    if vec:  # a hit that owes its place to the hit before it is that hit's context
        ranked = semantic.credit(ranked, vector, own_text, cand.texts, state)
    _keep(store, session_id, cand.texts, own_text.new, OWN_TEXT)
    _note_unchecked(result, len(own_text.skipped), budget)
    fill(result, store, session_id, scope, ranked[:limit], query, expand_lo=lo)
    if floored and not result.results:
        result.note("not_related", f"no message is related closely enough to: {query.text}")
    return result


def _order(store: Store, session_id: str, mode: str, query: Query, cand: Candidates,
           vec: list[tuple[int, float]], decision: Decision, floored: bool,
           result: SearchResult, attribute: Callable[[list[tuple[int, float]]],
                                                     list[tuple[int, float]]],
           window: TimeWindow, scope: Scope, pacer: Pacer | None = None
           ) -> list[tuple[int, float]]:
    """The hits in order: the fitted ranking where it applies, else fusion, attributed.
    Nothing when the floor found nothing related by meaning and the keyword matches share
    only a word or two of the query (fusion.incidental: an unrelated question's "body").
    Hybrid without keyword evidence (fusion.keyword_evidence) is ranked as semantic."""
    if floored and fusion.incidental(query, cand.coverage):
        return []
    if mode == "hybrid" and not fusion.keyword_evidence(
            query, bool(cand.keyword), fusion.scripts_differ(query, _memories(cand, vec)),
            cand.coverage):
        mode = "semantic"
        result.score_kind = SCORE_KINDS[mode]
    fitted = _rank(store, session_id, mode, query, cand, vec, decision, pacer) if vec \
        else None
    if fitted is not None:
        result.score_kind = "fitted"
        return attribute(fitted)
    ranked = _fuse(mode, query, cand, vec, window, scope)
    if vec and mode == "hybrid":  # hits that came by vectors: keep them attributed
        return attribute(ranked)
    return ranked


def _all_in_window(store: Store, session_id: str, query: Query, mode: str,
                   result: SearchResult, limit: int, window: TimeWindow) -> SearchResult:
    """Every message is in the context window: semantic says so and answers nothing (as
    upstream); hybrid answers at least what keyword answers (issue #40): the keyword
    matches among them (any term), said to be in the window."""
    total = result.message_count
    found = keyword_search(store, session_id, query, limit=limit, window=window,
                           match="any") if mode == "hybrid" else None
    if found is None and mode == "semantic":  # a newcomer's first search: say what answers
        result.note("context_window", f"all {total} messages are in the context window, "
                    "which semantic search leaves out (the agent sees them already); mode "
                    "hybrid or keyword searches them (`--mode hybrid`, `--mode keyword`)")
        return result
    if found is None or not found.results:
        result.note("context_window", f"all {total} messages are in the context window: "
                    "nothing else to search")
        return result
    result.results, result.score_kind = found.results, "bm25"
    result.note("context_window", f"all {total} messages are in the context window (the "
                "agent sees them already); these are its keyword matches")
    return result


def _default_relevance(store: Store) -> Relevance:
    """The home's Relevance (search/relevance.py choose), the store holder's models."""
    from agenvoy_cli.search.relevance import choose
    from agenvoy_cli.vectors.context import of

    return choose(store.settings, of(store).models)


def _note_left_out(result: SearchResult, caught: CatchUp, unsearchable: int,
                   budget: float | None) -> None:
    """Notes on what the vector ranking could not see: messages the catch-up left without a
    vector, vectors an inconsistent index left out."""
    result.unsearchable_count = unsearchable
    if caught.unindexed:
        spent = f"the {budget:g} s budget for embedding was spent: " if budget else ""
        result.note("budget_spent" if spent else "unindexed",
                    f"{spent}{len(caught.unindexed)} message(s) are not embedded yet and were "
                    f"searched by keyword only; `agenvoy backfill --vectors {result.session_id}` "
                    "embeds them now, a running `agenvoy mcp` server keeps them embedded "
                    "ahead of searches")
    if unsearchable:
        result.note("unsearchable", f"{unsearchable} vector(s) of an inconsistent index "
                    "were left out; `agenvoy doctor --repair` rebuilds it")


def _searched(result: SearchResult, scope: Scope, mode: str) -> int:
    """Count what the search could find (searchable_count, message_count); the lowest place
    a hit is expanded to."""
    lo = scope.start if mode == "semantic" else 0
    result.message_count = len(scope.recent) if mode == "semantic" else scope.next_seq
    result.searchable_count = max(0, (scope.cutoff if scope.cutoff is not None
                                      else scope.next_seq) - lo)
    return lo


def _own_text_embedder(emb: Any, cand: Candidates, pacer: Pacer) -> Any:
    """The embedder attribution embeds message texts with: texts whose vector is kept cost
    nothing (vectors/attribution.py); the others are embedded within what is left of the
    search's budget (`pacer`: the catch-up kept ATTRIBUTION_RESERVE back for them). The
    stored index vectors cannot serve: they embed each message with the end of the one
    before it (catchup.doc_text), and attribution compares the texts alone."""
    from agenvoy_cli.vectors.attribution import KeptEmbedder

    cut = semantic.ATTRIBUTION_CHARS
    return KeptEmbedder(emb, {cand.texts[s][:cut]: v for s, v in cand.text_vectors.items()
                              if s in cand.texts}, pacer)


# What a stage did when its second model had no time for its texts (catchup.Pacer.paced)
SECOND_SKIPPED = {
    "floor": "the relevance floor's second model had no time for {} message text(s), so the "
             "index model's measured margin decided alone what is related",
    "ranking": "the fitted ranking's second model had no time for {} message text(s), so "
               "the hits are ranked by similarity and keywords (fusion)"}


def _note_second(result: SearchResult, pacer: Pacer, budget: float | None, stage: str
                 ) -> None:
    """Say that a stage's second model had no time for its texts within the budget."""
    if stage == "floor":
        pacer.floor_done = True  # what the stages before kept back for it is free now
    if pacer.skipped.get(stage):
        _note_budget(result, budget, SECOND_SKIPPED[stage].format(pacer.skipped[stage]))


def _note_unchecked(result: SearchResult, skipped: int, budget: float | None) -> None:
    """Say that attribution had no time for some hits (their own texts were not embedded
    within the budget): added to the note on the budget when there is one."""
    if not skipped:
        return
    _note_budget(result, budget, f"{skipped} message text(s) were not embedded for "
                 "attribution (the hits and the message before each are left in the index's "
                 "order)")


def _note_budget(result: SearchResult, budget: float | None, said: str) -> None:
    """`said` added to the note on the budget (one made when there is none)."""
    for i, note in enumerate(result.notes):
        if note.code in ("budget_spent", "unindexed"):
            result.notes[i] = type(note)(note.code, f"{note.message}; {said}")
            return
    result.note("budget_spent", f"the {budget:g} s budget for embedding was spent: {said}")


def _decide(relevance: Relevance, query: Query, cand: Candidates,
            vec: Sequence[tuple[int, float]], vector: Sequence[float], model_id: str,
            pacer: Pacer | None = None) -> Decision:
    """The Relevance's decision over the ranking as attribution left it."""
    from agenvoy_cli.search.relevance import Candidate, Pool

    ground = cand.background
    texts, vectors = cand.texts, ground.vectors
    ranked = [Candidate(s, score, texts.get(s), vectors.get(s)) for s, score in vec]
    sample = [Candidate(s, sim, texts.get(s), vectors.get(s))
              for s, sim in zip(ground.sample, ground.similarities)]
    cut = semantic.ATTRIBUTION_CHARS
    kept = {texts[s][:cut]: v for s, v in ground.kept.items() if s in texts}
    return relevance.decide(query, Pool(ranked, sample, ground.typical, vector, model_id,
                                        kept, pacer.paced if pacer else None))


def _keep(store: Store, session_id: str, texts: Mapping[int, str],
          made: Mapping[str, Sequence[float]], key: str | None) -> None:
    """Keep the message-text vectors a stage embedded (text -> vector) under `key`, for
    every message of `texts` with that text (vectors/attribution.py)."""
    if not made or key is None:
        return
    from agenvoy_cli.vectors import attribution

    cut = semantic.ATTRIBUTION_CHARS
    new = {s: made[b[:cut]] for s, b in texts.items() if b[:cut] in made}
    with store.write_lock():
        attribution.save(store, session_id, new, key)


def _wanted(mode: str, query: Query, model_id: str) -> Wanted:
    """What the fitted ranking asks the gather stage for (nothing for other models)."""
    from agenvoy_cli.search import candidates, ranking
    from agenvoy_cli.search.relevance import SECOND_KEY

    if not ranking.applies(model_id):
        return candidates.Wanted()
    return candidates.Wanted(True, SECOND_KEY if ranking.needs_second(mode, query) else None)


def _rank(store: Store, session_id: str, mode: str, query: Query, cand: Candidates,
          vec: Sequence[tuple[int, float]], decision: Decision, pacer: Pacer | None = None
          ) -> list[tuple[int, float]] | None:
    """The fitted ranking of the pool (search/ranking.py); None where it does not apply (the
    index model is not the one it was fitted for, no background sample to z-score against,
    messages without a vector, a query in another script than the memories, the second
    model cannot be had): then fusion ranks."""
    from agenvoy_cli.search import ranking

    if (not cand.pool or not cand.similarity or cand.unindexed
            or fusion.scripts_differ(query, _memories(cand, vec))):  # not in the tune data
        return None
    weights = ranking.weights(mode, query, False, cand.coverage, bool(cand.keyword))
    second: dict[int, float] = {}
    second_background: list[float] = []
    if "zu" in weights:
        found = _second_similarities(store, session_id, query, cand, decision, pacer)
        if found is None:
            return None
        second, second_background = found
    signals = ranking.Signals(cand.keyword if mode == "hybrid" else [], cand.similarity,
                              cand.background.similarities, cand.texts, second,
                              second_background, cand.vector, query.text)
    return ranking.rank(cand.pool, signals, weights)


def _second_similarities(store: Store, session_id: str, query: Query, cand: Candidates,
                         decision: Decision, pacer: Pacer | None = None
                         ) -> tuple[dict[int, float], list[float]] | None:
    """The second model's similarity of the query to each pool message's own text and to
    each background message's: texts whose vector is kept (or the Relevance just made)
    cost nothing, the others are embedded and kept (vectors/attribution.py), all within
    what is left of the budget (`pacer`, catchup.Pacer.paced). None when the second model
    cannot be had (or not within the budget)."""
    from agenvoy_cli.models.base import EmbedderError
    from agenvoy_cli.search.relevance import SECOND_KEY, SECOND_SPEC
    from agenvoy_cli.vectors.attribution import KeptEmbedder
    from agenvoy_cli.vectors.context import of

    cut = semantic.ATTRIBUTION_CHARS
    sample = cand.background.sample
    seqs = [s for s in [*cand.pool, *sample] if s in cand.texts]
    kept = {cand.texts[s][:cut]: v for s, v in cand.second_vectors.items() if s in cand.texts}
    kept.update(decision.embedded)
    try:
        inner = of(store).models.get(SECOND_SPEC, store.settings)
        model = KeptEmbedder(pacer.paced(inner, "ranking") if pacer else inner, kept)
        texts = model.embed_documents([cand.texts[s][:cut] for s in seqs])
        sims = semantic.cosines(texts, query.vector(model))
    except EmbedderError:
        return None
    _keep(store, session_id, cand.texts, model.new, SECOND_KEY)
    by_seq = dict(zip(seqs, sims))
    return ({s: by_seq[s] for s in cand.pool if s in by_seq},
            [by_seq[s] for s in sample if s in by_seq])


def _memories(cand: Candidates, vec: Sequence[tuple[int, float]]) -> list[str]:
    """The texts of the top vector hits: what the session is written in (fusion's script
    check)."""
    return [cand.texts[s] for s, _ in vec[:semantic.ATTRIBUTION_TOP] if s in cand.texts]


def _fuse(mode: str, query: Query, cand: Candidates, vec: list[tuple[int, float]],
          window: TimeWindow, scope: Scope) -> list[tuple[int, float]]:
    """Semantic: the vector ranking, the keyword-ranked messages without a vector fused in;
    hybrid: the keyword and vector rankings fused, weights from the query."""
    if mode == "semantic":
        if not cand.unindexed:
            return vec
        return fusion.fuse([fusion.Ranking("keyword", cand.unindexed, fusion.FUSION_W_KEYWORD),
                            fusion.Ranking("vector", vec, fusion.FUSION_W_VECTOR)],
                           neighbour=0.0)
    w = fusion.weights(query, _memories(cand, vec), cand.coverage)
    smooth = fusion.FUSION_NEIGHBOUR if window.open else 0.0  # a neighbour may lie outside
    return fusion.fuse([fusion.Ranking("keyword", cand.keyword, w.keyword),
                        fusion.Ranking("vector", vec, w.vector)],
                       hi=scope.vector_hi, neighbour=smooth)


# ----------------------------------------------------------------------------- the entry


def search(store: Store, session_id: str, query: str | Query, mode: str = "semantic", *,
           limit: int = DEFAULT_LIMIT, window: TimeWindow | None = None,
           progress: Progress | None = None, budget: float | None = None,
           notice: Notice | None = None, match: str | None = None,
           relevance: Relevance | None = None) -> SearchResult:
    """`agenvoy search`: dispatch on the mode, the stable entry point (budget/notice: see
    catchup.catch_up; match: keyword only, see keyword_search; relevance: see
    vector_search)."""
    if mode not in MODES:
        raise BadInput(f"unknown search mode {mode!r} (expected {', '.join(MODES)})")
    if limit < 1:
        raise BadInput("--limit must be at least 1")
    parsed = query if isinstance(query, Query) else Query.parse(query)
    if mode == "keyword":
        return keyword_search(store, session_id, parsed, limit=limit, window=window,
                              match=match)
    return vector_search(store, session_id, parsed, mode, limit=limit, window=window,
                         progress=progress, budget=budget, notice=notice,
                         relevance=relevance)
