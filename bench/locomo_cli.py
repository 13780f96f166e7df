"""LoCoMo evidence recall through the `agenvoy search --json` program, one process per search.

    python bench/locomo_cli.py                       # all 1,536 questions of categories 1-4
    python bench/locomo_cli.py --every 4             # a quick look
    python bench/locomo_cli.py --reuse               # the home of an earlier run (index once)
    python bench/locomo_cli.py --head --split report # conversations 5-9 only (bench/splits.py)

The protocol is bench/locomo.py's (one home, one session per conversation, every turn one
message "<speaker>: <text>", 16 filler messages after each conversation, `--limit 50`, the
hits of the JSON in rank order, R@5 / R@10 / MRR macro-averaged, headline categories 1-4);
what differs is the path of each search:

- the home is built once with `agenvoy append` and indexed once with `agenvoy backfill
  --vectors` (both in process, over the real commands; the embedder is wrapped with
  bench/locomo.py's cache, its vectors are the real model's), then reused (--reuse);
- then `agenvoy mcp --http 127.0.0.1:0` runs in the home (one server, the model loaded
  once), and every search is a fresh process `agenvoy --home H search SESSION --mode M
  --limit 50 --json -- QUESTION`: the command a user runs, answered through its fast path by
  the home's server (server/fastpath.py), which runs the same Memory.search the local path
  runs. A search that fell back to the local path (a stderr note) stops the bench. The
  server is the real `agenvoy mcp --http` command started by this file (--serve) with the
  same embedding cache put in front of the model (query and attribution texts: a rerun
  embeds nothing it embedded before; the vectors are the model's);
- --check N: afterwards, with the server stopped, the first N questions of every
  conversation are asked again as `AGENVOY_NO_SERVER=1 agenvoy search ...` processes (the
  local path, the real model, no cache) and the rankings compared (the two paths agree).

The dataset is read from --locomo and never copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import harness  # bench/ is this script's path[0]
import locomo
import splits
from harness import Served, Server, install, ranked_hits  # noqa: F401  (the names it had)

ROOT = Path(__file__).resolve().parent.parent


def prepare(home: Path, cache: Path, convs: list[dict], reuse: bool) -> list[dict[int, str]]:
    """The home with every conversation appended and embedded; per session seq -> dia_id."""
    marker = home / "bench-maps.json"
    if reuse and marker.exists():
        return [{int(k): v for k, v in m.items()} for m in json.loads(marker.read_text())]
    maps = locomo.build_home(home, convs)
    wrap = harness.backfill(home, [f"conv{ci}" for ci in range(len(convs))], cache)
    print(f"  indexed: {wrap.embedded} texts embedded, the rest from the cache",
          file=sys.stderr)
    marker.write_text(json.dumps(maps))
    return maps


def search(home: Path, session: str, mode: str, question: str, limit: int = locomo.TOP
           ) -> dict:
    """One `agenvoy search ... --json` process (harness.search_process); its document."""
    return harness.search_process(home, session, mode, question, limit)


def check(home: Path, convs: list[dict], rankings: dict, modes: list[str], n: int
          ) -> dict[str, str]:
    """The first n questions of each conversation on the local path (fresh processes, the
    real model), compared with the ranking the server gave."""
    os.environ["AGENVOY_NO_SERVER"] = "1"
    out = {}
    for mode in modes:
        same = top10 = total = 0
        for ci, conv in enumerate(convs):
            for qi, (question, _, _) in enumerate(conv["qa"][:n]):
                key = f"{ci}:{qi}"
                if key not in rankings[mode]:
                    continue
                local = ranked_hits(search(home, f"conv{ci}", mode, question))[:locomo.TOP]
                served = rankings[mode][key]
                total += 1
                same += local == served
                top10 += local[:10] == served[:10]
        out[mode] = f"{same}/{total} identical rankings, {top10}/{total} identical top 10"
    os.environ.pop("AGENVOY_NO_SERVER", None)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--locomo", type=Path, default=locomo.LOCOMO)
    ap.add_argument("--home", type=Path, default=Path("/tmp/agenvoy-bench-locomo-cli-home"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-locomo-cache"))
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--every", type=int, default=1, help="only every Nth question")
    ap.add_argument("--reuse", action="store_true", help="reuse the home of an earlier run")
    ap.add_argument("--head", action="store_true",
                    help="categories 1-4 only (the headline; skips adversarial questions)")
    ap.add_argument("--split", choices=["tune", "report", "all"], default="all",
                    help="ask the questions of these conversations only (bench/splits.py)")
    ap.add_argument("--check", type=int, default=0, metavar="N",
                    help="then compare the first N questions per conversation with the "
                         "local path")
    ap.add_argument("--json", type=Path, help="write results and rankings here")
    ap.add_argument("--serve", type=Path, metavar="HOME", help=argparse.SUPPRESS)
    ap.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:  # the harness's server, as an older Server started it
        return harness.serve(args.serve, args.cache, args.log)
    os.environ.pop("AGENVOY_HOME", None)
    os.environ.pop("AGENVOY_EMBEDDER", None)
    modes = args.modes.split(",")
    convs, dropped, empty = locomo.load(args.locomo)
    t0 = time.perf_counter()
    maps = prepare(args.home, args.cache, convs, args.reuse)
    print(f"  home ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    load_before = os.getloadavg()
    server = Server(args.home, args.cache, args.home.parent / f"{args.home.name}-server.log")
    per_mode: dict[str, list] = {m: [] for m in modes}
    per_split: dict[str, dict[str, list]] = {s: {m: [] for m in modes}
                                             for s in ("tune", "report")}
    rankings: dict[str, dict[str, list[int]]] = {m: {} for m in modes}
    wall: dict[str, list[float]] = {m: [] for m in modes}
    loads = []
    cpu0 = server.cpu()
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    def timed(session: str, query: str, mode: str, limit: int) -> dict:
        t1 = time.perf_counter()
        doc = search(args.home, session, mode, query, limit)
        wall[mode].append(time.perf_counter() - t1)
        return doc

    try:
        for ci, conv in enumerate(convs):
            if args.split != "all" and splits.locomo_split(ci) != args.split:
                continue
            rset = locomo.questions(convs, maps, [ci], args.every, args.head)
            res = harness.evaluate(rset, modes, timed)  # interleaved: each question in turn
            qis = [qi for qi, (_, _, cat) in enumerate(conv["qa"])
                   if not qi % args.every and not (args.head and cat not in locomo.HEAD)]
            for mode in modes:
                for qi, seqs, (group, figures) in zip(qis, res.rankings[mode], res.rows[mode]):
                    rankings[mode][f"{ci}:{qi}"] = seqs
                    per_mode[mode].append((int(group), figures))
                    per_split[splits.locomo_split(ci)][mode].append((int(group), figures))
            loads.append(os.getloadavg()[0])
            if args.json:  # what is done so far, in case the run is cut short
                args.json.with_suffix(".partial.json").write_text(json.dumps(
                    {"conversations": ci + 1,
                     "results": {m: locomo.summarise(per_mode[m]) for m in modes}}))
            print(f"  conversation {ci}: {len(conv['qa'])} questions, "
                  f"{time.perf_counter() - t0:.0f} s, load {loads[-1]:.1f}", file=sys.stderr)
        server_cpu = server.cpu() - cpu0
    finally:
        server.stop()
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_cpu = ((child1.ru_utime + child1.ru_stime) - (child0.ru_utime + child0.ru_stime)
                  - server.cpu_total)  # the server was waited for: counted among children
    total = time.perf_counter() - t0
    results = {m: locomo.summarise(per_mode[m]) for m in modes}
    nsearch = sum(len(v) for v in wall.values())
    print(f"\nLoCoMo ({dropped} evidence ids dropped, {empty} questions without evidence "
          f"skipped), every {args.every} question(s); each search one `agenvoy search "
          f"--limit {locomo.TOP} --json` process answered by the home's `agenvoy mcp --http`")
    print(locomo.fmt_table(results))
    by_split = {name: {m: locomo.summarise(rows[m]) for m in modes if rows[m]}
                for name, rows in per_split.items()}
    for name, res in by_split.items():
        if res:
            convs_of = splits.LOCOMO_TUNE if name == "tune" else splits.LOCOMO_REPORT
            print(f"\n{name} split (bench/splits.py: conversations "
                  f"{convs_of[0]}-{convs_of[-1]})")
            print(locomo.fmt_table(res))
    print(f"\n{nsearch} searches in {total:.0f} s wall; CPU: clients {client_cpu:.0f} s, "
          f"server {server_cpu:.0f} s; load average before {load_before[0]:.1f}, during "
          f"{min(loads):.1f}-{max(loads):.1f}")
    for m in modes:
        print(f"  {m}: median {statistics.median(wall[m]) * 1000:.0f} ms per search "
              f"(process start to JSON)")
    checked = check(args.home, convs, rankings, modes, args.check) if args.check else {}
    for m, line in checked.items():
        print(f"  local path vs server, {m}: {line}")
    if args.json:
        args.json.write_text(json.dumps({
            "every": args.every, "results": results, "splits": by_split,
            "rankings": rankings, "check": checked,
            "load": {"before": load_before, "during": loads},
            "cpu_s": {"clients": client_cpu, "server": server_cpu}, "wall_s": total}))


if __name__ == "__main__":
    main()
