"""bench/scale: a home that grows. Every ratio of issue #16's target table, in one run.

Builds the homes from generated data through the CLI (history.json files written here, then
`agenvoy backfill` / `compact`, as a user importing an existing Agenvoy home would), then
measures fresh `agenvoy` processes: CPU (user+sys of the child, from wait4) beside wall.
The timed commands run interleaved, one of each per round, so machine noise hits every
series alike; medians over --runs rounds. The one-off big jobs (backfill, compact, doctor of
a 1M-message history.json) run once each, with their peak RSS (ru_maxrss of the child).

  keyword    `search s000 memory --mode keyword`: the oldest of 100 sessions, 1M messages
             archived in the home, a word in ~1 of 3 messages, and every session has since
             got one more message (its rows span the whole home)       vs `append`  <= 2x
  list       `session list` over 10,000 sessions                        vs `append`  <= 2x
  context    `context big` (5 MiB history.json) vs `context empty`                <= 1.1x
  backfill   one 1M-message history.json: peak RSS <= 300 MiB; messages per CPU-s >= 0.5x
             a bare SQLite insert of the same rows (same schema; FTS indexed set-wise as the
             fastest SQLite can do; measured in this run)
  compact    the same history.json (5 MiB limit): peak RSS <= 300 MiB (doctor alongside)
  semantic   `search s000 Q --mode semantic`, home of 50 sessions x 1k vectors vs a home
             holding only that session                                                <= 1.2x
             (embedder: a hashed-words model behind a local OpenAI-compatible endpoint, so
             the ratio shows the vector index, not the model)

Usage: python bench/scale.py [--runs 15] [--work /tmp/agenvoy-scale] [--small] [--json F]
Homes are cached under --work per size (delete it to rebuild). --small: 1/10 of every size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
from gendata import text  # bench/ is this script's path[0]

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


# ----------------------------------------------------------------------------- processes

def exe() -> list[str]:
    script = Path(sys.executable).with_name("agenvoy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agenvoy_cli"]


class Run:
    """One finished child: wall seconds, CPU seconds (user+sys), peak RSS in MiB."""

    def __init__(self, wall: float, cpu: float, rss: float, out: bytes) -> None:
        self.wall, self.cpu, self.rss, self.out = wall, cpu, rss, out


# Peak RSS is read by a small launcher: a child forked from this (big) process would carry
# the parent's pages in its ru_maxrss.
LAUNCH = r"""
import os, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
sys.stderr.write(err.decode())
print(os.waitstatus_to_exitcode(status), time.perf_counter() - start,
      usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
"""


def run_rss(cmd: list[str], env: dict[str, str]) -> Run:
    out = run([sys.executable, "-c", LAUNCH, *cmd], env, keep=True).out.split()
    if out[0] != b"0":
        raise SystemExit(f"{' '.join(cmd)} exited {out[0].decode()}")
    return Run(float(out[1]), float(out[2]), float(out[3]), b"")


def run(cmd: list[str], env: dict[str, str], stdin: bytes | None = None,
        keep: bool = False) -> Run:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE if keep else subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    out = b""
    if stdin is not None:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
    if keep:
        assert proc.stdout is not None
        out = proc.stdout.read()
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode()[-800:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out)


def agenvoy(home: Path, *args: str, stdin: bytes | None = None, keep: bool = False,
            env: dict[str, str] | None = None, rss: bool = False) -> Run:
    full = {**os.environ, **(env or {}), "AGENVOY_HOME": str(home)}
    if rss:
        return run_rss(exe() + list(args), full)
    return run(exe() + list(args), full, stdin, keep)


# ----------------------------------------------------------------------------- data

def message(rng: random.Random, i: int, t0: int) -> dict[str, str]:
    clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0 + 30 * i))
    return {"role": "user" if i % 2 == 0 else "assistant",
            "content": f"---\n當前時間: {clock}\n---\n{text(rng, i)}"}


def write_history(path: Path, count: int, seed: int, t0: int) -> int:
    """A history.json of `count` generated messages, written in pieces (bounded memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with open(path, "wb") as out:
        out.write(b"[")
        for lo in range(0, count, 10_000):
            part = [orjson.dumps(message(rng, i, t0)) for i in range(lo, min(lo + 10_000, count))]
            out.write((b"," if lo else b"") + b",".join(part))
        out.write(b"]\n")
    return path.stat().st_size


def built(home: Path, key: str) -> bool:
    marker = home / ".scale-built"
    return marker.exists() and marker.read_text() == key


def mark(home: Path, key: str) -> None:
    (home / ".scale-built").write_text(key)


def fresh(home: Path) -> None:
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)


T0 = 1_672_531_200  # 2023-01-01 UTC: every session starts later than the one before


def build_keyword(home: Path, sessions: int, per: int) -> None:
    key = f"keyword {sessions} {per} live"
    if built(home, key):
        return
    fresh(home)
    for s in range(sessions):  # s000 is the oldest: first written, lowest row ids
        write_history(home / "sessions" / f"s{s:03d}" / "history.json", per, s, T0 + s * per * 30)
    agenvoy(home, "backfill", "--all")
    agenvoy(home, "compact", "--all", "--max-bytes", "65536")
    for s in range(sessions):  # live sessions: each gets a new message, newest rows last
        agenvoy(home, "append", f"s{s:03d}", "--role", "user", "--content",
                "a memory of today")
    mark(home, key)


def migration_cost(work: Path) -> dict[str, Any]:
    """The one-time upgrade of the keyword home (1M messages) from schema 8: a copy put back
    in the old shape, then the first command (a search) migrates it; CPU, wall, peak RSS."""
    src, home = work / "keyword", work / "migrate"
    fresh(home)
    shutil.copytree(src / "sessions", home / "sessions")
    (home / ".store").mkdir()
    conn = sqlite3.connect(src / ".store" / "history.db")
    conn.execute(f"VACUUM INTO '{home / '.store' / 'history.db'}'")
    conn.close()
    sys.path.insert(0, str(ROOT))
    from tests.old_schemas import V8_MESSAGES_FTS

    conn = sqlite3.connect(home / ".store" / "history.db")
    conn.executescript(V8_MESSAGES_FTS)
    conn.close()
    first = agenvoy(home, "search", "s000", "memory", "--mode", "keyword", "--json", rss=True)
    shutil.rmtree(home)
    return {"wall": first.wall, "cpu": first.cpu, "rss": first.rss}


def build_list(home: Path, sessions: int) -> None:
    key = f"list {sessions}"
    if built(home, key):
        return
    fresh(home)
    for s in range(sessions):
        write_history(home / "sessions" / f"s{s:05d}" / "history.json", 4, s, T0 + s * 600)
    agenvoy(home, "backfill", "--all")
    mark(home, key)


def build_context(home: Path) -> None:
    if built(home, "context"):
        return
    fresh(home)
    path = home / "sessions" / "big" / "history.json"
    count = 1
    while write_history(path, count, 1, T0) < 5 * MIB:
        count = math.ceil(count * 5 * MIB / path.stat().st_size * 1.02)
    (home / "sessions" / "empty").mkdir(parents=True)
    (home / "sessions" / "empty" / "history.json").write_bytes(b"[]\n")
    env = {"AGENVOY_MAX_HISTORY_BYTES": str(8 * MIB)}
    agenvoy(home, "backfill", "--all", env=env)
    mark(home, "context")


# ----------------------------------------------------------------------------- embeddings

def hashed_vector(text: str, dim: int = 384) -> list[float]:
    v = [0.0] * dim
    for word in re.findall(r"[\u4e00-\u9fff]|\w+", text.lower()):
        v[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % dim] += 1
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


class Embeddings:
    """A local OpenAI-compatible /v1/embeddings endpoint serving hashed-words vectors."""

    def __enter__(self) -> Embeddings:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = orjson.dumps({"object": "list", "model": body.get("model"), "data": [
                    {"object": "embedding", "index": i, "embedding": hashed_vector(t)}
                    for i, t in enumerate(texts)]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()

    @property
    def env(self) -> dict[str, str]:
        return {"AGENVOY_EMBEDDER": "openai:hashed-words",
                "AGENVOY_EMBED_BASE_URL": f"http://127.0.0.1:{self.server.server_port}/v1",
                "AGENVOY_EMBED_API_KEY": "local", "AGENVOY_EMBED_DIM": "384"}


def build_semantic(home: Path, sessions: int, per: int, env: dict[str, str]) -> None:
    key = f"semantic {sessions} {per}"
    if built(home, key):
        return
    fresh(home)
    for s in range(sessions):
        write_history(home / "sessions" / f"s{s:03d}" / "history.json", per, 1000 + s,
                      T0 + s * per * 30)
    agenvoy(home, "backfill", "--all", "--vectors", env={**env, "AGENVOY_MAX_HISTORY_BYTES":
                                                         str(64 * MIB)})
    mark(home, key)


# ----------------------------------------------------------------------------- big file

FLOOR = r"""
import sqlite3, sys, time
src, dst, fts = sys.argv[1], sys.argv[2], sys.argv[3] == "fts"
rows = sqlite3.connect(src).execute(
    "SELECT session_id, send_at, role, content, seq, hash, message, tokens FROM messages"
).fetchall()
conn = sqlite3.connect(dst, isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL"); conn.execute("PRAGMA synchronous = FULL")
started = time.process_time()
conn.execute("BEGIN IMMEDIATE")
# the FTS tables over messages, indexed set-wise after the insert (the fastest way SQLite has)
triggers = conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                        "AND tbl_name = 'messages' AND sql LIKE '%AFTER INSERT%'").fetchall()
for (name,) in triggers:
    conn.execute(f'DROP TRIGGER "{name}"')
conn.executemany("INSERT INTO messages (session_id, send_at, role, content, seq, hash, "
                 "message, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                            "sql LIKE '%USING fts5%content=%messages%'").fetchall() * fts:
    conn.execute(f"INSERT INTO {name}({name}) VALUES ('rebuild')")
conn.execute("COMMIT")
print(len(rows), time.process_time() - started)
"""


def empty_schema(template: Path, target: Path) -> None:
    """A database with the schema of `template` (tables, indexes, triggers) and no rows."""
    target.unlink(missing_ok=True)
    src = sqlite3.connect(template)
    dst = sqlite3.connect(target, isolation_level=None)
    version = src.execute("PRAGMA user_version").fetchone()[0]
    for (sql,) in src.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name "
                              "NOT LIKE 'sqlite_%' ORDER BY CASE type WHEN 'table' THEN 0 "
                              "WHEN 'index' THEN 1 ELSE 2 END, rowid"):
        # fts5 shadow tables are created by their virtual table
        if re.match(r"CREATE TABLE '?\w+_(data|idx|content|docsize|config)'?", sql):
            continue
        dst.execute(sql)
    dst.execute(f"PRAGMA user_version = {version}")
    src.close()
    dst.close()


def big_file(work: Path, count: int) -> dict[str, Any]:
    home = work / "big"
    fresh(home)
    path = home / "sessions" / "big" / "history.json"
    size = write_history(path, count, 99, T0)
    out: dict[str, Any] = {"messages": count, "mib": size / MIB}
    backfill = agenvoy(home, "backfill", "big", rss=True)
    out["backfill"] = {"wall": backfill.wall, "cpu": backfill.cpu, "rss": backfill.rss,
                       "per_cpu_s": count / backfill.cpu}
    floor_db = work / "floor.db"
    for kind in ("fts", "plain"):  # plain: no full-text index at all, for reference
        empty_schema(home / ".store" / "history.db", floor_db)
        res = run([sys.executable, "-c", FLOOR, str(home / ".store" / "history.db"),
                   str(floor_db), kind], dict(os.environ), keep=True)
        rows, cpu = res.out.split()
        out["floor" if kind == "fts" else "floor_plain"] = {
            "rows": int(rows), "cpu": float(cpu), "per_cpu_s": int(rows) / float(cpu)}
        floor_db.unlink()
        for suffix in ("-wal", "-shm"):
            floor_db.with_name(floor_db.name + suffix).unlink(missing_ok=True)
    doctor = agenvoy(home, "doctor", "big", rss=True)
    out["doctor"] = {"wall": doctor.wall, "cpu": doctor.cpu, "rss": doctor.rss}
    compact = agenvoy(home, "compact", "big", "--max-bytes", str(5 * MIB), rss=True)
    out["compact"] = {"wall": compact.wall, "cpu": compact.cpu, "rss": compact.rss,
                      "mib_after": path.stat().st_size / MIB}
    shutil.rmtree(home)
    return out


# ----------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-scale"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--small", action="store_true", help="1/10 of every size (a quick look)")
    ap.add_argument("--skip-big", action="store_true", help="no backfill/compact of 1M")
    ap.add_argument("--migration", action="store_true",
                    help="also time the upgrade of the keyword home from schema 8")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    div = 10 if args.small else 1
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import agenvoy_cli

    # byte-compiled as an install would be (PYTHONDONTWRITEBYTECODE is set on this machine)
    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
    work = args.work / ("small" if args.small else "full")
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    doc: dict[str, Any] = {"runs": args.runs, "small": args.small}
    with Embeddings() as emb:
        print("building homes (cached under", work, ")", file=sys.stderr)
        build_keyword(work / "keyword", 100, 10_000 // div)
        build_list(work / "list", 10_000 // div)
        build_context(work / "context")
        build_semantic(work / "semantic50", 50, 1000 // div, emb.env)
        build_semantic(work / "semantic1", 1, 1000 // div, emb.env)
        scratch = work / "append"
        fresh(scratch)
        series: dict[str, list[Run]] = {}
        cmds: dict[str, tuple[Path, list[str], dict[str, str]]] = {
            "append": (scratch, [], {}),
            "keyword": (work / "keyword", ["search", "s000", "memory", "--mode", "keyword",
                                           "--json"], {}),
            "list": (work / "list", ["session", "list"], {}),
            "list --json": (work / "list", ["session", "list", "--json"], {}),
            "context 5 MiB": (work / "context", ["context", "big", "--json"], {}),
            "context empty": (work / "context", ["context", "empty", "--json"], {}),
            "semantic 50x1k": (work / "semantic50", ["search", "s000", "database migration "
                                                     "timeout", "--mode", "semantic", "--json"],
                               emb.env),
            "semantic 1x1k": (work / "semantic1", ["search", "s000", "database migration "
                                                   "timeout", "--mode", "semantic", "--json"],
                              emb.env),
        }
        for home, argv, env in cmds.values():  # warm the page cache, check it works
            if argv:
                agenvoy(home, *argv, env=env)
        print(f"timing {args.runs} interleaved rounds", file=sys.stderr)
        for r in range(args.runs):
            for name, (home, argv, env) in cmds.items():
                argv = argv or ["append", f"fresh{r}", "--role", "user", "--content", "hi"]
                series.setdefault(name, []).append(agenvoy(home, *argv, env=env))
    med = {k: {"wall": statistics.median(r.wall for r in v),
               "cpu": statistics.median(r.cpu for r in v)} for k, v in series.items()}
    doc["median"] = med
    if not args.skip_big:
        print(f"backfill/doctor/compact of one {1_000_000 // div:,}-message history.json",
              file=sys.stderr)
        doc["big"] = big_file(work, 1_000_000 // div)
    if args.migration:
        print("upgrade of the keyword home from schema 8", file=sys.stderr)
        doc["migration"] = migration_cost(work)
    doc["load"] = [load_before, os.getloadavg()[0]]

    def ratio(a: str, b: str) -> tuple[float, float]:
        return med[a]["cpu"] / med[b]["cpu"], med[a]["wall"] / med[b]["wall"]

    rows: list[tuple[str, str, str, str]] = []
    for label, a, b, target in (
        ("keyword, common word, oldest of 100 sessions", "keyword", "append", 2.0),
        ("session list, 10,000 sessions", "list", "append", 2.0),
        ("session list --json, 10,000 sessions", "list --json", "append", 2.0),
        ("context, 5 MiB vs empty history.json", "context 5 MiB", "context empty", 1.1),
        ("semantic, 50 sessions x 1k vs 1 session", "semantic 50x1k", "semantic 1x1k", 1.2),
    ):
        cpu, wall = ratio(a, b)
        rows.append((label, f"{cpu:.2f}x CPU ({wall:.2f}x wall)", f"<= {target}x",
                     "ok" if cpu <= target else "MISSED"))
    if "big" in doc:
        big = doc["big"]
        for name in ("backfill", "compact", "doctor"):
            rss = big[name]["rss"]
            rows.append((f"{name} of a {big['messages']:,}-message history.json, peak RSS",
                         f"{rss:.0f} MiB", "<= 300 MiB", "ok" if rss <= 300 else "MISSED"))
        through = big["backfill"]["per_cpu_s"] / big["floor"]["per_cpu_s"]
        rows.append(("backfill throughput vs bare SQLite insert",
                     f"{through:.2f}x ({big['backfill']['per_cpu_s']:,.0f} vs "
                     f"{big['floor']['per_cpu_s']:,.0f} msg/CPU-s)", ">= 0.5x",
                     "ok" if through >= 0.5 else "MISSED"))
    size = "1/10 sizes (--small)" if args.small else "full sizes"
    print(f"\n{args.runs} interleaved rounds, {size}; medians (ms): CPU / wall")
    for k, v in med.items():
        print(f"  {k:16s} {v['cpu'] * 1000:8.1f} / {v['wall'] * 1000:8.1f}")
    if "big" in doc:
        big = doc["big"]
        print(f"  one history.json: {big['messages']:,} messages, {big['mib']:.0f} MiB")
        for name in ("backfill", "doctor", "compact"):
            b = big[name]
            print(f"  {name:16s} {b['cpu']:8.1f} s CPU / {b['wall']:6.1f} s wall, "
                  f"peak RSS {b['rss']:6.0f} MiB")
        print(f"  bare SQLite insert of the same rows: {big['floor']['cpu']:.1f} s CPU with the "
              f"FTS tables indexed set-wise, {big['floor_plain']['cpu']:.1f} s without FTS")
    if "migration" in doc:
        m = doc["migration"]
        print(f"  migration 009-010 of the keyword home (first search after the upgrade): "
              f"{m['cpu']:.1f} s CPU / {m['wall']:.1f} s wall, peak RSS {m['rss']:.0f} MiB")
    width = max(len(r[0]) for r in rows)
    print(f"\n{'work':{width}s}  {'measured':38s} {'target':12s}")
    for label, value, target, verdict in rows:
        print(f"{label:{width}s}  {value:38s} {target:12s} {verdict}")
    print(f"load average {doc['load'][0]:.2f} before, {doc['load'][1]:.2f} after")
    doc["table"] = rows
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
