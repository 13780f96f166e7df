"""Where a warm search's time goes beyond its query embedding (issue #51 item 2).

The server's own objects in this process (server.app.build_app over the home bench/
warm_search.py builds): per query, the server's two steps timed apart, as it runs them:
the query embedding (App.embed_query: the query cache's model call) and the store thread's
job (agenvoy_tools.call: the search, fed the cached vector). Prints their p50/p99 wall and
CPU (the process's: the models' threads too), then a cProfile of the store thread's job.

    python -m compileall -q agenvoy_cli
    python bench/warm_search.py --messages 10000 --text gendata --build-only
    python bench/warm_profile.py --home /tmp/agenvoy-warm-bench-10000-real-gendata [--queries 40]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "bench"))


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--top", type=int, default=35)
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
