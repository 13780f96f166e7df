"""The `Corpus` interface of the one retrieval pipeline (search/pipeline.py), and its
relevance stage for a corpus other than a session's messages: notes, RAG chunks.

A corpus hands its vector
ranking as `Unit`s (its key, the query's similarity, the text its vector was made of), and
the same `Relevance` that decides for message search (search/relevance.py: the holder's,
`Memory.relevance`) decides whether any of them is related closely enough. A corpus is not
a session: it has no typical similarity to sample, so the pool goes without one and the
floor compares the query with the shipped background (reference/background.txt), as it
does for a session too small to sample. The top units' index vectors come from the store
where the adapter knows the stored vector was made of exactly that text (tasks, notes),
else they are made again from their texts (the same model, the same text: the same
vector), outside the store lock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agenvoy_cli.models.base import EmbedderError
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.relevance import (
    TOP_HITS,
    Candidate,
    Decision,
    Evidence,
    Pool,
    Relevance,
)
from agenvoy_cli.search.semantic import ATTRIBUTION_CHARS

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store
    from agenvoy_cli.models.base import Embedder
    from agenvoy_cli.search.fusion import Weights


Ranked = list[tuple[Hashable, float]]


@dataclass
class Found:
    """What the pipeline found: keys best first with their scores, and what it noted."""

    mode: str
    ranked: Ranked = field(default_factory=list)
    score_kind: str = "bm25"  # bm25 (keyword), cosine (semantic), rrf (fused)
    match: str | None = None  # keyword: all | any | none; hybrid: any
    notes: list[tuple[str, str]] = field(default_factory=list)  # (code, message)
    unindexed_count: int | None = None  # units without a vector (None: no vectors asked)
    floored: bool = False  # the floor found nothing related by meaning
    near_miss: bool = False  # ... because the query is related only by words it names

    def note(self, code: str, message: str) -> None:
        self.notes.append((code, message))


@dataclass(frozen=True)
class Embedded:
    """The query's vector and the model that made it."""

    vector: Sequence[float]
    model: Any  # models/base.py Embedder


class Embeds(Protocol):
    """What the catch-up stage (search/pipeline.py `embed`) asks of a corpus.

    unit           what one unit is called in the notes ("note", "chunk", "record")
    degrades       True: a failing model or index leaves keyword results, with a warning
                   (`unavailable`); False: the failure is raised
    unindexed_note True: the units a catch-up left without a vector are noted (`unindexed`);
                   False: the corpus says so itself, or not at all
    """

    unit: str
    degrades: bool
    unindexed_note: bool

    def catch_up(self, budget: float | None, found: Found) -> int | None:
        """Embed the units without a vector for at most `budget` seconds; how many are
        left without one (None: this corpus has no vectors now, keyword results only)."""
        ...

    def embedder(self) -> Embedder:
        """The model whose vectors the corpus's index holds."""
        ...

    def unavailable(self, exc: Exception, found: Found) -> None:
        """Say that the vectors failed (a degrading corpus): warn, and note it if it does."""
        ...

    def uncalibrated(self, model_id: str) -> str | None:
        """Why the model's calibration is off for this corpus (models/profiles.py), or None."""
        ...


class HomeModel:
    """The `Embeds` methods that every adapter over the home's own model shares: the
    home's embedder, the keyword fallback's warning and note, the model's calibration.
    An adapter sets `store` and `warn`, and overrides what differs (RAG raises)."""

    store: Store
    warn: Callable[[str], None]

    def embedder(self) -> Embedder:
        from agenvoy_cli.vectors import api as vectors

        return vectors.embedder(self.store)

    def unavailable(self, exc: Exception, found: Found) -> None:
        text = " ".join(str(exc).split())
        why = (text if len(text) <= 300 else text[:299] + "…") or type(exc).__name__
        self.warn(f"agenvoy: warning: semantic matching unavailable ({why}); keyword "
                  "matching only")
        found.note("no_vectors", f"semantic matching unavailable ({why}): keyword results "
                   "only")

    def uncalibrated(self, model_id: str) -> str | None:
        from agenvoy_cli.models.profiles import uncalibrated

        return uncalibrated(model_id)

    def stored_vectors(self, keys: Sequence[Hashable]) -> dict[Hashable, Sequence[float]]:
        return {}  # a unit's vector may be a passage's, not its embedded text's: embed again


class Corpus(Embeds, Protocol):
    """What the whole pipeline asks of a corpus (one adapter object per search: it may
    remember what a ranking told it, such as the passage a note matched by, for its hits).

    neighbour   the share of a fused score passed to the units keyed one below and above
                (search/fusion.py; 0: none)
    """

    neighbour: float

    def term_count(self, query: Query) -> int:
        """How many terms keyword mode's rule counts (0: nothing searchable)."""
        ...

    def keyword(self, query: Query, n: int, every: bool) -> list[tuple[Hashable, float]]:
        """(key, -bm25) best first: units holding every term (`every`) or any content term."""
        ...

    def unembedded(self) -> set[Hashable]:
        """The units without a vector yet (semantic mode finds them by keyword)."""
        ...

    def vectors(self, vector: Sequence[float], n: int, found: Found
                ) -> list[tuple[Hashable, float]]:
        """(key, cosine) best first, one per live unit."""
        ...

    def embedded_texts(self, keys: Sequence[Hashable]) -> dict[Hashable, str]:
        """The text each unit's vector was made of (the floor embeds it again)."""
        ...

    def indexed_text(self, key: Hashable) -> str | None:
        """The text the full-text index holds for a unit (None: gone)."""
        ...

    def stored_vectors(self, keys: Sequence[Hashable]) -> dict[Hashable, Sequence[float]]:
        """The index vectors of those units whose stored vector was made of exactly
        their `embedded_texts` by the index model (the floor then embeds only the rest)."""
        ...

    def weights(self, query: Query, kw: Sequence[tuple[Hashable, float]],
                vec: Sequence[tuple[Hashable, float]]) -> Weights:
        """The fusion's weights for this query."""
        ...

    def relevance(self) -> Relevance:
        """The home's Relevance, when the caller gave none."""
        ...


# The two models' summed lift a corpus's best units must reach (search/relevance.py
# Evidence.score). Message search's THRESHOLD (0.1489) is fitted on sessions; against the
# shipped background a note or chunk of facts lifts any factual question: on the tune split
# of bench/corpus_floor_data (bench/corpus_floor.py, 24 notes, semantic) the unrelated
# questions scored 0.045-0.339 and 20 of 29 cleared 0.1489, while every related question
# was kept by a shared rare word (no lift weighed). Chosen: the first round value above
# every tune unrelated score. A related question sharing no rare word with its note needs
# this lift (held-out: docs/benchmarks.md).
THRESHOLD: float | None = 0.35


def evidence_score(decision: Decision) -> float | None:
    """The two models' summed lift the decision weighed, None when another rule decided
    (a shared rare word, the margin, no floor)."""
    ev = decision.evidence
    if isinstance(ev, Evidence) and not ev.shared and ev.own.usable() and ev.second.usable():
        return ev.score()
    return None


# A rare word shared with a top unit decides alone for messages (search/relevance.py);
# in a corpus of facts one incidental word (a general-knowledge question's "walk" in a note
# on walking the dog) is no evidence: when the top units hold less than fusion.LOW_COVERAGE of
# the query's content words (fusion.incidental), the models' lift decides instead
# (THRESHOLD). Fitted on the tune split of bench/corpus_floor_data (docs/benchmarks.md).
INCIDENTAL_WORDS_DECIDE = True  # tune: related 24/24, unrelated 29/29, both corpora


def _by_words_or_lift(relevance: Relevance, query: Query, pool: Pool,
                      top: Sequence[Unit]) -> Decision:
    decision = relevance.decide(query, pool)
    if decision.rule != "shared rare word" or not INCIDENTAL_WORDS_DECIDE:
        return decision
    from dataclasses import replace

    from agenvoy_cli.home import fts
    from agenvoy_cli.search.fusion import coverage, incidental
    from agenvoy_cli.search.relevance import SHARED_TOP

    wanted = fts.term_tokens(query.content)
    best = max((coverage(wanted, fts.term_tokens(u.text)) for u in top[:SHARED_TOP]),
               default=0.0)
    if not incidental(query, best):
        return decision
    # the same text and vectors, no words: the lift decides
    return relevance.decide(replace(query, content_terms=(), _vectors=query._vectors), pool)


# A near miss (#50 item 4): a question naming a word of a note ("Taipei", "Star Alliance")
# that asks what the note does not say ("Who founded the Star Alliance?"). Its named words
# are the whole of its relation: the question as asked is further from the note than the
# words it names alone; a related question's other words ("Which airport does the user fly
# from?") bring it as close or closer. A search whose best unit's index-model cosine to the
# question falls below its cosine to the named words by more than NEAR_MISS (`drift`) is a
# near miss: nothing (None: not checked). Fitted on the tune split of bench/corpus_floor_data
# (tune3.json's near misses; README "Fourth pass"): the highest cut that keeps >= 95 % of
# the tune related questions. Masking the named words out and weighing what remains was
# tried first: it does not part them (a related question's rest is often bare, "Is it fine
# to ... late on ...?").
NEAR_MISS: float | None = -0.0274  # tune: related 58/61, unrelated -> nothing 68/78, both
# corpora (semantic, full home; bench/corpus_floor.py fit-near-miss)


def held(text: str, tokens: Iterable[str]) -> set[str]:
    """The tokens a text holds as the full-text index matches them (its tokenizer: porter
    stems, CJK bigrams), through a one-row in-memory index."""
    import sqlite3

    from agenvoy_cli.home import fts
    from agenvoy_cli.home.schema import FTS_TOKENIZE

    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize='{FTS_TOKENIZE}')")
        conn.execute("INSERT INTO t(x) VALUES (?)", (fts.index_text(text),))
        return {t for t in tokens
                if conn.execute("SELECT 1 FROM t WHERE t MATCH ?", (fts.quote(t),)).fetchone()}
    finally:
        conn.close()


def named(query: Query, text: str) -> str | None:
    """The question's words that the unit's text holds (as the index matches them), in
    order; None when it holds none or all of its content words, or for a CJK query (its
    words are not spaced)."""
    from agenvoy_cli.home import fts
    from agenvoy_cli.search.fusion import CJK_QUERY

    if query.cjk_share >= CJK_QUERY or not query.tokens:
        return None
    shared = held(text, query.tokens)
    if not shared or shared >= query.tokens:
        return None
    return " ".join(w for w in query.text.split() if set(fts.term_tokens(w)) & shared)


def drift(query: Query, best: Unit, vector: Sequence[float] | None, model: Embedder
          ) -> float | None:
    """How much closer the best unit (its index vector) is to the question than to the
    words of it that the unit holds (negative: the question drifts away from the unit);
    None when there is nothing to weigh. One short query embedded; a failing model:
    None (the decision stands)."""
    from agenvoy_cli.search.semantic import cosines

    names = named(query, best.text)
    if names is None or vector is None:
        return None
    try:
        alone = model.embed_query(names)
    except EmbedderError:
        return None
    return best.similarity - cosines([vector], alone)[0]


@dataclass(frozen=True)
class Unit:
    """One unit a corpus's vector ranking found: a note (its id), a RAG chunk (its id)."""

    key: Hashable
    similarity: float  # the query's cosine similarity by the index model
    text: str  # the text its index vector was made of


def decide(relevance: Relevance, query: Query, ranked: Sequence[Unit], model: Embedder,
           query_vector: Sequence[float],
           stored: dict[Hashable, Sequence[float]] | None = None,
           near_misses: bool = False) -> Decision:
    """Whether the units of a vector ranking (best first) are related closely enough to
    the query (all of them or none, as for messages). Outside the store lock: it may
    embed the top units' texts; `stored` gives the index vectors it need not make again;
    `near_misses`: a question related only by the words it names is not (NEAR_MISS).
    A model that fails: every unit is kept (a search never fails for its floor)."""
    if not ranked:
        return Decision((), "none")
    top = list(ranked[:TOP_HITS])
    needs = relevance.needs(model.model_id)
    try:
        vectors = (_top_vectors(model, top, stored or {}) if needs.top or
                   needs.background else [None] * len(top))
    except EmbedderError:
        return Decision(tuple(u.key for u in ranked), "none")
    pool = Pool([Candidate(u.key, u.similarity, u.text[:ATTRIBUTION_CHARS], v)
                 for u, v in zip(top, vectors)],
                background=(), typical=None, query_vector=query_vector,
                model_id=model.model_id)
    decision = _lifted(_by_words_or_lift(relevance, query, pool, top), pool)
    if not decision.related:
        return decision
    if near_misses and _near_miss(query, top[0], vectors[0], model):
        return Decision((), "near miss", decision.evidence, decision.embedded)
    return Decision(tuple(u.key for u in ranked), decision.rule, decision.evidence,
                    decision.embedded)


def _lifted(decision: Decision, pool: Pool) -> Decision:
    """The decision with the corpus's THRESHOLD in place of the rule's, when the models'
    lift decided."""
    score = evidence_score(decision)
    if score is None or THRESHOLD is None:
        return decision
    keys = tuple(c.key for c in pool.ranked) if score >= THRESHOLD else ()
    return Decision(keys, decision.rule, decision.evidence, decision.embedded)


def _near_miss(query: Query, best: Unit, vector: Sequence[float] | None,
               model: Embedder) -> bool:
    if NEAR_MISS is None:
        return False
    moved = drift(query, best, vector, model)
    return moved is not None and moved < NEAR_MISS


def _top_vectors(model: Embedder, top: Sequence[Unit],
                 stored: dict[Hashable, Sequence[float]]) -> list[Sequence[float]]:
    """The top units' index vectors: the stored ones, the rest embedded from their texts
    (the same model, the same text: the same vector)."""
    missing = [u for u in top if u.key not in stored]
    made = dict(zip((u.key for u in missing),
                    model.embed_documents([u.text for u in missing]) if missing else []))
    return [stored[u.key] if u.key in stored else made[u.key] for u in top]
