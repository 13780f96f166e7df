#!/usr/bin/env python3
"""Fit the hint bar on the TUNE split only (bench/hint_data/README.md), in process.

For every tune lookup and every record of the memory it computes the pair's features
(errormem/relevance.py: the signature overlap, the similarities, keywords, tool, type) and
prints how well single features and the rule separate the pairs that should give a hint
from those that should not, at the level the targets are set: a related lookup keeps its
hint when its record clears the bar, an unrelated one gets none when no record does (in
the full memory; in a small one the same pairs decide, as the bar is per pair).

    python bench/hint_fit.py                 # features, separations, the rule's result
    python bench/hint_fit.py --split fit     # the second pass: tune + report together
    python bench/hint_fit.py --dump /tmp/f.json
    python bench/hint_fit.py --split report  # only to read the report split AFTER fitting

The reported figures come from bench/hint_bench.py through the CLI, not from this script.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.hint_cases import (  # noqa: E402
    HELD_OUT,
    LOOKUPS,
    RECORDS,
    captured,
    check,
    lookup_key,
)


def features(split: str) -> list[dict[str, object]]:
    """Per (tune lookup, candidate record): the rule's three measures, and the verdict of
    the shipped bar (errormem/relevance.py) with the built-in model."""
    from agenvoy_cli.api import Memory
    from agenvoy_cli.errormem.records import make_draft, plain
    from agenvoy_cli.errormem.relevance import HintBar, keyword_share
    from agenvoy_cli.errormem.signature import signature, weighted_overlap, weighted_share
    from agenvoy_cli.errormem.store import by_ids

    texts = captured()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "home") as memory:
        drafts = [make_draft(r.tool, list(r.keywords), texts[r.symptom], r.cause, r.action,
                             r.outcome) for r in RECORDS]
        stored = memory.record_errors(drafts, semantic=False)["records"]
        store = memory.store
        records = by_ids(store.db(), [d["id"] for d in stored])
        shared: dict[str, object] = {}
        for lk in [*LOOKUPS, *HELD_OUT]:
            if split not in ("all", lk.split) and not (
                    split == "fit" and lk.split in ("tune", "report")):
                continue
            query = texts[lk.id]
            bar = HintBar.for_store(store, semantic=True).judge_for(query)
            bar._vectors = shared  # the records' texts are embedded once for the run
            for key, rec in zip([r.key for r in RECORDS], records):
                if lk.tool and rec.tool_name != lk.tool:
                    continue  # --tool: only that tool's records are candidates (#17)
                theirs = signature(rec.symptom)
                verdict = bar.judge(rec.symptom, plain(rec.keywords))
                rows.append({"lookup": lookup_key(lk), "record": key, "tool": lk.tool,
                             "positive": lk.expect == key, "related": lk.expect is not None,
                             "wjac": weighted_overlap(bar.signature, theirs),
                             "rec_in_q": weighted_share(theirs, bar.signature),
                             "q_in_rec": weighted_share(bar.signature, theirs),
                             "kw_strong": keyword_share(query, plain(rec.keywords)),
                             "cos_sig": bar._cosine(theirs) if theirs else 0.0,
                             "kw_all": keyword_share(query, plain(rec.keywords), False),
                             "cos_line": bar.wording_cosine(rec.symptom),
                             "clears": verdict.related})
    return rows


def evaluate(rows: list[dict[str, object]], passes) -> dict[str, object]:
    by: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        by.setdefault(str(r["lookup"]), []).append(r)
    kept = rel = silent = unrel = extra = 0
    misses = []
    for lookup, pairs in by.items():
        cleared = [p for p in pairs if passes(p)]
        if pairs[0]["related"]:
            rel += 1
            ok = any(p["positive"] for p in cleared)
            kept += ok
            extra += ok and len(cleared) > 1
            if not ok:
                misses.append(f"{lookup}: kept nothing of its record")
        else:
            unrel += 1
            silent += not cleared
            if cleared:
                misses.append(f"{lookup}: hinted {[p['record'] for p in cleared]}")
    return {"related_kept": f"{kept}/{rel}", "unrelated_silent": f"{silent}/{unrel}",
            "with_another_record": extra, "misses": misses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["tune", "report", "fit", "held-out", "all"],
                        default="tune", help="fit: tune + report (the second pass)")
    parser.add_argument("--dump")
    args = parser.parse_args()
    check()
    rows = features(args.split)
    if args.dump:
        Path(args.dump).write_text(json.dumps(rows, indent=0))
    pos = [r for r in rows if r["positive"]]
    neg = [r for r in rows if not r["positive"]]
    names = [k for k, v in rows[0].items() if isinstance(v, float)]  # the measures
    for name in names:
        p = sorted(float(r[name]) for r in pos)  # type: ignore[arg-type]
        n = sorted(float(r[name]) for r in neg)  # type: ignore[arg-type]
        hard = sorted((float(r[name]) for r in neg if r["tool"] and r["tool"] ==
                       next(x.tool for x in RECORDS if x.key == r["record"])), reverse=True)
        print(f"{name:12} positives min {p[0]:.3f} p10 {p[len(p) // 10]:.3f} median "
              f"{p[len(p) // 2]:.3f} | negatives max {n[-1]:.3f} p99 {n[int(len(n) * .99)]:.3f}"
              f" | same-tool negatives top {[round(x, 3) for x in hard[:3]]}")
    result = evaluate(rows, lambda p: bool(p["clears"]))
    print("the shipped bar:", json.dumps({k: v for k, v in result.items() if k != "misses"}))
    for line in result["misses"]:  # type: ignore[union-attr]
        print("  " + str(line))
    print("the range around it: wjac >= A, or the record inside, or all its specific keywords,"
          " or (half of them and cos_sig >= C)")
    for a in (0.6, 0.7, 0.8):
        cells = []
        for c in (0.85, 0.86, 0.87, 0.88, 0.89):
            r = evaluate(rows, lambda p, a=a, c=c: (  # type: ignore[misc]
                float(p["wjac"]) >= a or float(p["kw_strong"]) >= 1.0  # type: ignore[arg-type]
                or (float(p["rec_in_q"]) >= 0.9 and float(p["q_in_rec"]) >= 0.5)  # type: ignore
                or (float(p["kw_strong"]) >= 0.5 and float(p["cos_sig"]) >= c)))  # type: ignore
            cells.append(f"C={c}: {r['related_kept']} {r['unrelated_silent']}")
        print(f"  A={a}: " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
