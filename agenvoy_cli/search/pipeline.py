"""One retrieval pipeline over a `Corpus` (#50): notes, RAG chunks and error records.

A corpus is an adapter (search/corpus.py `Corpus`; notes/corpus.py, rag/corpus.py,
errormem/corpus.py) that knows its units: how they are keyed, how its full-text index
ranks them, where their vectors are, which text each vector was made of. The stages are
written once, here, and serve every corpus:

    keyword   the every-term / any-term rule (search/query.py default_match): a short
              keyword query asks every term, unless none has them all; a longer one or a
              question ranks any term (`keyword`); an any-term ranking whose best unit
              holds only an incidental word or two of the query gives nothing
              (`keyword_floor`)
    catch-up  the units without a vector embedded for at most the budget, the query
              embedded once; a corpus that degrades (notes, errors) goes on by keyword
              when the model or index fails, one that does not (RAG) raises (`embed`)
    vectors   the corpus's nearest units (`Corpus.vectors`)
    floor     the holder's Relevance (search/corpus.py `decide`): nothing by meaning when
              nothing is related closely enough; the keyword matches then stay only when
              they hold the query (search/fusion.py `incidental`), and none stays for
              a near miss (a question related only by the words it names, search/corpus.py
              `drift`; notes and RAG) (`floor`)
    window    a time window (`within`): the units whose time is outside it are left out
              of every ranking (a `Dated` corpus: notes by update, RAG chunks by their
              file's change, tasks by their end)
    fusion    semantic: the cosine ranking (the units without a vector yet by keyword);
              hybrid: reciprocal-rank fusion of the two, each `score_kind` saying which
              scale the score is on (`order`)

`search` runs them in order and returns a `Found`: the ranked keys, the score kind, the
match, the notes (code, message) and the unembedded count, which the corpus's own result
class turns into its hits (its JSON shape kept). Message search keeps its own path
(search/engine.py), which uses the same Query, Relevance and fusion (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from agenvoy_cli.search import corpus as relevance_stage
from agenvoy_cli.search.corpus import Embedded, Found, Ranked
from agenvoy_cli.search.query import Query
from agenvoy_cli.search.relevance import TOP_HITS

if TYPE_CHECKING:
    from agenvoy_cli.search.corpus import Corpus, Embeds
    from agenvoy_cli.search.relevance import Relevance

MODES = ("hybrid", "keyword", "semantic")
POOL = 64  # units per ranking before fusion


# --------------------------------------------------------------------------- keyword


def keyword(corpus: Corpus, query: Query, n: int, want: str | None, found: Found) -> Ranked:
    """Keyword mode: every term for a short keyword query (any term when no unit has them
    all, with a note), any term for a longer one or a question; `want` forces one."""
    count = corpus.term_count(query)
    if not count:
        found.match = "none"
        found.note("nothing_searchable", f"nothing searchable in: {query.text}")
        return []
    how = want or query.match_for(count)
    ranked = corpus.keyword(query, n, every=True)
    found.match = "all"
    if how == "any" or (not ranked and want is None and count > 1):
        seen = {k for k, _ in ranked}
        ranked = (ranked + [(k, s) for k, s in corpus.keyword(query, n, every=False)
                            if k not in seen])[:n]
        found.match = "any"
        if how == "all" and ranked:
            found.note("any_term", f"no {corpus.unit} has every term of the query; showing "
                       f"{corpus.unit}s with any of them")
        ranked = keyword_floor(corpus, query, ranked, found)
    return ranked


# Keyword mode's floor (#50 item 4): a question (or a long text) ranked by any term gets
# nothing when its best unit holds less than fusion.LOW_COVERAGE of the query's content
# tokens (as its index matches them: stemmed) and none of them in its title line (a note's
# name and heading, a chunk's first line when short). A general-knowledge question shares
# one everyday word with some fact ("time", "year", "release", "ingredient"); a user's
# paraphrase shares a larger part of its words, or the note's subject ("backups", "rent").
# Chosen on the tune split of bench/corpus_floor_data (bench/corpus_floor_data/README.md,
# "Third pass"); message search's constant, not refitted.
KEYWORD_FLOOR = True
TITLE_CHARS = 80  # a longer first line is a paragraph, not a title
KEYWORD_TOP = 1  # the best units the floor looks at
KEYWORD_COVERAGE = 0.34  # fusion.LOW_COVERAGE
ONE_CHAR_OUT = True  # tune: related 56 -> 57/61, general unrelated 37/39 kept, both corpora


def keyword_floor(corpus: Corpus, query: Query, kw: Ranked, found: Found) -> Ranked:
    """The any-term ranking, or nothing when none of its best KEYWORD_TOP units holds more
    than an incidental word or two of the query (not for CJK queries: their bigram
    coverage was not measured)."""
    from agenvoy_cli.search.fusion import CJK_QUERY

    tokens = frozenset(t for t in query.tokens if len(t) > 1 or not ONE_CHAR_OUT)
    if not KEYWORD_FLOOR or not kw or not tokens or query.cjk_share >= CJK_QUERY:
        return kw
    texts = [corpus.indexed_text(k) for k, _ in kw[:KEYWORD_TOP]]
    if texts[0] is None or any(_holds(text, tokens) for text in texts if text is not None):
        return kw
    found.floored = True
    found.note("not_related", f"no {corpus.unit} is related closely enough to: {query.text}")
    return []


def _holds(text: str, tokens: frozenset[str]) -> bool:
    """Whether a unit's indexed text holds KEYWORD_COVERAGE of the tokens, or one of them in
    its title line."""
    held = relevance_stage.held
    first = text.lstrip().split("\n", 1)[0]
    return (len(held(text, tokens)) / len(tokens) >= KEYWORD_COVERAGE
            or (len(first) <= TITLE_CHARS and bool(held(first, tokens))))


# --------------------------------------------------------------------------- catch-up


def embed(corpus: Embeds, query: Query, budget: float | None, found: Found
          ) -> Embedded | None:
    """The units without a vector embedded (for at most `budget` seconds), then the query;
    None when the corpus has no vectors or (a degrading corpus) the model fails."""
    embedded = _embedded(corpus, query, budget, found)
    if found.unindexed_count and corpus.unindexed_note:
        found.note("unindexed", f"{found.unindexed_count} {corpus.unit}(s) have no vector "
                   "yet: found by keyword only")
    return embedded


def _embedded(corpus: Embeds, query: Query, budget: float | None, found: Found
              ) -> Embedded | None:
    try:
        found.unindexed_count = 0
        found.unindexed_count = corpus.catch_up(budget, found)
        if found.unindexed_count is None:
            return None
        model = corpus.embedder()
        vector = query.vector(model)  # outside the lock
    except Exception as exc:  # noqa: BLE001 - a degrading corpus never fails for its vectors
        if not corpus.degrades:
            raise
        corpus.unavailable(exc, found)
        return None
    if (why := corpus.uncalibrated(model.model_id)) is not None:
        found.note("uncalibrated", why)
    return Embedded(vector, model)


# --------------------------------------------------------------------------- floor


def floor(corpus: Corpus, relevance: Relevance, query: Query, vec: Ranked,
          embedded: Embedded, found: Found) -> Ranked:
    """The vector ranking, or nothing when the holder's Relevance finds none of it related
    closely enough (outside the lock: it may embed)."""
    if not vec:
        return vec
    texts = corpus.embedded_texts([k for k, _ in vec[:TOP_HITS]])
    units = [relevance_stage.Unit(k, s, texts[k]) for k, s in vec if k in texts]
    decision = relevance_stage.decide(relevance, query, units, embedded.model,
                                      embedded.vector,
                                      corpus.stored_vectors([u.key for u in units[:TOP_HITS]]),
                                      getattr(corpus, "near_misses", False))
    if decision.related:
        return vec
    found.floored = True
    found.near_miss = decision.rule == "near miss"
    found.note("not_related", f"no {corpus.unit} is related closely enough to: {query.text}")
    return []


def holds_the_query(corpus: Corpus, query: Query, kw: Ranked) -> Ranked:
    """The keyword ranking, or nothing when its best match holds only a small share of the
    query's words (message search's rule, search/fusion.py `incidental`)."""
    from agenvoy_cli.home import fts
    from agenvoy_cli.search.fusion import coverage, incidental

    if not kw:
        return kw
    text = corpus.indexed_text(kw[0][0])
    if text is None or not query.content_terms:
        return []
    cov = coverage(fts.term_tokens(query.content), fts.term_tokens(text))
    return [] if incidental(query, cov) else kw


# --------------------------------------------------------------------------- fusion


def order(corpus: Corpus, query: Query, kw: Ranked, vec: Ranked, limit: int,
          found: Found) -> Ranked:
    """One ranking of the two: the vectors alone (cosine), the words alone (bm25), else
    their reciprocal-rank fusion (rrf) with the corpus's weights."""
    from agenvoy_cli.search.fusion import Ranking, fuse

    if not kw:
        found.score_kind = "cosine" if vec else found.score_kind
        return vec[:limit]
    if not vec:
        found.score_kind = "bm25"
        return kw[:limit]
    w = corpus.weights(query, kw, vec)
    found.score_kind = "rrf"
    fused = fuse([Ranking("keyword", kw, w.keyword),  # type: ignore[arg-type]
                  Ranking("vector", vec, w.vector)],  # type: ignore[arg-type]
                 neighbour=corpus.neighbour)
    return list(fused[:limit])


# --------------------------------------------------------------------------- time window


class Dated(Protocol):
    """A corpus whose units have a time (a note's update, a document's change, a task's
    end): what the time-window stage asks of it."""

    def within(self, lo: int | None, hi: int | None) -> tuple[set[Hashable], int]:
        """The units whose time (UTC ns) is in [lo, hi) (None: open), and how many units
        the corpus has in all."""
        ...


class Windowed:
    """A corpus seen through a time window: each of its rankings keeps the units inside
    the window, asked that much deeper (the units outside it) so that a window never
    leaves fewer than it could; a vector ranking at most WINDOW_POOL deep."""

    def __init__(self, corpus: Corpus, keep: set[Hashable], outside: int) -> None:
        self.corpus = corpus
        self.keep = keep
        self.outside = outside

    def __getattr__(self, name: str) -> Any:
        return getattr(self.corpus, name)

    def keyword(self, query: Query, n: int, every: bool) -> Ranked:
        ranked = self.corpus.keyword(query, n + self.outside, every)
        return [(k, s) for k, s in ranked if k in self.keep][:n]

    def vectors(self, vector: Sequence[float], n: int, found: Found) -> Ranked:
        ranked = self.corpus.vectors(vector, min(n + self.outside, WINDOW_POOL), found)
        return [(k, s) for k, s in ranked if k in self.keep][:n]

    def unembedded(self) -> set[Hashable]:
        return self.corpus.unembedded() & self.keep


WINDOW_POOL = 2_000  # a windowed vector ranking's depth at most (one exact query's worth)


def within(corpus: Corpus, lo: int | None, hi: int | None) -> Corpus:
    """The corpus as the stages see it inside the time window [lo, hi) (UTC ns, None:
    open): itself when the window is open, else its units in the window only."""
    if lo is None and hi is None:
        return corpus
    keep, total = cast("Dated", corpus).within(lo, hi)
    return cast("Corpus", Windowed(corpus, keep, total - len(keep)))


def outside(corpus: Corpus) -> int:
    """How many units a time window leaves out (0: no window)."""
    return corpus.outside if isinstance(corpus, Windowed) else 0


def inside(corpus: Corpus, ranked: Ranked, limit: int) -> Ranked:
    """The fused ranking's units inside the time window, at most `limit`: fusion's
    neighbour share (RAG) may bring in a unit no windowed ranking had."""
    if isinstance(corpus, Windowed):
        ranked = [(k, s) for k, s in ranked if k in corpus.keep]
    return ranked[:limit]


# --------------------------------------------------------------------------- the run


def _keyword_side(corpus: Corpus, query: Query, mode: str, embedded: Embedded | None,
                  found: Found) -> Ranked:
    """The any-term ranking fused beside the vectors: hybrid's, or (semantic) the units
    without a vector yet, or everything when there are no vectors."""
    unembedded = corpus.unembedded() if embedded is not None and mode == "semantic" else None
    if mode == "semantic" and embedded is not None and not unembedded:
        return []
    kw = corpus.keyword(query, POOL, every=False) if query.content_terms else []
    found.match = "any"
    if unembedded is not None:
        kw = [(k, s) for k, s in kw if k in unembedded]
    return kw


def search(corpus: Corpus, query: Query, mode: str, *, limit: int, match: str | None = None,
           budget: float | None = None, relevance: Relevance | None = None,
           window: tuple[int | None, int | None] = (None, None)) -> Found:
    """The corpus's units related to the query, best first, by keyword, semantic or hybrid;
    `window`: only units whose time is in [lo, hi) (UTC ns; the corpus is `Dated`)."""
    found = Found(mode)
    corpus = within(corpus, *window)
    if mode == "keyword":
        found.ranked = keyword(corpus, query, limit, match, found)
        return found
    embedded = embed(corpus, query, budget, found)
    vec: Ranked = []
    if embedded is not None:
        vec = corpus.vectors(embedded.vector, POOL, found)
        vec = floor(corpus, relevance or corpus.relevance(), query, vec, embedded, found)
    kw = _keyword_side(corpus, query, mode, embedded, found)
    if found.floored:  # a near miss holds the words it names: its keyword matches go too
        kw = [] if found.near_miss else holds_the_query(corpus, query, kw)
    found.ranked = inside(corpus, order(corpus, query, kw, vec, limit + outside(corpus),
                                        found), limit)
    return found
