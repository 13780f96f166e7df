#!/usr/bin/env python3
"""Finished tasks answer nothing when nothing is related (#50 item 1): bench/task_floor_data.

A 1.0 home is made by the writer's simulator (tests/agenvoy_sim_v10.py: Agenvoy's tables, the
24 tasks in action_history, a day apart; their vectors made by one CLI search); every
question of the split is asked through the Python API (`Memory.tasks(None, WORDS, mode=M,
limit=5)`: what `agenvoy session tasks --all-sessions --mode M --limit 5 WORDS` runs; one
holder, the built-in model loaded once) in each mode. A related question is
kept when its task is returned; an unrelated one gets nothing when nothing is returned.

    python bench/task_floor.py --split held-out      # the report (also: tune, all)
    python bench/task_floor.py --scale 5000          # the cost of a search at 5,000 tasks

--scale times keyword, semantic and hybrid searches over N generated tasks (the in-memory
FTS5 index built per search; the vectors caught up once first, with --budget 600, then the
catch-up's check of the collection on every search): median wall and CPU per search; then
A/B, interleaved: the floor's stored vectors against embedding again, and (one holder) the
catch-up's check kept per generation token against reading every vector's metadata again.
Byte-compile first (`python -m compileall -q agenvoy_cli`). Say the load (`uptime`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import harness  # noqa: E402

from tests.agenvoy_sim_v10 import GoAgentV10  # noqa: E402

DATA = ROOT / "bench" / "task_floor_data"
GENERAL = ROOT / "bench" / "corpus_floor_data" / "questions.json"
MODES = ("keyword", "semantic", "hybrid")
DAY = 86_400


def split(text: str) -> str:
    return "tune" if int(hashlib.sha1(text.encode()).hexdigest(), 16) % 2 == 0 else "held-out"


def questions(which: str) -> list[tuple[str | None, str, str]]:
    """(task or None, question, kind: related | near | general)."""
    doc = json.loads((DATA / "questions.json").read_text("utf-8"))
    general = json.loads(GENERAL.read_text("utf-8"))["unrelated"]
    every = [(t, q, "related") for t, q in doc["related"]] + \
        [(None, q, "near") for q in doc["unrelated"] + doc.get("unrelated_added", [])] + \
        [(None, q, "general") for q in general]
    return [r for r in every if which == "all" or split(r[1]) == which]


def build(home: Path, tasks: dict[str, dict[str, str]]) -> None:
    go = GoAgentV10(home)
    go.say("s", "user", "hello")
    now = int(time.time())
    for n, (key, task) in enumerate(tasks.items()):
        go.finish_task("s", key, task["objective"], reply=task["reply"],
                       tool_results=task.get("tools", ""), end_at=now - n * DAY)
    go.close()


def ask(home: Path, question: str, mode: str, limit: int = 5, budget: str = "3"
        ) -> dict[str, Any]:
    """One `session tasks` search through the CLI, in process."""
    return harness.home_cli(home, "session", "tasks", "--all-sessions", "--mode", mode,
                            "--limit", str(limit), "--budget", budget, "--json", "--",
                            question)


def asker(home: Path) -> Any:
    """The same search through the Python API (`Memory.tasks`: what the CLI calls), one
    holder for the run (the models loaded once, as a server's)."""
    from agenvoy_cli.api import Memory

    memory = Memory(home)

    def ask_api(question: str, mode: str) -> dict[str, Any]:
        return memory.tasks(None, question, mode=mode, limit=5, budget=3.0)

    return ask_api


def floor(which: str, out: str | None) -> None:
    tasks = json.loads((DATA / "tasks.json").read_text("utf-8"))["tasks"]
    asked = questions(which)
    rows = []
    with tempfile.TemporaryDirectory(prefix="task-floor-") as tmp:
        home = Path(tmp) / "home"
        build(home, tasks)
        ask(home, "warm up", "semantic", budget="600")  # every task embedded once
        search = asker(home)
        for n, (task, question, kind) in enumerate(asked, 1):
            print(f"{n}/{len(asked)}", file=sys.stderr, flush=True)
            for mode in MODES:
                started = time.process_time()
                got = [t["task_hash"] for t in search(question, mode)["tasks"]]
                rows.append({"mode": mode, "task": task, "kind": kind, "question": question,
                             "split": split(question), "got": got,
                             "ok": (task in got) if task is not None else not got,
                             "cpu": round(time.process_time() - started, 3)})
    summary: dict[str, Any] = {}
    for mode in MODES:
        for kind in ("related", "near", "general"):
            part = [r for r in rows if r["mode"] == mode and r["kind"] == kind]
            summary[f"{mode}/{kind}"] = f"{sum(r['ok'] for r in part)}/{len(part)} " \
                f"({100 * sum(r['ok'] for r in part) / max(1, len(part)):.1f} %)"
    if out:
        Path(out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1,
                                        ensure_ascii=False))
    print(json.dumps(summary, indent=1))


WORDS = ["deploy", "rotate", "renew", "backup", "restore", "upgrade", "invoice", "flight",
         "hotel", "report", "index", "query", "cache", "disk", "certificate", "release",
         "meeting", "budget", "refund", "translate", "recipe", "subscriber", "rotation",
         "migrate", "password", "server", "database", "kubernetes", "pipeline"]


def scale(n: int, rounds: int) -> None:
    import random

    rnd = random.Random(7)
    tasks = {}
    for i in range(n):
        words = rnd.sample(WORDS, 6)
        tasks[f"t{i}"] = {"objective": f"Task {i}: {' '.join(words[:3])} for project {i % 97}",
                          "reply": f"Done: {' '.join(words[3:])}; " + "details " * 30,
                          "tools": "x" * 2000}
    with tempfile.TemporaryDirectory(prefix="task-scale-") as tmp:
        home = Path(tmp) / "home"
        build(home, tasks)
        w0, c0 = time.perf_counter(), time.process_time()
        while ask(home, "warm up", "semantic", budget="600")["unindexed_count"]:
            pass  # every task embedded before anything is timed
        print(f"catch-up of {n} tasks: wall {time.perf_counter() - w0:.1f} s, CPU "
              f"{time.process_time() - c0:.1f} s, load {os.getloadavg()[0]:.1f}")
        for mode in MODES:
            wall, cpu = [], []
            for r in range(rounds):
                q = f"{WORDS[r % len(WORDS)]} {WORDS[(r * 7) % len(WORDS)]} project"
                w0, c0 = time.perf_counter(), time.process_time()
                ask(home, q, mode, limit=10)
                wall.append(time.perf_counter() - w0)
                cpu.append(time.process_time() - c0)
            print(f"| {n} tasks | {mode} | median wall {statistics.median(wall) * 1000:.0f} ms "
                  f"| median CPU {statistics.median(cpu) * 1000:.0f} ms | load "
                  f"{os.getloadavg()[0]:.1f} |")
        _stored_ab(home, rounds)
        _checked_ab(home, rounds)
        import sqlite3

        from agenvoy_cli.conversation import tasks as task_store
        from agenvoy_cli.search.task_corpus import TasksCorpus

        conn = sqlite3.connect(home / ".store" / "history.db")
        times = []
        for _ in range(rounds):
            w0 = time.perf_counter()
            corpus = TasksCorpus.__new__(TasksCorpus)  # its index alone, no store
            corpus.tasks, corpus._fts = task_store.every(conn), None
            corpus.index()
            times.append(time.perf_counter() - w0)
        print(f"read + in-memory FTS5 build alone, {n} tasks: median "
              f"{statistics.median(times) * 1000:.0f} ms")


def _stored_ab(home: Path, rounds: int) -> None:
    """Semantic search with the floor taking the stored task vectors (A) against embedding
    the top tasks' texts again (B, as before), interleaved on one home."""
    from agenvoy_cli.search.task_corpus import TasksCorpus

    stored = TasksCorpus.stored_vectors

    def use(arm: str) -> None:
        TasksCorpus.stored_vectors = (stored if arm == "stored"  # type: ignore[method-assign]
                                      else lambda self, keys: {})

    medians = harness.interleaved_ab(rounds, ("stored", "re-embed"), use, lambda r: ask(
        home, f"{WORDS[(r * 3) % len(WORDS)]} {WORDS[(r * 11) % len(WORDS)]} project",
        "semantic", limit=10))
    TasksCorpus.stored_vectors = stored  # type: ignore[method-assign]
    print(harness.ab_line("floor's vectors, semantic", rounds, medians,
                          ("stored", "re-embedded")))


def _checked_ab(home: Path, rounds: int) -> None:
    """Warm semantic search in one holder (a Memory, as the MCP server holds one) with the
    catch-up's check kept per generation token (A: search/task_corpus.py KEEP_CHECKED) against
    reading every task vector's metadata and hashing every task on each search (B, as
    before), interleaved."""
    from agenvoy_cli.search import task_corpus

    search = asker(home)
    search("warm up", "semantic")

    def use(arm: str) -> None:
        task_corpus.KEEP_CHECKED = arm == "kept"

    medians = harness.interleaved_ab(rounds, ("kept", "checked"), use, lambda r: search(
        f"{WORDS[(r * 5) % len(WORDS)]} {WORDS[(r * 13) % len(WORDS)]} project", "semantic"))
    task_corpus.KEEP_CHECKED = True
    print(harness.ab_line("catch-up check, warm holder, semantic", rounds, medians,
                          ("kept", "checked every search")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=["tune", "held-out", "all"], default="held-out")
    ap.add_argument("--out")
    ap.add_argument("--scale", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    os.environ.setdefault("TZ", "Asia/Taipei")
    time.tzset()
    print(f"load: {os.getloadavg()}", file=sys.stderr)
    if args.scale:
        scale(args.scale, args.rounds)
    else:
        floor(args.split, args.out)
    print(f"load: {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
