"""bench/lifecycle: compaction and backfill, the figures issue 3 sets targets for.

  compaction of a ~5 MiB history.json (process wall)  <= 2x one `append` to that session
  backfill into SQLite of 100,000 messages            >= 20,000 messages/s

Usage: python bench/lifecycle.py [--messages 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from append import agenvoy_exe, build_big, wall  # noqa: E402


def backfill_rate(count: int) -> tuple[float, float]:
    """Messages/s of the store's backfill (in-process, so start-up is not counted) and
    the wall of the whole `agenvoy backfill` process."""
    home = Path(tempfile.mkdtemp(prefix="agenvoy-backfill-"))
    folder = home / "sessions" / "imported"
    folder.mkdir(parents=True)
    msgs = []
    for i in range(count):
        stamp = f"2024-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        head = f"---\n當前時間: {stamp}\n---\n" if i % 2 == 0 else ""
        msgs.append({"role": "user" if i % 2 == 0 else "assistant",
                     "content": head + f"message {i} about deploying 服務 number {i % 97}"})
    (folder / "history.json").write_bytes(orjson.dumps(msgs))
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_MAX_HISTORY_BYTES": str(1 << 30)}
    start = time.perf_counter()
    subprocess.run(agenvoy_exe() + ["backfill", "imported", "--json"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    process = time.perf_counter() - start
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors.hooks import open_store

    again = Path(tempfile.mkdtemp(prefix="agenvoy-backfill2-"))
    shutil.copytree(folder, again / "sessions" / "imported")
    os.environ["AGENVOY_MAX_HISTORY_BYTES"] = str(1 << 30)
    store = open_store(Layout(again))
    start = time.perf_counter()
    with store.write_lock():
        result = store.align("imported")
    inner = time.perf_counter() - start
    assert result.inserted == count
    store.close()
    shutil.rmtree(home)
    shutil.rmtree(again)
    return count / inner, process


def compaction(runs: int) -> tuple[float, float]:
    """Median wall of `agenvoy compact` of a fresh ~5 MiB history vs one append to it."""
    exe = agenvoy_exe()
    comp, app = [], []
    for _ in range(runs):
        home = Path(tempfile.mkdtemp(prefix="agenvoy-compact-"))
        env = {**os.environ, "AGENVOY_HOME": str(home),
               "AGENVOY_MAX_HISTORY_BYTES": str(8 << 20)}
        build_big(home, "big", 5 << 20)
        subprocess.run(exe + ["backfill", "big"], env=env, check=True, stdout=subprocess.DEVNULL)
        app.append(wall(exe + ["append", "big", "--role", "assistant", "--content", "ok"], env))
        env["AGENVOY_MAX_HISTORY_BYTES"] = str(5 << 20)
        # The file is just over 5 MiB now: compact trims it to 80 %.
        comp.append(wall(exe + ["compact", "big", "--max-bytes", str(5 << 20) ], env))
        size = (home / "sessions/big/history.json").stat().st_size
        assert size <= 0.8 * (5 << 20), size
        shutil.rmtree(home)
    return statistics.median(comp), statistics.median(app)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    import agenvoy_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q",
                    str(Path(agenvoy_cli.__file__).parent)], check=True)
    comp, app = compaction(args.runs)
    print(f"compact ~5 MiB history.json: median {comp * 1000:.0f} ms; one append to it: "
          f"{app * 1000:.0f} ms; ratio {comp / app:.2f} (target <= 2)")
    rate, process = backfill_rate(args.messages)
    print(f"backfill {args.messages} messages: {rate:,.0f} msg/s in the store "
          f"(target >= 20,000); whole `agenvoy backfill` process {process:.2f} s "
          f"= {args.messages / process:,.0f} msg/s")


if __name__ == "__main__":
    main()
