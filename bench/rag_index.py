"""Indexing rate and recall of `agenvoy rag`.

    python bench/rag_index.py                          # agenvoy_cli + tests, default model
    python bench/rag_index.py --embedder hashed        # the pipeline alone (no model)
    python bench/rag_index.py --max-files 15           # a short run with the real model
    python bench/rag_index.py tests/data/rag --paraphrases

Indexes the given folders (default: the project's own agenvoy_cli and tests) into a fresh
temporary home, timing the whole run and the embedding calls apart (files/s, chunks/s),
then an unchanged re-sync. Then recall@5 per search mode:

- ``words``: for --queries chunks drawn at random (seeded), a query of four of the chunk's
  rarest words (length >= 4, in shuffled order), the way someone remembering a passage
  types it. A hit is the source chunk (or an overlapping chunk of the same file) in the
  top 5.
- ``paraphrases`` (with --paraphrases, over tests/data/rag): hand-written questions that
  share few words with the passage that answers them (English and Chinese).

``--embedder hashed`` swaps the model for a hashed bag of words (fast, no meaning): it
measures scanning, parsing, chunking, SQLite and Chroma writes alone.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests import words_embedder  # noqa: E402  (the model-free stand-in)
from tests.words_embedder import WordsEmbedder  # noqa: E402

TOP = 5
PARAPHRASES = [  # query -> (file name, a substring of the answering chunk)
    ("how often do I feed the bread yeast culture", "cooking.md", "fed every Sunday"),
    ("which pasta dish must not contain dairy", "cooking.md", "Never add cream"),
    ("how to make a tomato based pasta topping", "cooking.md", "crushed tomatoes"),
    ("what must I do before my travel document expires", "travel.txt", "Passport"),
    ("what should go in my suitcase", "travel.txt", "Rain jacket"),
    ("where do I stay in Portugal", "travel.txt", "Lisbon"),
    ("why did the data backups stop working", "meetings.md", "disk quota"),
    ("who is responsible for the supplier agreement", "meetings.md", "vendor contract"),
    ("when is the financial planning meeting", "meetings.md", "budget review"),
    ("秋天去日本看紅葉住哪裡", "旅行.txt", "嵐山"),
    ("從機場到京都要多久", "旅行.txt", "七十五分鐘"),
    ("代理能看到多少條最近的對話", "記憶系統.md", "十六則"),
    ("工具出錯的紀錄保存多久", "記憶系統.md", "九十天"),
    ("how long do failure records last", "記憶系統.md", "九十天"),
    ("kyoto autumn trip accommodation", "旅行.txt", "嵐山"),
    ("evict the oldest entry when the cache is full", "cache.py", "popitem"),
    ("endpoint for the load balancer to check the service is alive", "server.go",
     "healthHandler"),
    ("which port does the database listen on", "config.json", "5432"),
    ("employees working in the engineering team", "employees.csv", "Engineering"),
    ("how much does the coffee machine cost", "products.tsv", "espresso"),
    ("ratio of greens to browns for compost", "page.html", "one to three"),
    ("when should I water my plants", "page.html", "early in the morning"),
]
_STOP = """self return none true false from import with that this class none
def elif else while print assert value values which there their about these those into
have will when what where only also than then them each other such using used"""
STOP = frozenset(_STOP.split())


def word_queries(chunks: list[dict], n: int, rng: random.Random) -> list[tuple[str, dict]]:
    words_of = [set(re.findall(r"[A-Za-z_][A-Za-z_]{3,}", c["text"].lower())) - STOP
                for c in chunks]
    df = Counter(w for ws in words_of for w in ws)
    picks = [i for i, ws in enumerate(words_of) if len(ws) >= 6]
    out = []
    for i in rng.sample(picks, min(n, len(picks))):
        rare = sorted(words_of[i], key=lambda w: (df[w], w))[:8]
        chosen = rng.sample(rare, 4)
        out.append((" ".join(chosen), chunks[i]))
    return out


def is_hit(result: dict, target: dict) -> bool:
    return (result["path"] == target["path"]
            and result["line_start"] <= target["line_end"]
            and target["line_start"] <= result["line_end"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "agenvoy_cli"),
                                                     str(ROOT / "tests")])
    parser.add_argument("--embedder", default="",
                        help="AGENVOY_EMBEDDER spec, or 'hashed' (default: the default model)")
    parser.add_argument("--max-files", type=int, default=0,
                        help="index only the first N files (sorted) of the paths")
    parser.add_argument("--queries", type=int, default=40, help="word queries for recall")
    parser.add_argument("--paraphrases", action="store_true",
                        help="also the hand-written questions over tests/data/rag")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="agenvoy-rag-bench-"))
    os.environ["AGENVOY_HOME"] = str(home)
    from agenvoy_cli import rag
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.rag.walk import Found, walk
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store

    if args.embedder == "hashed":
        words_embedder.CURRENT = WordsEmbedder()
        os.environ["AGENVOY_EMBEDDER"] = words_embedder.SPEC
    elif args.embedder:
        os.environ["AGENVOY_EMBEDDER"] = args.embedder
    store = open_store(Layout(home))
    paths = [str(Path(p).resolve()) for p in args.paths]
    if args.max_files:
        files = sorted({str(f.path) for p in paths for f in walk(Path(p))
                        if isinstance(f, Found)})
        paths = files[:args.max_files]
    emb = vectors.embedder(store)
    emb.embed_query("warm up")  # model load is not indexing
    spent = {"embed": 0.0, "texts": 0}

    def timed(texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        out = emb.embed_documents(texts)
        spent["embed"] += time.perf_counter() - started
        spent["texts"] += len(texts)
        return out

    rag.create(store, "bench", paths)
    started = time.perf_counter()
    report = rag.sync(store, "bench", embed=timed)
    total = time.perf_counter() - started
    resync = rag.sync(store, "bench")
    rest = total - spent["embed"]
    print(f"embedder        {emb.model_id}")
    print(f"indexed         {report.indexed} files, {report.chunks} chunks "
          f"({len(report.skipped)} skipped) in {total:.2f} s")
    print(f"rate            {report.indexed / total:.1f} files/s, "
          f"{report.chunks / total:.1f} chunks/s")
    embed_rate = spent["texts"] / max(spent["embed"], 1e-9)
    print(f"  embedding     {spent['embed']:.2f} s ({embed_rate:.1f} chunks/s)")
    print(f"  the rest      {rest:.2f} s ({report.chunks / max(rest, 1e-9):.0f} chunks/s: "
          "scan, parse, chunk, SQLite, Chroma)")
    print(f"unchanged sync  {resync.seconds * 1000:.0f} ms for {resync.unchanged} files")

    chunks = list(rag.iter_chunks(store, "bench"))
    rng = random.Random(args.seed)
    sets = {"words": word_queries(chunks, args.queries, rng)}
    if args.paraphrases:
        sets["paraphrases"] = []
        for query, name, needle in PARAPHRASES:
            target = next((c for c in chunks if Path(c["path"]).name == name
                           and needle in c["text"]), None)
            if target is not None:
                sets["paraphrases"].append((query, target))
    for label, queries in sets.items():
        if not queries:
            continue
        line = [f"recall@1/@{TOP} {label:<12} n={len(queries):<3}"]
        for mode in ("keyword", "semantic", "hybrid"):
            first, hits, spent_q = 0, 0, 0.0
            for query, target in queries:
                started = time.perf_counter()
                res = rag.search(store, ["bench"], query, mode, limit=TOP)
                spent_q += time.perf_counter() - started
                found = [is_hit(r.as_dict(), target) for r in res.results]
                hits += any(found)
                first += bool(found and found[0])
            per_query = spent_q / len(queries) * 1000
            line.append(f"{mode} {first / len(queries):.2f}/{hits / len(queries):.2f} "
                        f"({per_query:.0f} ms/q)")
        print("  ".join(line))
    store.close()
    import shutil

    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
