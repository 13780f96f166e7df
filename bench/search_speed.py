"""Search speed, each measured in fresh processes (what an agent calling the CLI pays).

    python bench/search_speed.py                   # both parts
    python bench/search_speed.py --skip-semantic   # keyword over 1M archived messages only
    python bench/search_speed.py --rows 200000 --runs 5

keyword   A home whose session "big" has --rows messages (default 1,000,000) in the archive
          (SQLite, below the trim point) and 16 in history.json. The rows are written by
          direct executemany into the project's schema (tokens = fts.index_text(body), as
          archive.insert does; the FTS5 triggers index them). Median process wall of
          `agenvoy search big Q --mode keyword --json` per query kind, against the median
          wall of `agenvoy append` on the same home (target: ratio <= 2).
semantic  A session of --vectors messages (default 10,000) in history.json, indexed once
          through index_session (indexing throughput). Then the median wall of
          `agenvoy search big Q --json` (semantic, new process) and, from an instrumented
          process, its parts: imports, Chroma client, model load, catch-up check, query.
Homes are cached under --work (delete it to rebuild).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gendata  # bench/ is this script's path[0]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NS = 1_000_000_000
QUERIES = {  # kind -> query (each must work as an every-term keyword query)
    "rare word": "zanzibar",
    "two words": "deploy timeout",
    "common word": "memory",
    "three words": "agent search window",
    "chinese 2 chars": "記憶",
    "no hit": "xylophonequartz",
}


def python() -> str:
    return sys.executable


def wall(cmd: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True)
        out.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-500:]}")
    return out


def text(rng: random.Random, i: int) -> str:
    """gendata's message, with one rare word every 200,000 (the "rare word" query)."""
    return gendata.text(rng, i) + (" zanzibar" if i % 200_000 == 7 else "")


# ----------------------------------------------------------------------------- keyword


def build_archive(home: Path, rows: int) -> None:
    from agenvoy_cli.conversation import archive
    from agenvoy_cli.conversation.messages import header_for, message_hash, strip_header
    from agenvoy_cli.home import fts
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.settings import Settings
    from agenvoy_cli.vectors.hooks import open_store

    done = home / ".built"
    if done.exists() and done.read_text() == str(rows):
        return
    if home.exists():
        import shutil

        shutil.rmtree(home)
    store = open_store(Layout(home), Settings())
    rng = random.Random(7)
    from datetime import datetime, timedelta

    t0 = datetime(2023, 1, 1)
    start = time.perf_counter()
    with store.write_lock():
        conn = store.db()
        conn.execute("PRAGMA synchronous = OFF")
        batch = []
        for i in range(rows):
            moment = t0 + timedelta(seconds=30 * i)
            role = "user" if i % 2 == 0 else "assistant"
            content = header_for(moment) + text(rng, i)
            send_at = int(moment.timestamp()) * NS
            batch.append(("big", send_at, role, content, i, message_hash(role, content),
                          json.dumps({"role": role, "content": content}, ensure_ascii=False),
                          fts.index_text(strip_header(content))))
            if len(batch) == 20_000:
                with store.transaction() as c:
                    c.executemany(
                        "INSERT INTO messages (session_id, send_at, role, content, seq, hash,"
                        " message, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch)
                batch = []
                print(f"\r  archive rows {i + 1:,}", end="", file=sys.stderr)
        if batch:
            with store.transaction() as c:
                c.executemany(
                    "INSERT INTO messages (session_id, send_at, role, content, seq, hash,"
                    " message, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch)
        with store.transaction() as c:
            c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            archive.set_start(c, "big", rows)  # all of it is below the trim point
    store.close()
    print(f"\n  built {rows:,} archived rows in {time.perf_counter() - start:.0f} s",
          file=sys.stderr)
    # the recent part: 16 messages appended through the CLI (history.json + SQLite)
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"recent {i} memory deploy timeout"} for i in range(16)]
    subprocess.run([python(), "-m", "agenvoy_cli", "append", "big", "--messages", "-"],
                   input=json.dumps(msgs).encode(), env=env, check=True, capture_output=True)
    done.write_text(str(rows))


def keyword_bench(home: Path, rows: int, runs: int) -> dict:
    build_archive(home, rows)
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    base = [python(), "-m", "agenvoy_cli"]
    wall(base + ["search", "big", "warm", "--mode", "keyword"], env, 2)  # page cache
    append = wall(base + ["append", "other", "--role", "user", "--content", "hi"], env, runs)
    out = {"rows": rows, "append_median_s": statistics.median(append), "queries": {}}
    for kind, q in QUERIES.items():
        times = wall(base + ["search", "big", q, "--mode", "keyword", "--json"], env, runs)
        res = subprocess.run(base + ["search", "big", q, "--mode", "keyword", "--json"],
                             env=env, capture_output=True, check=True)
        doc = json.loads(res.stdout)
        out["queries"][kind] = {"query": q, "median_s": statistics.median(times),
                                "hits": len(doc["results"]), "match": doc.get("match")}
    meds = [v["median_s"] for v in out["queries"].values()]
    out["search_median_s"] = statistics.median(meds)
    out["ratio"] = out["search_median_s"] / out["append_median_s"]
    out["worst_ratio"] = max(meds) / out["append_median_s"]
    return out


# ----------------------------------------------------------------------------- semantic

PARTS = r"""
import json, os, sys, time
t = time.perf_counter(); marks = {}
def lap(name):
    global t
    now = time.perf_counter(); marks[name] = now - t; t = now
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.vectors.hooks import open_store
from agenvoy_cli.search import catchup, engine as search
from agenvoy_cli.vectors import api as vectors
lap("import agenvoy_cli")
import chromadb
lap("import chromadb")
store = open_store(Layout(__import__("pathlib").Path(os.environ["AGENVOY_HOME"])))
with store.write_lock():
    vectors.open_index(store, vectors.MESSAGES, create=False)
lap("chroma client + collection")
vectors.embedder(store).embed_query("warm up")
lap("model load")
catchup.index_session(store, "big")
lap("catch-up check (nothing to embed)")
vec = vectors.embedder(store).embed_query(sys.argv[1])
lap("embed query")
search.vector_search(store, "big", sys.argv[1])
lap("search (lock, recent part, Chroma query, expansion)")
print(json.dumps(marks))
"""


def build_vectors(home: Path, count: int) -> dict:
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search import catchup
    from agenvoy_cli.settings import Settings
    from agenvoy_cli.vectors.hooks import open_store

    done = home / ".built"
    if done.exists() and done.read_text().startswith(f"{count} "):
        return json.loads(done.read_text().split(" ", 1)[1])
    if home.exists():
        import shutil

        shutil.rmtree(home)
    rng = random.Random(11)
    store = open_store(Layout(home), Settings(max_history_bytes=1 << 40))
    from datetime import datetime, timedelta

    t0 = datetime(2024, 1, 1)
    for b in range(0, count, 1000):
        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": text(rng, i)}
                for i in range(b, min(b + 1000, count))]
        store.append("big", msgs, t0 + timedelta(hours=b))
    start = time.perf_counter()
    added = catchup.index_session(store, "big")
    seconds = time.perf_counter() - start
    store.close()
    info = {"messages": count, "indexed": added, "index_s": seconds,
            "per_s": added / seconds if seconds else 0.0}
    done.write_text(f"{count} {json.dumps(info)}")
    return info


def semantic_bench(home: Path, count: int, runs: int) -> dict:
    info = build_vectors(home, count)
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    base = [python(), "-m", "agenvoy_cli"]
    q = "when did the database migration time out"
    wall(base + ["search", "big", q, "--json"], env, 1)
    times = wall(base + ["search", "big", q, "--json"], env, runs)
    parts: dict[str, list[float]] = {}
    for _ in range(runs):
        res = subprocess.run([python(), "-c", PARTS, q], env=env, capture_output=True,
                             check=True, cwd=ROOT)
        for k, v in json.loads(res.stdout.decode().splitlines()[-1]).items():
            parts.setdefault(k, []).append(v)
    return {**info, "median_s": statistics.median(times),
            "parts_median_s": {k: statistics.median(v) for k, v in parts.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-bench-speed"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--vectors", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--skip-keyword", action="store_true")
    ap.add_argument("--skip-semantic", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    doc: dict = {"load_before": os.getloadavg()}
    if not args.skip_keyword:
        k = doc["keyword"] = keyword_bench(args.work / "keyword", args.rows, args.runs)
        print(f"keyword over {k['rows']:,} archived messages (median of {args.runs} runs):")
        print(f"  agenvoy append        {k['append_median_s'] * 1000:7.0f} ms")
        for kind, v in k["queries"].items():
            print(f"  search {kind:15s}{v['median_s'] * 1000:7.0f} ms  "
                  f"({v['hits']} results, match {v['match']}) {v['query']!r}")
        print(f"  ratio search/append: median {k['ratio']:.2f}x, worst {k['worst_ratio']:.2f}x")
    if not args.skip_semantic:
        s = doc["semantic"] = semantic_bench(args.work / "semantic", args.vectors, args.runs)
        print(f"semantic over {s['messages']:,} indexed messages:")
        print(f"  indexing: {s['indexed']:,} messages in {s['index_s']:.0f} s "
              f"({s['per_s']:.0f} messages/s)")
        print(f"  agenvoy search (new process): median {s['median_s'] * 1000:.0f} ms")
        for k2, v in s["parts_median_s"].items():
            print(f"    {k2:55s}{v * 1000:7.0f} ms")
    doc["load_after"] = os.getloadavg()
    print(f"load average before {doc['load_before'][0]:.2f}, after {doc['load_after'][0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
