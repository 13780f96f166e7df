"""Semantic ranking: cosine similarity in the message collection, hits attributed to the
message that matches, and the query's typical similarity in the session (what the relevance
floor, search/relevance.py, compares the best hit with).

Each message is embedded with the end of the message before it (catchup.doc_text): a reply alone
("Yes, last May!") says little. The price is that the reply after a matching message
carries that message's words too and often ranks first. So the top hits are checked
against their predecessor by the message text alone (a few short embeddings at query
time): when the predecessor is the better match by itself, the two swap places.

The background: a query always has a nearest message, related or not, and how similar
"unrelated" is depends on the query (some are close to everything). So the query's typical
similarity in this session is measured too: the mean over up to BACKGROUND messages spread
evenly over the searched range (search/relevance.py decides with it).
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
CREDIT_TOP = 10  # hits checked for owing their place to the hit before them
# A hit is credited to the hit before it when its own text is no closer to the query than
# the session's typical message and the predecessor's own text is closer by CREDIT_MARGIN
# (cosine, the index model's). LoCoMo's tune split (bench/splits.py, conversations 0-4,
# replayed over bench/rank_replay.py's signals, base rankings): crediting on the margin
# alone drops replies that hold the answer (margin 0: hybrid R@10 0.718 -> 0.665); with
# the typical-message condition, hybrid 0.632/0.718/0.519 -> 0.634/0.717/0.519 and
# semantic 0.555/0.644/0.482 -> 0.557/0.641/0.484 (R@5/R@10/MRR).
CREDIT_MARGIN = 0.04
BACKGROUND = 48  # messages sampled for the query's typical similarity
BACKGROUND_MIN = 8  # fewer vectors: no sample (the floor uses the shipped background)


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

    own: dict[int, float] = field(default_factory=dict)  # seq -> its own text's similarity
    moved: set[int] = field(default_factory=set)
    first: dict[int, int] = field(default_factory=dict)  # pair (seq-1, seq) -> the winner
    # the query asks about the user (query.about_the_user), the roles of the messages
    # checked, their index similarities (the vector ranking's) and the query's typical one
    # in the session: then a user's message that is a hit by itself (its index similarity
    # above the typical by CREDIT_MARGIN) keeps the better place over the assistant's reply
    # just after it unless the reply's own text is the closer by more than CREDIT_MARGIN
    about_user: bool = False
    roles: dict[int, str] = field(default_factory=dict)
    index: dict[int, float] = field(default_factory=dict)
    typical: float | None = None


def _own_text_similarity(need: Sequence[int], vector: Sequence[float], embedder: Any,
           bodies: dict[int, str]) -> dict[int, float]:
    """The query's similarity to each of these messages' own text (dot product: the
    embedders return unit vectors); those the embedder had no time for are left out (the
    search's budget: vectors/attribution.py KeptEmbedder)."""
    vecs = embedder.embed_documents([bodies[s][:ATTRIBUTION_CHARS] for s in need])
    return {s: sum(a * b for a, b in zip(v, vector)) for s, v in zip(need, vecs)
            if v is not None}


def _winner(seq: int, state: Attribution) -> int | None:
    """Which of (seq-1, seq) takes the better place: decided once per pair (before fusion
    the first time, kept after it); None when either already moved in another pair."""
    if seq in state.first:
        return state.first[seq]
    if seq not in state.own or seq - 1 not in state.own:
        return None  # not embedded within the budget: left as ranked
    # a question about the user and the user's message before the assistant's reply to it:
    # the statement of the user's own fact, checked even when the reply already moved (it
    # won its place from the turn after it; the fact it replies to is one step further)
    stated = (state.about_user and state.typical is not None
              and state.roles.get(seq - 1) == "user" and state.roles.get(seq) == "assistant"
              and state.index.get(seq - 1, -1.0) - state.typical > CREDIT_MARGIN)
    if not stated and (seq in state.moved or seq - 1 in state.moved):
        return None
    lead = state.own[seq - 1] - state.own[seq] + (CREDIT_MARGIN if stated else 0.0)
    win = seq - 1 if lead > 0 else seq
    state.first[seq] = win
    return win


def _reorder(ranked: list[tuple[int, float]], pairs: Sequence[int], state: Attribution
             ) -> list[tuple[int, float]]:
    """The ranking with the winner of each pair in the better of the pair's two places."""
    order = [seq for seq, _ in ranked]
    place = {seq: i for i, seq in enumerate(order)}
    for seq in pairs:
        win = _winner(seq, state)
        if win is None:
            continue
        lose = seq if win == seq - 1 else seq - 1
        if place[win] > place[lose]:
            i, j = place[lose], place[win]
            order[i], order[j] = win, lose
            place[win], place[lose] = i, j
            state.moved |= {seq - 1, seq}
    return [(seq, score) for seq, (_, score) in zip(order, ranked)]


def attribute(ranked: list[tuple[int, float]], vector: Sequence[float], embedder: Any,
              bodies: dict[int, str], state: Attribution | None = None
              ) -> list[tuple[int, float]]:
    """The ranking with each checked hit and its predecessor in the right order: the one
    whose own text is closer to the query takes the better place (scores stay with the
    places, so the list stays sorted)."""
    state = state or Attribution()
    pairs = [s for s in attribution_pairs(ranked) if s in bodies and s - 1 in bodies]
    if not pairs:
        return ranked
    need = _needed(pairs, state)
    if need:
        state.own.update(_own_text_similarity(need, vector, embedder, bodies))
    return _reorder(ranked, pairs, state)


def _needed(pairs: Sequence[int], state: Attribution) -> list[int]:
    """The messages of these pairs whose own text is not embedded yet, the best-ranked
    pair's first (a budget embeds a prefix of them)."""
    return list(dict.fromkeys(x for s in pairs for x in (s - 1, s) if x not in state.own))


def credit(ranked: list[tuple[int, float]], vector: Sequence[float], embedder: Any,
           bodies: dict[int, str], state: Attribution) -> list[tuple[int, float]]:
    """The ranking without the hits that owe their place to the hit just before them in the
    conversation: a message ranked below its predecessor whose own text is no closer to
    the query than the session's typical message (`state.typical`) while the
    predecessor's is closer than its own by CREDIT_MARGIN (an acknowledgement after a fact:
    its vector carries the fact's words). The predecessor's hit shows it as its context.
    Only the top CREDIT_TOP hits are checked; no typical similarity (too little
    background): nothing is credited (issue #40)."""
    typical = state.typical
    if typical is None:
        return ranked
    check = _follows_a_hit(ranked[:CREDIT_TOP], bodies)
    if not check:
        return ranked
    need = _needed([s for s, _ in ranked[:CREDIT_TOP] if s in check], state)
    if need:
        state.own.update(_own_text_similarity(need, vector, embedder, bodies))
    own = state.own
    kept: set[int] = set()
    dropped: set[int] = set()
    for seq, _ in ranked[:CREDIT_TOP]:
        if (seq in check and seq - 1 in kept and seq in own and seq - 1 in own
                and own[seq] <= typical
                and own[seq - 1] - own[seq] > CREDIT_MARGIN):
            dropped.add(seq)
        else:
            kept.add(seq)
    return [(seq, score) for seq, score in ranked if seq not in dropped]


def _follows_a_hit(ranked: Sequence[tuple[int, float]], bodies: dict[int, str]) -> set[int]:
    """The hits ranked below the message just before them (both texts known)."""
    above: set[int] = set()
    found = set()
    for seq, _ in ranked:
        if seq - 1 in above and seq in bodies and seq - 1 in bodies:
            found.add(seq)
        above.add(seq)
    return found


def background(store: Store, session_id: str, vector: Sequence[float], lo_seq: int,
               hi_seq: int, also: Sequence[int] = ()
               ) -> tuple[list[int], list[float], dict[int, Any]]:
    """Up to BACKGROUND messages of [lo_seq, hi_seq), spread evenly: their seqs, the query's
    cosine similarity to each, and the index vectors by seq of those messages and of `also`
    (one read; too few vectors: no sample, the vectors of `also`). Only after vector_ranking
    found candidates (so the index exists). Hold the write lock (Chroma access)."""
    span = hi_seq - lo_seq
    step = max(1, span // BACKGROUND)
    wanted = list(range(lo_seq, hi_seq, step))[:BACKGROUND] if span >= BACKGROUND_MIN else []
    got = index_vectors(store, session_id, sorted(set(wanted) | set(also)))
    sample = [s for s in wanted if s in got]
    if len(sample) < BACKGROUND_MIN:
        return [], [], got
    return sample, cosines([got[s] for s in sample], vector), got


def index_vectors(store: Store, session_id: str, seqs: Sequence[int]) -> dict[int, Any]:
    """The index vectors of these messages, by seq (messages without one left out). Hold
    the write lock (Chroma access)."""
    from agenvoy_cli.vectors import api as vectors

    if not seqs:
        return {}
    from agenvoy_cli.vectors.messages import entries

    got = entries(store, session_id, [vectors.message_id(session_id, s) for s in seqs],
                  embeddings=True)
    embs = got.get("embeddings")
    if embs is None:
        return {}
    return {int(m["seq"]): e for m, e in zip(got.get("metadatas") or [], embs)
            if m and "seq" in m}


def cosines(vectors: Any, query: Sequence[float]) -> list[float]:
    """The cosine similarity of the query to each vector (a zero vector: 0)."""
    import numpy as np

    if not len(vectors):
        return []
    mat = np.asarray(vectors, dtype=np.float64)
    q = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
    return (mat @ q / np.where(norms > 0, norms, 1.0)).tolist()  # type: ignore[no-any-return]
