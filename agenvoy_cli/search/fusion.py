"""Hybrid fusion: weighted reciprocal ranks, weights from what the query looks like.

score = the sum over the rankings of w / (k + rank) (today two: w_kw / (k + keyword rank) +
w_vec / (k + vector rank); a new signal is one more weighted Ranking), then each message passes
NEIGHBOUR of its score to the messages just before and after it (a turn next to a strong
match is often the answer). k, the base weights and NEIGHBOUR were measured on LoCoMo
(docs/benchmarks.md). The keyword weight then follows the query:
- script mismatch: a Chinese query over English memories (or the reverse) shares no words
  with them, so keyword matches are incidental: keyword weight SCRIPT_MISMATCH;
- coverage: when the best keyword hit holds only a small share of the query's content
  words, its overlap is incidental too (paraphrases): the weight falls with the share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agenvoy_cli.search.language import cjk_share
from agenvoy_cli.search.query import Query, about_the_user

FUSION_K = 5.0
FUSION_W_KEYWORD = 1.0
FUSION_W_VECTOR = 1.0
FUSION_NEIGHBOUR = 0.2
SCRIPT_MISMATCH = 0.0  # keyword weight when query and memories are in different scripts
LOW_COVERAGE = 0.34  # below this share of content words in the best keyword hit ...
LOW_COVERAGE_WEIGHT = 0.5  # ... the keyword weight is this
CJK_QUERY = 0.5  # a query with this share of CJK letters or more is a CJK query


@dataclass(frozen=True)
class Weights:
    keyword: float = FUSION_W_KEYWORD
    vector: float = FUSION_W_VECTOR
    why: str = "default"


def weights(query: Query, memories: Sequence[str], coverage: float | None) -> Weights:
    """Weights for one query: memories are the texts of the top vector hits (what the
    session is written in), coverage the share of the query's content tokens that the best
    keyword hit holds (None: no keyword hit)."""
    if scripts_differ(query, memories):
        return Weights(SCRIPT_MISMATCH, FUSION_W_VECTOR, "script mismatch")
    if coverage is not None and coverage < LOW_COVERAGE:
        return Weights(LOW_COVERAGE_WEIGHT, FUSION_W_VECTOR, "low keyword coverage")
    return Weights()


def incidental(query: Query, coverage: float | None) -> bool:
    """Whether a Latin-script query's keyword matches are incidental: its best keyword hit
    holds less than LOW_COVERAGE of its content tokens (a paraphrase or an unrelated
    question sharing a common word with some turn). Not for CJK queries: their bigram
    coverage was not measured so (the zh_memory tune split lost with the rule)."""
    return (coverage is not None and coverage < LOW_COVERAGE
            and query.cjk_share < CJK_QUERY)


def keyword_evidence(query: Query, found: bool, script_mismatch: bool,
                     coverage: float | None) -> bool:
    """Whether hybrid has keyword evidence to rank by: keyword hits (`found`), in the
    memories' script, and for a question about the user (query.about_the_user) not only
    incidental ones (a paraphrase of what the user said shares a word or two with unrelated
    turns). Without it hybrid ranks as semantic does: its fitted weights and its fusion are
    made for the two rankings together. A question about someone else keeps its low-
    coverage matches: the fitted weights were fitted on those (LoCoMo), where names and
    dates dilute the coverage and the keyword signals still help (leaving them out there
    cost the tune split's MRR 0.008; docs/benchmarks.md)."""
    return found and not script_mismatch and not (incidental(query, coverage)
                                                  and about_the_user(query.text))


def scripts_differ(query: Query, memories: Sequence[str]) -> bool:
    """Whether the query and these texts are in different scripts (CJK against the rest, by
    the majority of their letters): no keyword of one can match the other. No texts: no."""
    if not memories:
        return False
    m = sum(cjk_share(t) for t in memories) / len(memories)
    return (query.cjk_share > 0.5) != (m > 0.5)


def coverage(query_tokens: Iterable[str], hit_tokens: Iterable[str]) -> float:
    """Share of the query's distinct tokens found in a hit (prefix match stands in for the
    stemming FTS5 applied: "meetings" covers "meeting")."""
    wanted = set(query_tokens)
    if not wanted:
        return 0.0
    have = set(hit_tokens)
    found = sum(1 for t in wanted
                if t in have or any(h.startswith(t[:5]) for h in have if len(t) >= 5))
    return found / len(wanted)


@dataclass(frozen=True)
class Ranking:
    """One signal's ranking of a search's candidates: (seq, score), best first."""

    name: str  # "keyword", "vector"
    hits: Sequence[tuple[int, float]]
    weight: float


def fuse(rankings: Sequence[Ranking], *, k: float = FUSION_K,
         neighbour: float = FUSION_NEIGHBOUR, lo: int = 0, hi: int | None = None
         ) -> list[tuple[int, float]]:
    """Weighted reciprocal-rank fusion of the rankings (in their order) with neighbour
    smoothing inside [lo, hi); ties go to the newer message."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        if not ranking.weight:
            continue
        for rank, (seq, _) in enumerate(ranking.hits, 1):
            scores[seq] = scores.get(seq, 0.0) + ranking.weight / (k + rank)
    if neighbour:
        smoothed = dict(scores)
        for seq, score in scores.items():
            for near in (seq - 1, seq + 1):
                if near >= lo and (hi is None or near < hi):
                    smoothed[near] = smoothed.get(near, 0.0) + neighbour * score
        scores = smoothed
    return sorted(scores.items(), key=lambda kv: (-kv[1], -kv[0]))
