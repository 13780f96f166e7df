"""Attribution probes through `agenvoy search`: does the top hit name the message that
holds the fact (not the reply after it)?

    python bench/probes.py                    # semantic and hybrid, default embedder
    python bench/probes.py --modes keyword,semantic,hybrid --json out.json

One made-up conversation (English facts, each followed by an assistant reply that talks
about it, as in a real chat), 16 filler messages after it (the context window), and two
probe sets written for this bench: zh->en (a Chinese question about an English fact) and
paraphrase (English, no content word shared with the fact), plus 20 unrelated questions
(the relevance floor: how many return nothing). Each probe is one in-process
`agenvoy search SESSION QUERY --mode M --limit 5 --json` (click's CliRunner over the real
command); top-1 = the hit ranked first (rank 1), top-5 = among the hits. With --path
process the session is indexed once (`agenvoy backfill --vectors`) and every probe is one
`agenvoy search ... --json` process answered by the home's `agenvoy mcp --http` server
(bench/locomo_cli.py's Served: the CLI's fast path).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import harness  # bench/ is this script's path[0]
from harness import Question, RetrievalSet, cli, empty_rate, evaluate, ranked_hits

__all__ = ["UNRELATED", "cli", "ranked_hits"]  # bench/floor.py, zh_dialogue.py, locomo.py

# (fact said by the user, the assistant's reply). The fact is the target of its probes.
FACTS: list[tuple[str, str]] = [
    ("My sister Lena moved to Lisbon last spring to work as a marine biologist at the "
     "aquarium.", "Lisbon is lovely. Does she get to dive often?"),
    ("I finally sold my old Volvo and bought a secondhand electric bike for commuting.",
     "Nice, that must save a lot on fuel and parking."),
    ("The doctor told me I'm allergic to shellfish, so no more shrimp for me.",
     "That's important to know; I'll keep it in mind when suggesting recipes."),
    ("Our quarterly planning meeting moved to Thursday at 3 pm because the director is "
     "traveling.", "Got it, I'll remind you on Thursday morning."),
    ("I've been taking cello lessons; my teacher says my bowing is improving.",
     "Keep practicing, string instruments take patience."),
    ("We adopted a grey greyhound named Pepper from the shelter in March.",
     "How is she settling in at home?"),
    ("My grandmother turns ninety on the 14th of August, and we're planning a garden party.",
     "What a milestone! Do you need help with the guest list?"),
    ("The basement flooded after the storm and ruined my collection of vinyl records.",
     "I'm so sorry, that's a painful loss."),
    ("I switched my thesis topic from protein folding to soil microbiomes.",
     "That's a big change; what made you decide?"),
    ("My password manager subscription expires next Friday and I keep forgetting it.",
     "I can remind you before it lapses."),
    ("I ran my first half marathon in Rotterdam and finished in two hours and five minutes.",
     "Congratulations, that's a solid time for a first race!"),
    ("My landlord is raising the rent by twelve percent starting in January.",
     "That's steep. Is it even allowed under your lease?"),
]
SMALL_TALK = [
    ("Good morning! Coffee first, then work.", "Good morning. Enjoy the coffee."),
    ("The weather is grey again today.", "Maybe it clears up in the afternoon."),
    ("I watched a documentary about volcanoes last night.",
     "Which one? There are some great ones."),
    ("Can you remind me what we talked about yesterday?", "Mostly your plans for the week."),
]
# (query, index into FACTS)
ZH_EN: list[tuple[str, int]] = [
    ("我妹妹搬到哪個城市工作？", 0),
    ("我現在用什麼交通工具通勤？", 1),
    ("我對什麼食物過敏？", 2),
    ("季度規劃會議改到什麼時候？", 3),
    ("我在學哪一種樂器？", 4),
    ("我們從收容所領養的狗叫什麼名字？", 5),
    ("奶奶要過幾歲生日？", 6),
    ("暴風雨之後地下室發生了什麼事？", 7),
    ("我的論文題目換成了什麼？", 8),
    ("哪個訂閱快要到期了？", 9),
    ("我在哪裡跑了第一場半程馬拉松？", 10),
    ("房租要漲多少？", 11),
]
PARAPHRASE: list[tuple[str, int]] = [
    ("Which city did my sibling relocate to for her ocean science job?", 0),
    ("How do I get to the office these days?", 1),
    ("Is there any seafood I must avoid eating?", 2),
    ("When will the three-month roadmap discussion take place?", 3),
    ("What musical instrument am I studying?", 4),
    ("What did we call the pet we brought home from the pound?", 5),
    ("How old will granny be at her celebration?", 6),
    ("What did I lose when water got into the lower floor of the house?", 7),
    ("What is my dissertation research about now?", 8),
    ("Which app payment is coming due soon?", 9),
    ("Where did I complete my first 21 kilometre race?", 10),
    ("How much more will I pay for my apartment next year?", 11),
]
# Questions about nothing in the conversation (relevance floor: should return nothing in
# semantic mode; hybrid may still return keyword matches of a shared word).
UNRELATED: list[str] = [
    "How do I fix a Kubernetes pod stuck in CrashLoopBackOff?",
    "What is the time complexity of Dijkstra's algorithm with a binary heap?",
    "Convert the Postgres timestamp column to UTC in a migration",
    "What's the boiling point of tungsten in kelvin?",
    "rust borrow checker error E0502 mutable borrow",
    "How many moons does Neptune have?",
    "Explain the difference between TCP and UDP congestion control",
    "What is the capital of Burkina Faso?",
    "nginx 502 bad gateway upstream timed out",
    "Which Python version removed distutils?",
    "How to compute eigenvalues of a sparse matrix in scipy",
    "What was the GDP of Japan in 1994?",
    "Kubernetes 的 pod 一直重啟怎麼辦？",
    "量子電腦的量子位元是什麼原理？",
    "SQL 查詢太慢要怎麼加索引？",
    "git rebase interactive squash last three commits",
    "What torque should lug nuts on a 2012 Honda Civic be tightened to?",
    "Define the Navier-Stokes equations",
    "invoice number 4471 payment status",
    "docker compose healthcheck syntax",
]
FILLER = 16


@dataclass(frozen=True)
class ProbeSet:
    facts: list[tuple[str, str]]
    small_talk: list[tuple[str, str]]
    zh_en: list[tuple[str, int]]
    paraphrase: list[tuple[str, int]]
    unrelated: list[str]


def probe_set(split: str) -> ProbeSet:
    """The report set (this file) or the tune set (bench/probes_tune.py)."""
    if split == "report":
        return ProbeSet(FACTS, SMALL_TALK, ZH_EN, PARAPHRASE, UNRELATED)
    import probes_tune as t

    return ProbeSet(t.FACTS, t.SMALL_TALK, t.ZH_EN, t.PARAPHRASE, t.UNRELATED)


def conversation(probes: ProbeSet) -> tuple[list[dict], dict[int, int]]:
    """The messages to append and fact index -> seq of its message."""
    msgs: list[dict] = []
    where: dict[int, int] = {}
    for i, (fact, reply) in enumerate(probes.facts):
        talk = probes.small_talk[i % len(probes.small_talk)]
        for user, assistant in (talk, (fact, reply)):
            if user == fact:
                where[i] = len(msgs)
            msgs += [{"role": "user", "content": user},
                     {"role": "assistant", "content": assistant}]
    for i in range(FILLER // 2):
        msgs += [{"role": "user", "content": f"ok, next item {i}"},
                 {"role": "assistant", "content": "sure"}]
    return msgs, where


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="semantic,hybrid")
    ap.add_argument("--json", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--path", choices=["inprocess", "process"], default="inprocess")
    ap.add_argument("--split", choices=["report", "tune"], default="report",
                    help="tune: bench/probes_tune.py (choose rules on it); report: this file")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-probes-cache"))
    args = ap.parse_args()
    probes = probe_set(args.split)
    msgs, where = conversation(probes)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AGENVOY_HOME"] = tmp
        cli("append", "probe", "--messages", "-", "--time", "2026-01-05 10:00:00",
            input=json.dumps(msgs).encode())
        if args.path == "process":
            with harness.Served(Path(tmp), ["probe"], args.cache) as served:
                out = measure(args, probes, where, served.search)
        else:
            out = measure(args, probes, where, harness.inprocess_search())
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))


def measure(args, probes: ProbeSet, where: dict[int, int], search: harness.Search) -> dict:
    """Every probe set in every mode through search(session, query, mode, limit): top-1,
    top-5, how often top-1 was the reply after the fact, and the unrelated questions answered
    with nothing (the harness's hit@1, hit@5 and empty_rate)."""
    out: dict = {}
    for mode in args.modes.split(","):
        for name, asked in (("zh->en", probes.zh_en), ("paraphrase", probes.paraphrase)):
            rset = RetrievalSet(name, args.split, [Question("probe", q, (where[f],))
                                                   for q, f in asked],
                                top=5, recall=(), hit=(1, 5))
            res = evaluate(rset, [mode], search)
            rows, ranks = res.rows[mode], res.rankings[mode]
            top1 = int(sum(s["hit@1"] for _, s in rows))
            top5 = int(sum(s["hit@5"] for _, s in rows))
            succ = sum(bool(h) and h[0] == q.gold[0] + 1 for h, q in zip(ranks, rset.questions))
            if args.verbose:
                for h, q in zip(ranks, rset.questions):
                    print(f"  {mode} {q.query!r}: target {q.gold[0]}, hits {h[:5]}")
            n = len(asked)
            out[f"{mode} {name}"] = {"top1": top1, "top5": top5, "successor_top1": succ,
                                     "n": n}
            print(f"{mode:9} {name:11} top-1 {top1}/{n}  top-5 {top5}/{n}  "
                  f"top-1 was the reply after the fact: {succ}/{n}")
        docs = [search("probe", query, mode, 5) for query in probes.unrelated]
        if args.verbose:
            for query, doc in zip(probes.unrelated, docs):
                if ranked_hits(doc):
                    print(f"  {mode} unrelated {query!r}: hits {ranked_hits(doc)[:5]}")
        empty, n_unrelated = empty_rate(docs)
        out[f"{mode} unrelated"] = {"empty": empty, "n": n_unrelated}
        print(f"{mode:9} unrelated   returned nothing: {empty}/{n_unrelated}")
    return out


if __name__ == "__main__":
    main()
