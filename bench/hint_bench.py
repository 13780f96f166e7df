#!/usr/bin/env python3
"""Error hints only when related (#39): the calibration set through the CLI.

Every lookup of bench/hint_cases.py runs as a user runs it, `agenvoy errors lookup --json
[--tool T] -- TEXT`, a new process each, in the full memory (36 records) and in a small one
(3 records), both built with `agenvoy errors record --from-json -`. A related lookup keeps
its hint when its record is returned; an unrelated one gets no hint when nothing is.

    python bench/hint_bench.py                       # the held-out set, both homes
    python bench/hint_bench.py --split tune --home full --out /tmp/tune.json
    python bench/hint_bench.py --keyword             # AGENVOY_ERRORS_SEMANTIC=0

Byte-compile first (PYTHONDONTWRITEBYTECODE is set in this project's shells):
`python -m compileall -q agenvoy_cli`. Targets (bench/hint_data/README.md): on the split
not fitted on (report for the first pass, held-out for the second), unrelated lookups get
no hint in >= 95 %, related ones keep their hint in >= 90 %.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.hint_cases import (  # noqa: E402
    HELD_OUT,
    LOOKUPS,
    RECORDS,
    Lookup,
    captured,
    check,
    lookup_key,
    near_miss,
)

GROUP = 3  # records per small home


def agenvoy(home: Path, *args: str, stdin: bytes | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "agenvoy_cli", *args], input=stdin,
                          capture_output=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "AGENVOY_HOME": str(home), **(env or {})})


def build(home: Path, keys: list[str], env: dict[str, str]) -> dict[str, str]:
    """Record these records in a new home; record key -> record id."""
    texts = captured()
    chosen = [r for r in RECORDS if r.key in keys]
    drafts = [{"tool_name": r.tool, "keywords": list(r.keywords), "symptom": texts[r.symptom],
               "cause": r.cause, "action": r.action, "outcome": r.outcome} for r in chosen]
    res = agenvoy(home, "errors", "record", "--from-json", "-", "--json",
                  stdin=json.dumps(drafts).encode(), env=env)
    if res.returncode != 0:
        raise SystemExit(res.stderr.decode())
    ids = [r["id"] for r in json.loads(res.stdout)["records"]]
    return dict(zip([r.key for r in chosen], ids))


def small_home_of(lookup: Lookup, groups: list[list[str]]) -> int:
    if lookup.expect is not None:
        return next(i for i, g in enumerate(groups) if lookup.expect in g)
    return int(hashlib.sha1(lookup.id.encode()).hexdigest(), 16) % len(groups)


def run_one(home: Path, lookup: Lookup, ids: dict[str, str], env: dict[str, str]
            ) -> dict[str, object]:
    text = captured()[lookup.id]
    args = ["errors", "lookup", "--json", "--no-server"]
    if lookup.tool:
        args += ["--tool", lookup.tool]
    started = time.monotonic()
    res = agenvoy(home, *args, "--", text, env=env)
    wall = time.monotonic() - started
    if res.returncode != 0:
        return {"error": res.stderr.decode()[-500:]}
    doc = json.loads(res.stdout)
    by_id = {v: k for k, v in ids.items()}
    got = [by_id.get(r["id"], r["id"]) for r in doc["records"]]
    expect = lookup.expect
    ok = (expect in got) if expect is not None else not got
    return {"returned": got, "ok": ok, "mode": doc.get("mode"),
            "notes": [n["code"] for n in doc.get("notes") or []],
            "scores": [round(r["score"], 4) for r in doc["records"]],
            "matched": [r.get("matched") for r in doc["records"]], "seconds": round(wall, 3)}


def summarise(rows: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for split in ("tune", "report", "held-out"):
        for home in ("full", "small"):
            part = [r for r in rows if r["split"] == split and r["home"] == home]
            if not part:
                continue
            rel = [r for r in part if r["expect"] is not None]
            unrel = [r for r in part if r["expect"] is None]
            extra = sum(1 for r in rel if r["ok"] and len(r["returned"]) > 1)  # type: ignore
            near = [r for r in unrel if r.get("near_miss")]
            out[f"{split}/{home}"] = {
                "related_kept": f"{sum(bool(r['ok']) for r in rel)}/{len(rel)}",
                "related_kept_pct": round(100 * sum(bool(r["ok"]) for r in rel)
                                          / max(1, len(rel)), 1),
                "unrelated_silent": f"{sum(bool(r['ok']) for r in unrel)}/{len(unrel)}",
                "unrelated_silent_pct": round(100 * sum(bool(r["ok"]) for r in unrel)
                                              / max(1, len(unrel)), 1),
                "near_miss_silent": f"{sum(bool(r['ok']) for r in near)}/{len(near)}",
                "related_with_another_record_too": extra,
                "median_seconds": sorted(float(r["seconds"]) for r in part)[len(part) // 2],
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=["tune", "report", "held-out", "all"],
                        default="held-out")
    parser.add_argument("--home", choices=["full", "small", "both"], default="both")
    parser.add_argument("--keyword", action="store_true",
                        help="keyword lookups only (AGENVOY_ERRORS_SEMANTIC=0)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", help="write every lookup's result here (JSON)")
    args = parser.parse_args()
    check()
    env = {"AGENVOY_ERRORS_SEMANTIC": "0"} if args.keyword else {}
    lookups = [lk for lk in [*LOOKUPS, *HELD_OUT] if args.split in ("all", lk.split)]
    keys = [r.key for r in RECORDS]
    groups = [keys[i:i + GROUP] for i in range(0, len(keys), GROUP)]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="hint-bench-") as tmp:
        homes: list[tuple[str, Path, dict[str, str], list[Lookup]]] = []
        if args.home in ("full", "both"):
            home = Path(tmp) / "full"
            homes.append(("full", home, build(home, keys, env), lookups))
        if args.home in ("small", "both"):
            for n, group in enumerate(groups):
                mine = [lk for lk in lookups if small_home_of(lk, groups) == n]
                if mine:
                    home = Path(tmp) / f"small{n}"
                    homes.append(("small", home, build(home, group, env), mine))
        jobs = [(name, home, ids, lk) for name, home, ids, mine in homes for lk in mine]
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda j: run_one(j[1], j[3], j[2], env), jobs))
        for (name, _, _, lk), result in zip(jobs, results):
            rows.append({"lookup": lookup_key(lk), "home": name, "split": lk.split,
                         "tool": lk.tool, "expect": lk.expect, "near_miss": near_miss(lk),
                         **result})
    errors = [r for r in rows if "error" in r]
    if errors:
        print(json.dumps(errors[:3], indent=1), file=sys.stderr)
        return 1
    summary = summarise(rows)
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    print(json.dumps(summary, indent=1))
    for r in rows:
        if not r["ok"]:
            print(f"  miss [{r['split']}/{r['home']}] {r['lookup']} (tool {r['tool']}): "
                  f"expected {r['expect']}, got {r['returned']} {r['scores']}",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
