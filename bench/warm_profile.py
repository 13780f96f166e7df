"""Where a warm search's time goes beyond its query embedding (issue #51 item 2).

The server's own objects in this process (server.app.build_app over the home bench/
warm_search.py builds): per query, the server's two steps timed apart, as it runs them:
the query embedding (App.embed_query: the query cache's model call) and the store thread's
job (agenvoy_tools.call: the search, fed the cached vector). Prints their p50/p99 wall and
CPU (the process's: the models' threads too), then a cProfile of the store thread's job.

    python -m compileall -q agenvoy_cli
    python bench/warm_search.py --messages 10000 --text gendata --build-only
    python bench/warm_profile.py --home /tmp/agenvoy-warm-bench-10000-real-gendata [--queries 40]
    python bench/warm_profile.py --home ... --stages [--queries 200]

--stages: no profiler; instead the store thread's job with every query vector kept (the
server's case once the query step ran), its CPU per call split by the search's stages
(process CPU around each stage function, nested stages inside their parent's).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


STAGES = (  # (module, function, label): the search's steps, outer first
    ("agenvoy_cli.server.agenvoy_tools", "call", "the store thread's job"),
    ("agenvoy_cli.search.engine", "vector_search", " vector_search"),
    ("agenvoy_cli.search.engine", "catch_up", "  catch-up (budget 0)"),
    ("agenvoy_cli.search.engine", "scope_of", "  scope_of"),
    ("agenvoy_cli.search.candidates", "gather", "  candidates.gather"),
    ("agenvoy_cli.search.semantic", "vector_hits", "   vector_hits (exact matrix)"),
    ("agenvoy_cli.vectors.exact", "nearest", "    exact.nearest"),
    ("agenvoy_cli.search.candidates", "_texts", "   texts of the hits"),
    ("agenvoy_cli.search.candidates", "_background", "   background sample"),
    ("agenvoy_cli.search.candidates", "_similarity", "   pool similarities"),
    ("agenvoy_cli.search.candidates", "_kept", "   kept text vectors (load_keys)"),
    ("agenvoy_cli.search.candidates", "rows_of", "   rows_of (pool texts)"),
    ("agenvoy_cli.search.semantic", "attribute", "  attribution"),
    ("agenvoy_cli.search.engine", "_decide", "  relevance decision"),
    ("agenvoy_cli.search.engine", "_order", "  fitted ranking / fusion"),
    ("agenvoy_cli.search.engine", "fill", "  fill (result rows)"),
    ("agenvoy_cli.search.semantic", "cosines", "   (cosines, anywhere)"),
    ("agenvoy_cli.vectors.guard", "read_generation", "   (generation token reads)"),
)


def stages(app: Any, questions: list[str], body: dict[str, Any]) -> None:
    """CPU per call by stage, every query vector kept (no profiler's overhead)."""
    import importlib

    from agenvoy_cli.server import agenvoy_tools

    spent: dict[str, float] = dict.fromkeys((label for _, _, label in STAGES), 0.0)

    def timed(fn: Any, label: str) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            began = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[label] += time.process_time() - began
        return wrapper

    for module, name, label in STAGES:
        mod = importlib.import_module(module)
        setattr(mod, name, timed(getattr(mod, name), label))
    warm = questions[:20]
    for q in warm:  # every vector kept, models loaded
        agenvoy_tools.call(app.ctx, "search_chat_history", {**body, "keyword": q},
                           app.vocabulary)
    for label in spent:
        spent[label] = 0.0
    calls = len(questions)
    for i in range(calls):
        agenvoy_tools.call(app.ctx, "search_chat_history",
                           {**body, "keyword": warm[i % len(warm)]}, app.vocabulary)
    for label, cpu in spent.items():
        print(f"{label:36s} {cpu / calls * 1e3:6.2f} ms CPU per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--stages", action="store_true",
                        help="CPU per call by stage (no profiler), every query vector kept")
    parser.add_argument("--callers", nargs="*", default=[],
                        help="also who calls these functions (pstats patterns)")
    args = parser.parse_args()
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    from warm_search import _questions  # bench/ after the SDK: bench/mcp.py is no `mcp`

    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.server import agenvoy_tools
    from agenvoy_cli.server.app import build_app

    app = build_app(Layout(args.home), None)
    cache = app.indexer.queries
    questions = _questions()[: args.queries + 5]
    body = {"session_id": "big", "mode": "semantic", "time_range": "all", "budget": 0}
    if args.stages:
        stages(app, questions, body)
        print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
        app.stop()
        return

    def one(q: str, prof: cProfile.Profile | None) -> tuple[float, float, float, float]:
        t, c = time.perf_counter(), time.process_time()
        cache.embed_query(q)
        e_wall, e_cpu = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        if prof is not None:
            prof.enable()
        agenvoy_tools.call(app.ctx, "search_chat_history", {**body, "keyword": q},
                           app.vocabulary)
        if prof is not None:
            prof.disable()
        return e_wall, e_cpu, time.perf_counter() - t, time.process_time() - c

    for q in questions[:5]:  # warm: models loaded, the matrix read, attribution vectors
        one(q, None)
    rows = [one(q, None) for q in questions[5:]]
    prof = cProfile.Profile()
    for q in questions[5:]:
        one(q, prof)
    for name, at in (("query embedding", 0), ("store thread's job", 2)):
        wall = [r[at] * 1e3 for r in rows]
        cpu = [r[at + 1] * 1e3 for r in rows]
        print(f"{name}: wall p50 {_pct(wall, .5):.1f} p99 {_pct(wall, .99):.1f} ms; "
              f"CPU p50 {_pct(cpu, .5):.1f} ms")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(args.top)
    print(out.getvalue())
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())
    for pattern in args.callers:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_callers(pattern)
        print(out.getvalue())
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    app.stop()


if __name__ == "__main__":
    main()
