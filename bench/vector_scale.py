"""Semantic search cost against the size of the home, and what cross-process freshness costs.

    python bench/vector_scale.py [--sessions 50] [--vectors 1000] [--pairs 15]

Builds two homes under --work (cached; delete to rebuild) with the stand-in embedder of
tests/words_embedder.py (512-d; no model, so the numbers are the index's, not the model's):
  big    --sessions sessions of --vectors messages each, every one indexed;
  alone  only the measured session, the same messages.
Each measurement is a fresh process running the real CLI in-process
(`python -m tests.vector_workers serve` with one command: `search s0 Q --mode semantic`),
reporting the CPU and wall time of that command (imports, chromadb's included, excluded: they
are the same in both; what is left is opening the client, the catch-up check and the query).
Pairs are interleaved (big, alone, big, alone, ...); medians and the ratio are printed.

Then, in one long-lived process, the cost of the generation check: a search when no other
process wrote (token read only) against a search right after another process wrote one
vector to another session (the client is reopened and the session's HNSW reloaded).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_TEXT = ("memory agent session search archive vector index compact summary error tool retry "
         "deploy server database migration timeout config backup restore network cache "
         "python golang sqlite chroma embed model query result token window context user "
         "assistant message history budget meeting travel dinner project release bug fix")
WORDS = _TEXT.split()

TIMED = """
import sys, time, resource
sys.argv = ["x"]
from tests.vector_workers import install_words, invoke
install_words()
import chromadb, agenvoy_cli.search.engine, agenvoy_cli.vectors.api  # imports: not timed
args = {args!r}
c0, w0 = time.process_time(), time.perf_counter()
code, err = invoke(args)
print(time.process_time() - c0, time.perf_counter() - w0, code)
"""


def env_for(home: Path) -> dict[str, str]:
    return {**os.environ, "AGENVOY_HOME": str(home), "OMP_NUM_THREADS": "1",
            "AGENVOY_MAX_HISTORY_BYTES": str(10**9), "AGENVOY_LOCK_TIMEOUT": "120"}


def serve(home: Path, commands: list[tuple[list[str], bytes | None]]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tests.vector_workers", "serve"],
                            env=env_for(home), cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    for args, data in commands:
        proc.stdin.write(orjson.dumps({"args": args, "stdin": data.decode() if data else None})
                         + b"\n")
        proc.stdin.flush()
        doc = orjson.loads(proc.stdout.readline())
        assert doc["code"] == 0, (args, doc)
    proc.stdin.close()
    proc.wait()


def build(home: Path, sessions: int, n: int, only_first: bool) -> None:
    if (home / ".built").exists():
        return
    rng = random.Random(7)
    cmds = []
    for s in range(1 if only_first else sessions):
        rng.seed(1000 + s)
        batch = orjson.dumps([{"role": "user" if i % 2 == 0 else "assistant",
                               "content": f"s{s}-{i} " + " ".join(rng.choices(WORDS, k=20))}
                              for i in range(n)])
        cmds += [(["append", f"s{s}", "--messages", "-"], batch),
                 (["backfill", f"s{s}", "--vectors"], None)]
    started = time.monotonic()
    serve(home, cmds)
    (home / ".built").write_text(f"{time.monotonic() - started:.1f}")


def timed(home: Path, args: list[str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", TIMED.format(args=args)], env=env_for(home),
                         cwd=ROOT, capture_output=True, text=True, check=True)
    cpu, wall, code = out.stdout.split()
    assert code == "0", out.stderr
    return float(cpu), float(wall)


def freshness(home: Path, pairs: int) -> dict[str, float]:
    """In one process: search (nobody wrote) vs search after another process wrote."""
    script = f"""
import sys, time, subprocess, orjson
sys.argv = ["x"]
from tests.vector_workers import install_words, invoke
install_words()
from agenvoy_cli.vectors import guard
reloads = []
_refresh = guard.refresh_if_stale
def counted(store, close):
    done = _refresh(store, close)
    reloads.extend([1] if done else [])
    return done
guard.refresh_if_stale = counted  # the bench counts the client reopenings itself
args = ["search", "s0", "deploy database", "--mode", "semantic", "--json"]
invoke(args)
quiet, after = [], []
for i in range({pairs}):
    c0 = time.process_time(); invoke(args); quiet.append(time.process_time() - c0)
    subprocess.run([sys.executable, "-c", WRITE], check=True)
    c0 = time.process_time(); invoke(args); after.append(time.process_time() - c0)
print(orjson.dumps({{"quiet": quiet, "after": after, "reloads": len(reloads)}}).decode())
"""
    write = ("import sys; sys.argv=['x']\nfrom tests.vector_workers import install_words, invoke\n"
             "install_words()\nimport io\n"
             "code, err = invoke(['append', 's1', '--role', 'user', '--content', 'one more'])\n"
             "assert code == 0, err\n"
             "code, err = invoke(['backfill', 's1', '--vectors'])\nassert code == 0, err\n")
    out = subprocess.run([sys.executable, "-c", f"WRITE = {write!r}\n" + script],
                         env=env_for(home), cwd=ROOT, capture_output=True, text=True, check=True)
    doc = orjson.loads(out.stdout.strip().splitlines()[-1])
    return {"quiet_cpu_ms": statistics.median(doc["quiet"]) * 1000,
            "after_write_cpu_ms": statistics.median(doc["after"]) * 1000,
            "reloads": doc["reloads"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--vectors", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-bench-vector-scale"))
    args = parser.parse_args()
    big = args.work / f"big-{args.sessions}x{args.vectors}"
    alone = args.work / f"alone-{args.vectors}"
    build(big, args.sessions, args.vectors, only_first=False)
    build(alone, args.sessions, args.vectors, only_first=True)
    print(f"built: big {(big / '.built').read_text()} s, alone {(alone / '.built').read_text()} s")
    query = ["search", "s0", "deploy database timeout", "--mode", "semantic", "--json"]
    timed(big, query), timed(alone, query)  # warm the page cache
    res: dict[str, list[tuple[float, float]]] = {"big": [], "alone": []}
    for _ in range(args.pairs):
        res["big"].append(timed(big, query))
        res["alone"].append(timed(alone, query))
    med = {k: (statistics.median(c for c, _ in v), statistics.median(w for _, w in v))
           for k, v in res.items()}
    print(f"semantic search, session s0 ({args.vectors} vectors), median of {args.pairs} "
          "interleaved pairs, fresh process, imports excluded:")
    for k, (cpu, wall) in med.items():
        print(f"  {k:6s} cpu {cpu * 1000:7.1f} ms   wall {wall * 1000:7.1f} ms")
    print(f"  ratio big/alone: cpu {med['big'][0] / med['alone'][0]:.2f}x   "
          f"wall {med['big'][1] / med['alone'][1]:.2f}x   (target <= 1.2x)")
    f = freshness(big, max(5, args.pairs // 2))
    print(f"long-lived process, search CPU: nobody wrote {f['quiet_cpu_ms']:.1f} ms; "
          f"after another process wrote {f['after_write_cpu_ms']:.1f} ms "
          f"({f['reloads']} reloads)")


if __name__ == "__main__":
    main()
