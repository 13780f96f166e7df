"""A plain Python program (no OpenMP variables set) that times Memory().search with two busy
competitor processes paused (quiet) and running (loaded), interleaved, and prints one JSON
line of medians: wall and CPU seconds per search. Run by tests/test_contention.py and
bench/contention.py: python contended_search.py HOME ROUNDS."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time

QUERIES = ("what did we decide about the database migration", "why did the server crash",
           "pourquoi le déploiement a échoué", "how do I rotate the API keys")


def _messages() -> list[dict[str, str]]:
    topics = ("the database migration to Postgres", "the server crash on Friday",
              "rotating the API keys", "the deployment pipeline", "the cache eviction bug")
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Message {i} about {topics[i % len(topics)]}: we checked the logs "
                        f"and agreed on step {i % 7}."} for i in range(40)]


def _timed(memory, query: str) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    memory.search("s", query)
    return time.perf_counter() - wall, time.process_time() - cpu


def main(home: str, rounds: int) -> None:
    from agenvoy_cli.api import Memory

    competitors = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                   for _ in range(2)]
    try:
        for proc in competitors:
            os.kill(proc.pid, signal.SIGSTOP)
        with Memory(home) as memory:
            memory.append("s", _messages())
            memory.backfill("s", vectors=True)
            _timed(memory, QUERIES[0])  # the models are loaded: every search is warm
            quiet: list[tuple[float, float]] = []
            loaded: list[tuple[float, float]] = []
            for r in range(rounds):
                for sig, into in ((signal.SIGSTOP, quiet), (signal.SIGCONT, loaded)):
                    for proc in competitors:
                        os.kill(proc.pid, sig)
                    # a new text each time: a local model keeps its last query vectors
                    into.extend(_timed(memory, f"{q} ({r}, {len(into)})")
                                for q in QUERIES[r % 2::2])
    finally:
        for proc in competitors:
            proc.kill()
            proc.wait()
    med = {name: {"wall": statistics.median(w for w, _ in runs),
                  "cpu": statistics.median(c for _, c in runs)}
           for name, runs in (("quiet", quiet), ("loaded", loaded))}
    print(json.dumps(med))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
