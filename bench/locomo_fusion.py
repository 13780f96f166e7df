"""Tuning aid for hybrid fusion on LoCoMo: collect each question's two rankings once
through `agenvoy search`, then replay the fusion step offline with other settings.

    python bench/locomo_fusion.py collect      # runs bench/locomo.py's home, one hybrid
                                               # search per question, keeps the candidates
    python bench/locomo_fusion.py grid         # replays variants; tune on conv 0-4,
                                               # report conv 5-9 (held out) and all

Collect wraps search/candidates.py gather (the keyword and the vector ranking the command computed,
deepened to --depth) during real CLI searches, so the candidates are the product's. The
replay runs the same steps vector_search runs after that (attribution, floor, query
weights, fusion, attribution again) with the functions of agenvoy_cli.search, parameters
varied. Numbers the README quotes come from bench/locomo.py, not from here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (bench/harness.py)
import locomo  # noqa: E402  (bench/locomo.py)

DUMP = Path("/tmp/agenvoy-bench-locomo-fusion.pkl")


def collect(args) -> None:
    from agenvoy_cli.search import candidates

    convs, _, _ = locomo.load(args.locomo)
    marker = args.home / "bench-maps.json"
    if not marker.exists():
        raise SystemExit("run bench/locomo.py first (it builds the home)")
    maps = [{int(k): v for k, v in m.items()} for m in json.loads(marker.read_text())]
    vectors, embedders = harness.vectors_module()
    emb = harness.CachingEmbedder(embedders.get_embedder(None), args.cache)
    harness.use_embedder(emb)
    candidates.POOL = args.depth
    seen: list = []
    real = candidates.gather

    def spy(store, session_id, query, mode, scope, window, vector, *rest):
        cand = real(store, session_id, query, mode, scope, window, vector, *rest)
        seen.append({"kw": cand.keyword, "vec": cand.vector, "coverage": cand.coverage,
                     "hi": scope.vector_hi, "qv": list(vector)})
        return cand

    candidates.gather = spy
    out = []
    for ci, conv in enumerate(convs):
        for question, gold, cat in conv["qa"]:
            seen.clear()
            locomo.cli(args.home, "search", f"conv{ci}", "--mode", "hybrid", "--limit", "50",
                       "--json", "--", question)
            out.append({"conv": ci, "q": question, "gold": gold, "cat": cat, **seen[0]})
        print(f"  conversation {ci}", file=sys.stderr)
    # every message's own text embedded (what attribution embeds), for exact replays
    import sqlite3

    conn = sqlite3.connect(args.home / "sqlite" / "agenvoy.db") if (
        args.home / "sqlite" / "agenvoy.db").exists() else None
    if conn is None:
        found = sorted(args.home.rglob("*.db"))
        conn = sqlite3.connect(found[0])
    from agenvoy_cli.search.results import rows_of

    bodies: dict[int, dict[int, str]] = {}
    for ci in range(len(convs)):
        bodies[ci] = {m.seq: m.body for m in rows_of(conn, f"conv{ci}", range(100_000))}
    alone: dict[int, dict[int, list[float]]] = {}
    for ci, b in bodies.items():
        seqs = sorted(b)
        vecs = emb.embed_documents([b[s][:600] for s in seqs])
        alone[ci] = dict(zip(seqs, vecs))
    emb.save()
    DUMP.write_bytes(pickle.dumps({"questions": out, "bodies": bodies, "alone": alone,
                                   "maps": maps}))
    print(f"wrote {DUMP}: {len(out)} questions", file=sys.stderr)


class Lookup:
    """An embedder that answers from the precomputed own-text vectors."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed_documents(self, texts):
        return [self.table[t] for t in texts]


def replay(d: dict, q: dict, p: dict, *, seqs: bool = False) -> list:
    """The CLI's steps after the candidates: dia ids of the top 50 ((seq, score) with seqs)."""
    from agenvoy_cli.search import fusion, semantic
    from agenvoy_cli.search.query import Query

    ci = q["conv"]
    bodies = d["bodies"][ci]
    emb = d["lookup"][ci]
    qv = q["qv"]
    kw = q["kw"][:p["dk"]]
    vec = q["vec"][:p["dv"]]
    state = semantic.Attribution()
    if p["attr"]:
        vec = semantic.attribute(vec, qv, emb, bodies, state)
    if p["mode"] == "semantic":
        ranked = vec
    else:
        w = fusion.weights(Query.of(q["q"]), [bodies[s] for s, _ in vec[:5] if s in bodies],
                           q["coverage"])
        wk = w.keyword
        if w.why == "low keyword coverage" and "lowcov" in p:
            wk = p["lowcov"]
        wk *= p["wk"]
        if p.get("scores"):
            ranked = score_fuse(kw, vec, wk, p)
        else:
            ranked = fusion.fuse([fusion.Ranking("keyword", kw, wk),
                                  fusion.Ranking("vector", vec, 1.0)], k=p["k"], hi=q["hi"],
                                 neighbour=p["nb"])
        if p["attr"] and p["attr2"] and vec:
            ranked = semantic.attribute(ranked, qv, emb, bodies, state)
    if seqs:
        return ranked
    return [d["maps"][ci].get(s, "filler") for s, _ in ranked[:50]]


def score_fuse(kw, vec, wk, p):
    """Min-max normalised scores, weighted sum (a variant to compare with RRF)."""
    scores: dict[int, float] = {}
    for weight, ranked in ((wk, kw), (1.0, vec)):
        if not ranked or not weight:
            continue
        top, low = ranked[0][1], ranked[-1][1]
        span = (top - low) or 1.0
        for seq, s in ranked:
            scores[seq] = scores.get(seq, 0.0) + weight * (s - low) / span
    if p["nb"]:
        sm = dict(scores)
        for seq, s in scores.items():
            for near in (seq - 1, seq + 1):
                sm[near] = sm.get(near, 0.0) + p["nb"] * s
        scores = sm
    return sorted(scores.items(), key=lambda kv: (-kv[1], -kv[0]))


def evaluate(d, p, which) -> dict:
    rows = [(q["cat"], locomo.score(replay(d, q, p), q["gold"]))
            for q in d["questions"] if which(q)]
    return locomo.summarise(rows)


BASE = {"mode": "hybrid", "dk": 50, "dv": 50, "k": 5.0, "wk": 1.0, "nb": 0.2,
        "attr": True, "attr2": True}  # "lowcov": w overrides the low-coverage keyword weight


def grid(args) -> None:
    d = pickle.loads(DUMP.read_bytes())
    d["lookup"] = {}
    for ci, b in d["bodies"].items():
        d["lookup"][ci] = Lookup({b[s][:600]: v for s, v in d["alone"][ci].items()})
    tune = lambda q: q["conv"] < 5  # noqa: E731
    held = lambda q: q["conv"] >= 5  # noqa: E731
    allq = lambda q: True  # noqa: E731
    space = json.loads(args.space) if args.space else {}
    keys = sorted(space)
    rows = []
    for values in itertools.product(*(space[k] for k in keys)):
        p = {**BASE, **dict(zip(keys, values))}
        r = evaluate(d, p, tune)["1-4"]
        rows.append((r["R@10"] + r["MRR"], r, p))
        print(f"{dict(zip(keys, values))}  tune R@10 {r['R@10']:.3f} MRR {r['MRR']:.3f}",
              flush=True)
    rows.sort(key=lambda x: -x[0])
    for _, r, p in rows[:args.show]:
        h = evaluate(d, p, held)["1-4"]
        a = evaluate(d, p, allq)["1-4"]
        print(f"BEST {({k: p[k] for k in keys})}: tune {r['R@10']:.3f}/{r['MRR']:.3f}  "
              f"held-out {h['R@10']:.3f}/{h['MRR']:.3f}  all {a['R@5']:.3f}/{a['R@10']:.3f}/"
              f"{a['MRR']:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["collect", "grid"])
    ap.add_argument("--locomo", type=Path, default=locomo.LOCOMO)
    ap.add_argument("--home", type=Path, default=Path("/tmp/agenvoy-bench-locomo-home"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-locomo-cache"))
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--space", default="", help='JSON {"k": [5, 10], ...}')
    ap.add_argument("--show", type=int, default=3)
    args = ap.parse_args()
    os.environ.pop("AGENVOY_HOME", None)
    (collect if args.what == "collect" else grid)(args)


if __name__ == "__main__":
    main()
