"""bench/identity: what the identity rule (#12) costs on the paths a user runs.

On one home with a ~N-message history.json already archived, interleaved A/B runs of:
  append        one message, history.json untouched since our last append (fast path)
  append-edit   one message after a person deleted one message in the middle of
                history.json (the whole file is read and aligned with the archive)
  keyword       `search --mode keyword` (maps history.json to archive rows, writes nothing)
  context       `context --json`
Each case prints median wall and child CPU seconds per source; with --old DIR (a checkout of
an earlier agenvoy-cli, run with the same interpreter) the ratio new/old too.

Usage: python bench/identity.py [--messages 4000] [--runs 9] [--old DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str], env: dict[str, str], cwd: Path, data: bytes | None = None
          ) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, input=data, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def build(home: Path, count: int, src: Path) -> None:
    msgs = []
    for i in range(count):
        clock = f"{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        body = f"message {i} about topic{i % 97} " + "lorem ipsum " * 10
        msgs.append({"role": "user" if i % 2 == 0 else "assistant",
                     "content": f"---\n當前時間: 2024-01-01 {clock}\n---\n{body}"})
    path = home / "sessions" / "s" / "history.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(orjson.dumps(msgs))
    env = {**os.environ, "AGENVOY_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "agenvoy_cli", "backfill", "s"], env=env, cwd=src,
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "agenvoy_cli", "append", "s", "--role", "user",
                    "--content", "warm"], env=env, cwd=src, check=True,
                   stdout=subprocess.DEVNULL)


def delete_middle(home: Path) -> None:
    path = home / "sessions" / "s" / "history.json"
    msgs = orjson.loads(path.read_bytes())
    del msgs[len(msgs) // 2]
    path.write_bytes(orjson.dumps(msgs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--old", type=Path)
    args = parser.parse_args()
    sources = {"new": ROOT}
    if args.old:
        sources["old"] = args.old.resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-identity-"))
    try:
        homes = {}
        for name, src in sources.items():
            homes[name] = tmp / name
            build(homes[name], args.messages, src)
        cases = {
            "append": ["append", "s", "--role", "user", "--content", "hello"],
            "append-edit": ["append", "s", "--role", "user", "--content", "hello"],
            "keyword": ["search", "s", "topic7", "--mode", "keyword", "--json"],
            "context": ["context", "s", "--json"],
        }
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for case, argv in cases.items():
                for name, src in sources.items():  # interleaved A/B
                    if case == "append-edit":
                        delete_middle(homes[name])
                    env = {**os.environ, "AGENVOY_HOME": str(homes[name]),
                           "AGENVOY_MAX_HISTORY_BYTES": str(64 * 1024 * 1024)}
                    got = timed([sys.executable, "-m", "agenvoy_cli", *argv], env, src)
                    results.setdefault((case, name), []).append(got)
        print(f"{args.messages} messages in history.json, {args.runs} runs, medians")
        for case in cases:
            line = f"{case:12s}"
            meds = {}
            for name in sources:
                runs = results[(case, name)]
                wall = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                meds[name] = cpu
                line += f"  {name}: wall {wall * 1000:7.1f} ms cpu {cpu * 1000:7.1f} ms"
            if "old" in meds:
                line += f"  cpu new/old {meds['new'] / meds['old']:.2f}"
            print(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
