"""Keyword search cost in a home of many sessions: does it follow the session or the home?

    python bench/keyword_sessions.py                 # 100 sessions x 10,000 messages
    python bench/keyword_sessions.py --code /tmp/old # the same home, another checkout

A home of --sessions sessions of --per archived messages each (1,000,000 by default),
written one session after another (s000 is the oldest: the lowest row ids), rows written by
direct executemany into the project's schema (tokens = fts.index_text, as archive.insert
does), then 2 messages per session appended through `agenvoy append`. Measured in fresh
processes, interleaved: `agenvoy append`, `agenvoy search s000 memory --mode keyword
--json` (a word in most messages, the oldest session) and the same in the newest session;
medians of child CPU time (user + sys) and wall, and the ratios to append (#16: <= 2x).
--code runs the commands from another checkout (PYTHONPATH) on the same home.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
NS = 1_000_000_000
_WORDS = """memory agent session search archive vector index compact summary error tool retry
deploy server database migration timeout config backup restore network cache python sqlite
query result token window context user message"""
WORDS = _WORDS.split()


def text(rng: random.Random, i: int) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 30))]
    if rng.random() < 0.8:
        words.append("memory")
    return f"message {i}: " + " ".join(words)


def build(home: Path, sessions: int, per: int) -> None:
    from datetime import datetime, timedelta

    from agenvoy_cli.conversation import archive
    from agenvoy_cli.conversation.messages import header_for, message_hash, strip_header
    from agenvoy_cli.home import fts
    from agenvoy_cli.home.config import Settings
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store

    done = home / ".built"
    if done.exists() and done.read_text() == f"{sessions} {per}":
        return
    if home.exists():
        import shutil

        shutil.rmtree(home)
    store = open_store(Layout(home), Settings())
    rng = random.Random(7)
    t0 = datetime(2023, 1, 1)
    start = time.perf_counter()
    with store.write_lock():
        conn = store.db()
        conn.execute("PRAGMA synchronous = OFF")
        for s in range(sessions):
            sid = f"s{s:03d}"
            batch = []
            for i in range(per):
                moment = t0 + timedelta(seconds=30 * (s * per + i))
                role = "user" if i % 2 == 0 else "assistant"
                content = header_for(moment) + text(rng, i)
                batch.append((sid, int(moment.timestamp()) * NS, role, content, i,
                              message_hash(role, content),
                              json.dumps({"role": role, "content": content}),
                              fts.index_text(strip_header(content))))
            with store.transaction() as c:
                c.executemany(
                    "INSERT INTO messages (session_id, send_at, role, content, seq, hash,"
                    " message, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch)
                archive.set_start(c, sid, per)
            print(f"\r  sessions {s + 1}/{sessions}", end="", file=sys.stderr)
        with store.transaction() as c:
            c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
    store.close()
    print(f"\n  built in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    for s in range(sessions):
        msgs = [{"role": "user", "content": "recent memory"},
                {"role": "assistant", "content": "ok"}]
        subprocess.run([sys.executable, "-m", "agenvoy_cli", "append", f"s{s:03d}",
                        "--messages", "-"], input=json.dumps(msgs).encode(), env=env,
                       check=True, capture_output=True)
    done.write_text(f"{sessions} {per}")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(child CPU seconds, wall seconds) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-bench-kwsessions"))
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--per", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--code", type=Path, default=ROOT, help="checkout whose CLI is measured")
    args = ap.parse_args()
    home = args.work / f"{args.sessions}x{args.per}"
    build(home, args.sessions, args.per)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.code / "agenvoy_cli")],
                   check=True)
    env = {**os.environ, "AGENVOY_HOME": str(home), "PYTHONPATH": str(args.code),
           "PYTHONDONTWRITEBYTECODE": "1"}
    base = [sys.executable, "-m", "agenvoy_cli"]
    newest = f"s{args.sessions - 1:03d}"
    cmds = {
        "append": base + ["append", "scratch", "--role", "user", "--content", "hi"],
        "keyword oldest": base + ["search", "s000", "memory", "--mode", "keyword", "--json"],
        "keyword newest": base + ["search", newest, "memory", "--mode", "keyword", "--json"],
    }
    for cmd in cmds.values():  # page cache, schema migration of an older home
        timed(cmd, env)
    series: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            series[name].append(timed(cmd, env))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
           for k, v in series.items()}
    print(f"{args.sessions} sessions x {args.per:,} messages, code {args.code}, "
          f"{args.runs} interleaved rounds, load {os.getloadavg()[0]:.1f}")
    for name, (cpu, wall) in med.items():
        print(f"  {name:15s} CPU {cpu * 1000:7.1f} ms  wall {wall * 1000:7.1f} ms  "
              f"x append: CPU {cpu / med['append'][0]:.2f}  wall {wall / med['append'][1]:.2f}")


if __name__ == "__main__":
    main()
