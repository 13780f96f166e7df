"""Vectors Chroma's HNSW graph holds but no search reaches, with the graph parameters of older
versions (Chroma's defaults: construction_ef 100, M 16) and of today (vectors/collection.py
CONSTRUCTION_EF, NEIGHBOURS); and what today's cost.

    python bench/hnsw_unreachable.py census [--n 5000] [--builds 2]
    python bench/hnsw_unreachable.py cost [--messages 10000] [--rounds 5]

census: raw chromadb, 384-d unit vectors, added 1,000 at a time into a collection made as ours
are (cosine, sync_threshold and batch_size 100, search_ef 1000); per set and parameters, how
many ids one query as wide as the collection (n_results = count: vectors/check.py
unreachable) never returns, for each of --builds builds (Chroma inserts on several threads:
every build differs). The sets: vectors around 20 directions with a share of them exact
copies of one vector (`one`), of one of the 20 directions (`many`), or copies of one vector
with noise 1e-3 (`near`); also printed, the build's wall time and the census query's.

cost: the path users run. Per round a fresh home, a session of --messages messages (6 % "ok
thanks", 4 % one tool output, the rest varied), then `agenvoy backfill s --vectors` timed in a
fresh process (CPU and wall of that command only; imports and the append are not timed), once
as an older version did (a collection with Chroma's default graph, no census after an add:
vectors/collection.py REACH_ROUNDS 0) and once as this version does, interleaved (old, new,
new, old, ...; `--variants old,params,new` adds today's graph without the census after an
add, to tell the two costs apart); then, in the same
process, the census of the session's collection and the CPU of 50 queries (n_results 8, the
width of a search). Medians. The embedder is tests/words_embedder.py's hashed words (512-d, no
model): what is left is Chroma's; a real model's embedding time is the same in both.
Byte-compile first: `python -m compileall -q agenvoy_cli`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OLD = {"hnsw:space": "cosine", "hnsw:sync_threshold": 100, "hnsw:batch_size": 100,
       "hnsw:search_ef": 1000}
SETS = [("one", 0.01), ("one", 0.05), ("one", 0.10), ("one", 0.30), ("many", 0.05),
        ("many", 0.10), ("near", 0.05), ("near", 0.20)]


def vectors(n: int, kind: str, share: float, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    dim = 384
    base = rng.normal(size=(20, dim))
    out = []
    for _ in range(n):
        if rng.random() < share:
            v = base[0 if kind in ("one", "near") else rng.integers(20)].copy()
            if kind == "near":
                v = v / np.linalg.norm(v) + rng.normal(size=dim) * 1e-3 / np.sqrt(dim)
        else:
            v = rng.normal(size=dim) + 3 * base[rng.integers(20)]
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32)


def census_build(vecs, params: dict) -> tuple[int, float, float]:
    import chromadb
    from chromadb.config import Settings

    n = len(vecs)
    with tempfile.TemporaryDirectory() as tmp:
        client = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
        col = client.create_collection("bench", metadata={**OLD, **params})
        t0 = time.perf_counter()
        for i in range(0, n, 1000):
            col.upsert(ids=[str(j) for j in range(i, min(n, i + 1000))],
                       embeddings=vecs[i:i + 1000].tolist())
        built = time.perf_counter() - t0
        probe = [[1.0] + [0.0] * (vecs.shape[1] - 1)]
        t0 = time.perf_counter()
        got = col.query(query_embeddings=probe, n_results=n, include=[])
        asked = time.perf_counter() - t0
        return n - len(set(got["ids"][0])), built, asked


def census(args: argparse.Namespace) -> None:
    from agenvoy_cli.vectors.collection import CONSTRUCTION_EF, NEIGHBOURS

    new = {"hnsw:construction_ef": CONSTRUCTION_EF, "hnsw:M": NEIGHBOURS}
    print(f"{args.n} vectors; unreachable per build (old: construction_ef 100, M 16; new: "
          f"{CONSTRUCTION_EF}, {NEIGHBOURS})")
    for kind, share in SETS:
        vecs = vectors(args.n, kind, share)
        row: dict[str, list[tuple[int, float, float]]] = {"old": [], "new": []}
        for _ in range(args.builds):
            row["old"].append(census_build(vecs, {}))
            row["new"].append(census_build(vecs, new))
        said = "  ".join(f"{name} {[r[0] for r in rows]} build "
                         f"{statistics.median(r[1] for r in rows):.1f} s census "
                         f"{statistics.median(r[2] for r in rows) * 1000:.0f} ms"
                         for name, rows in row.items())
        print(f"{kind:4} {share:4.0%}  {said}", flush=True)


CHILD = """
import sys, time, statistics, orjson
sys.argv = ["x"]
from tests.vector_workers import install_words, invoke
install_words()
import chromadb, agenvoy_cli.vectors.api  # imports: not timed
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.vectors.hooks import open_store
from agenvoy_cli.vectors.collection import client
from agenvoy_cli.vectors.messages import MessageIndex, collection_for
from agenvoy_cli.vectors.check import unreachable
from tests.words_embedder import WordsEmbedder
variant, old, messages, home = orjson.loads(sys.stdin.buffer.read())
code, err = invoke(["append", "s", "--messages", "-", "--no-compact"], messages.encode())
assert code == 0, err
store = open_store(Layout(__import__("pathlib").Path(home)))
import agenvoy_cli.vectors.collection as collection
if variant != "new":  # no census after an add, as an older version
    collection.REACH_ROUNDS = 0
if variant == "old":  # Chroma's default graph, as an older version made it
    with store.write_lock():
        client(store).create_collection(collection_for("s"), embedding_function=None,
            metadata={**old, "model_id": WordsEmbedder.model_id, "dim": WordsEmbedder.dim,
                      "session_id": "s"})
c0, w0 = time.process_time(), time.perf_counter()
code, err = invoke(["backfill", "s", "--vectors"])
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
assert code == 0, err
with store.write_lock():
    col = MessageIndex(store).session("s").collection
    c0 = time.perf_counter()
    lost = len(unreachable(col))
    census = time.perf_counter() - c0
    emb = WordsEmbedder()
    got = col.get(limit=50, include=["documents"])
    qs = [emb.vec(f"w{i} w{i + 7} ok tool output") for i in range(50)]
    times = []
    for q in qs:
        c0 = time.process_time()
        col.query(query_embeddings=[q], n_results=8, include=["distances"])
        times.append(time.process_time() - c0)
print(orjson.dumps({"cpu": cpu, "wall": wall, "lost": lost, "census": census,
                    "query_cpu": statistics.median(times), "count": col.count()}).decode())
"""


def session_messages(n: int, seed: int) -> str:
    import random

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)]
    out = []
    for i in range(n):
        draw = rng.random()
        text = "ok thanks" if draw < 0.06 else "build passed: 0 failures" if draw < 0.10 \
            else " ".join(rng.sample(vocab, 6))
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return orjson.dumps(out).decode()


def cost_round(variant: str, messages: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "AGENVOY_HOME": tmp, "OMP_NUM_THREADS": "1",
               "AGENVOY_MAX_HISTORY_BYTES": str(10**9), "AGENVOY_LOCK_TIMEOUT": "120"}
        out = subprocess.run([sys.executable, "-c", CHILD], input=orjson.dumps(
            [variant, OLD, messages, tmp]), capture_output=True, env=env, cwd=ROOT,
            check=False)
        if out.returncode:
            raise SystemExit(out.stderr.decode()[-3000:])
        return dict(orjson.loads(out.stdout.splitlines()[-1]))


def cost(args: argparse.Namespace) -> None:
    messages = session_messages(args.messages, 0)
    names = args.variants.split(",")
    rows: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            got = cost_round(name, messages)
            rows[name].append(got)
            print(f"round {r} {name}: backfill CPU {got['cpu']:.1f} s wall {got['wall']:.1f} s,"
                  f" unreachable {got['lost']} of {got['count']}, census "
                  f"{got['census'] * 1000:.0f} ms, query CPU {got['query_cpu'] * 1000:.2f} ms",
                  flush=True)
    print(f"medians over {args.rounds} rounds, {args.messages} messages:")
    for name, got in rows.items():
        med = {k: statistics.median(g[k] for g in got) for k in
               ("cpu", "wall", "census", "query_cpu")}
        print(f"  {name}: backfill --vectors CPU {med['cpu']:.1f} s, wall {med['wall']:.1f} s; "
              f"census {med['census'] * 1000:.0f} ms; query CPU {med['query_cpu'] * 1000:.2f} "
              f"ms; unreachable {[g['lost'] for g in got]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("census")
    c.add_argument("--n", type=int, default=5000)
    c.add_argument("--builds", type=int, default=2)
    k = sub.add_parser("cost")
    k.add_argument("--messages", type=int, default=10000)
    k.add_argument("--rounds", type=int, default=5)
    k.add_argument("--variants", default="old,new",
                   help="old, params (today's graph, no census after an add), new")
    args = ap.parse_args()
    census(args) if args.what == "census" else cost(args)


if __name__ == "__main__":
    main()
