"""The process environment: the one module that reads it (tests/test_settings.py checks), and
the defaults the CLI sets in its own process where it starts. Everything else gets its
settings from agenvoy_cli/settings.py's `Settings`, built once by an entry point."""

from __future__ import annotations

import os

PROGRAM_THREADS = 4  # OpenMP threads of the CLI's own process (the default model's engine)


def environment() -> dict[str, str]:
    """The process environment, read once by an entry point (the only reader of it)."""
    return dict(os.environ)


def start_program() -> None:
    """The CLI's own process, where it starts (cli.py main; never the library's host):
    OpenMP, which the default model's engine uses, reads these when it loads. Its default
    spinning wait policy makes a query take >1 s when another process keeps a core busy;
    PASSIVE removes that and keeps the parallel speed-up on an idle machine. Values the
    user set are kept. Before numpy is imported (the CLI imports it lazily)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("OMP_NUM_THREADS", str(min(PROGRAM_THREADS, cpus)))
    # numpy's OpenBLAS takes OMP_NUM_THREADS too, and its threads spin after each product:
    # our products are a query against a few thousand vectors, where a second thread gains
    # nothing (a warm server at 10,000 messages: 0.66x the CPU per search, 0.74x the p50
    # with 4 clients on one thread; docs/benchmarks.md, "One BLAS thread")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
