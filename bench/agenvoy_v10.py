"""Keyword search on a home Agenvoy 1.0 created (trigram messages_fts5, message_meta) against
the same conversations in a home Agenvoy v0.32 created (issue #47).

    python bench/agenvoy_v10.py [--split heldout] [--users 3] [--rounds 3]

Both homes are made by the writers' simulators (tests/agenvoy_sim_v032.py,
tests/agenvoy_sim_v10.py: their tables first), then every user's session of
bench/zh_memory_sets/<split>.json is written through `agenvoy append` (one batch a day), as
bench/zh_memory.py does. Each query is searched with `agenvoy search USER --mode keyword
--limit 50 --json -- QUERY` (click's CliRunner, in process: the CLI's code path without a
process start), A (v0.32) and B (1.0) interleaved, `rounds` times. Reported: R@5 / R@10 /
MRR per layout (they must be equal: keyword search answers from our own index on both), the
median B/A ratio of wall and CPU time per search, and as a third column what upstream's
own trigram index alone would find (MATCH over messages_fts5 with every 3-character window
of the query's terms, any of them, BM25, same top 50): why our index answers keyword
search on every layout.
Nothing is tuned here: the split is the report split of bench/splits.py.

    python bench/agenvoy_v10.py --appends 30

instead times `agenvoy append` as a user runs it (one process each), A and B interleaved:
the layout is read when the writer opens the home, so an append pays for it once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402
from probes import ranked_hits  # noqa: E402

from tests.agenvoy_sim_v032 import GoAgentV032  # noqa: E402
from tests.agenvoy_sim_v10 import GoAgentV10  # noqa: E402

SETS = ROOT / "bench" / "zh_memory_sets"
TOP = 50


def build(home: Path, writer: type, users: list[dict]) -> None:
    if home.exists():
        shutil.rmtree(home)
    writer(home).close()  # the upstream program made the file first
    for u in users:
        batches: dict[str, list[dict]] = defaultdict(list)
        for m in u["messages"]:
            batches[m["day"][:10]].append(m)
        for day in sorted(batches):
            batch = [{"role": m["role"], "content": m["content"]} for m in batches[day]]
            locomo.cli(home, "append", u["user"], "--messages", "-", "--time",
                       batches[day][0]["day"],
                       input=json.dumps(batch, ensure_ascii=False).encode())


def score(ranked: list[int], target: int) -> dict[str, float]:
    rank = ranked.index(target) + 1 if target in ranked[:TOP] else 0
    return {"R@5": float(0 < rank <= 5), "R@10": float(0 < rank <= 10),
            "MRR": 1.0 / rank if rank else 0.0}


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: sum(r[k] for r in rows) / max(1, len(rows)) for k in ("R@5", "R@10", "MRR")}


def trigram_only(home: Path, user: str, query: str) -> list[int]:
    """Upstream 1.0's own index at its best: every 3-character window of each term (a
    Chinese sentence has no spaces), any of them, BM25; shorter terms cannot be matched."""
    terms = sorted({t[i:i + 3] for t in query.split() for i in range(len(t) - 2)})
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    with sqlite3.connect(home / ".store" / "history.db") as conn:
        rows = conn.execute(
            "SELECT m.seq FROM messages_fts5 f JOIN messages m ON m.id = f.rowid "
            "WHERE messages_fts5 MATCH ? AND m.session_id = ? ORDER BY bm25(messages_fts5) "
            "LIMIT ?", (match, user, TOP)).fetchall()
    return [r[0] for r in rows if r[0] is not None]


def timed(home: Path, user: str, query: str) -> tuple[list[int], float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    doc = locomo.cli(home, "search", user, "--mode", "keyword", "--limit", str(TOP), "--json",
                     "--", query)
    return ranked_hits(doc)[:TOP], time.perf_counter() - w0, time.process_time() - c0


def appends(work: Path, n: int) -> None:
    import subprocess

    homes = {"v0.32": work / "append-v032", "1.0": work / "append-v10"}
    for name, writer in (("v0.32", GoAgentV032), ("1.0", GoAgentV10)):
        shutil.rmtree(homes[name], ignore_errors=True)
        writer(homes[name]).close()
    wall: dict[str, list[float]] = {k: [] for k in homes}
    cpu: dict[str, list[float]] = {k: [] for k in homes}
    load0 = os.getloadavg()[0]
    for i in range(n):
        for name in (("v0.32", "1.0") if i % 2 == 0 else ("1.0", "v0.32")):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "agenvoy_cli", "--home", str(homes[name]),
                            "append", "s", "--role", "user", "--content", f"message {i}"],
                           check=True, capture_output=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[name].append(time.perf_counter() - w0)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(f"append: {n} per home, load {load0:.1f} -> {os.getloadavg()[0]:.1f}")
    for name in homes:
        print(f"| {name} | median wall {statistics.median(wall[name]) * 1000:.0f} ms | "
              f"median CPU {statistics.median(cpu[name]) * 1000:.0f} ms |")
    print(f"median ratio 1.0 / v0.32: wall "
          f"{statistics.median(b / a for a, b in zip(wall['v0.32'], wall['1.0'])):.3f}, CPU "
          f"{statistics.median(b / a for a, b in zip(cpu['v0.32'], cpu['1.0'])):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--appends", type=int, default=0)
    ap.add_argument("--split", default="heldout")
    ap.add_argument("--users", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    os.environ.setdefault("TZ", "Asia/Taipei")
    time.tzset()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-v10-"))
    if args.appends:
        appends(work, args.appends)
        return
    users = json.loads((SETS / f"{args.split}.json").read_text())["users"][:args.users]
    homes = {"v0.32": work / "v032", "1.0": work / "v10"}
    load0 = os.getloadavg()
    build(homes["v0.32"], GoAgentV032, users)
    build(homes["1.0"], GoAgentV10, users)
    rows: dict[str, list[dict[str, float]]] = {"v0.32": [], "1.0": [], "trigram alone": []}
    wall: dict[str, list[float]] = {"v0.32": [], "1.0": []}
    cpu: dict[str, list[float]] = {"v0.32": [], "1.0": []}
    ratios_w, ratios_c = [], []
    for rnd in range(args.rounds):
        for u in users:
            for q in u["queries"]:
                order = ("v0.32", "1.0") if rnd % 2 == 0 else ("1.0", "v0.32")
                got = {}
                for name in order:
                    got[name] = timed(homes[name], u["user"], q["query"])
                    wall[name].append(got[name][1])
                    cpu[name].append(got[name][2])
                ratios_w.append(got["1.0"][1] / got["v0.32"][1])
                ratios_c.append(got["1.0"][2] / max(got["v0.32"][2], 1e-9))
                if rnd == 0:
                    for name in ("v0.32", "1.0"):
                        rows[name].append(score(got[name][0], q["target"]))
                    rows["trigram alone"].append(score(
                        trigram_only(homes["1.0"], u["user"], q["query"]), q["target"]))
    print(f"{args.split}: {len(rows['1.0'])} queries x {args.rounds} rounds, "
          f"{len(users)} users; load {load0[0]:.1f} -> {os.getloadavg()[0]:.1f}")
    print("| home | R@5 / R@10 / MRR | median wall ms | median CPU ms |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        m = mean(r)
        times = (f"{statistics.median(wall[name]) * 1000:.1f} | "
                 f"{statistics.median(cpu[name]) * 1000:.1f}" if name in wall else "- | -")
        print(f"| {name} | {m['R@5']:.3f} / {m['R@10']:.3f} / {m['MRR']:.3f} | {times} |")
    print(f"median ratio 1.0 / v0.32: wall {statistics.median(ratios_w):.3f}, "
          f"CPU {statistics.median(ratios_c):.3f}")


if __name__ == "__main__":
    main()
