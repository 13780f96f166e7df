"""bench/append: process wall and CPU time of `agenvoy append`, as ratios the issues set
targets for (the three commands interleaved, so machine noise hits every series alike; CPU
time beside wall, as the machine is shared):

  ratio 1: median(append one message) / median(python -c "import click, orjson, sqlite3")
           <= 1.3 (#51; CPU medians, the guard of the append path's imports)
  ratio 2: median(append to a ~5 MiB history.json) / median(append to an empty session)   <= 1.3

With --old DIR (a checkout of another agenvoy-cli, e.g. main, run with the same interpreter
as `python -m agenvoy_cli` from DIR; this tree runs the same way), both appends run for each
source interleaved (new, old, new, old, ...) on homes of their own, and the medians of wall
and child CPU time are printed with the CPU ratio new/old (what the fault injector's unarmed
seam costs the hot path: docs/reliability.md).

Usage: python bench/append.py [--runs 30] [--old DIR]
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


def agenvoy_exe() -> list[str]:
    script = Path(sys.executable).with_name("agenvoy")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agenvoy_cli"]


ROOT = Path(__file__).resolve().parent.parent


def wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall, child CPU) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    spent = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return spent, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def compare(runs: int, old: Path) -> None:
    """Interleaved A/B of both appends: this tree against `old`."""
    sources = {"new": ROOT, "old": old.resolve()}
    for src in sources.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "agenvoy_cli")],
                       check=True)
    tmp = Path(tempfile.mkdtemp(prefix="agenvoy-bench-ab-"))
    try:
        envs = {}
        for name, src in sources.items():
            home = tmp / name
            envs[name] = {**os.environ, "AGENVOY_HOME": str(home),
                          "AGENVOY_MAX_HISTORY_BYTES": str(8 << 20)}
            envs[name].pop("AGENVOY_FAULTS", None)
            build_big(home, "big", 5 << 20)
            subprocess.run([sys.executable, "-m", "agenvoy_cli", "backfill", "big"],
                           env=envs[name], cwd=src, check=True, stdout=subprocess.DEVNULL)
        got: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for n in range(runs):
            for case, sid in (("empty", f"fresh{n}"), ("big", "big")):
                for name, src in sources.items():
                    cmd = [sys.executable, "-m", "agenvoy_cli", "append", sid, "--role", "user",
                           "--content", "hi"]
                    got.setdefault((case, name), []).append(timed(cmd, envs[name], src))
        print(f"A/B, {runs} interleaved runs each, medians (new = {ROOT}, old = {old})")
        for case in ("empty", "big"):
            meds = {name: (statistics.median(r[0] for r in got[(case, name)]),
                           statistics.median(r[1] for r in got[(case, name)]))
                    for name in sources}
            print(f"append ({case:5s})  new: wall {meds['new'][0] * 1000:6.1f} ms cpu "
                  f"{meds['new'][1] * 1000:6.1f} ms   old: wall {meds['old'][0] * 1000:6.1f} ms "
                  f"cpu {meds['old'][1] * 1000:6.1f} ms   cpu new/old "
                  f"{meds['new'][1] / meds['old'][1]:.3f}")
    finally:
        shutil.rmtree(tmp)


def build_big(home: Path, sid: str, target: int) -> int:
    """A history.json of about `target` bytes (user/assistant pairs with headers)."""
    msgs, size, i = [], 2, 0
    while size < target:
        clock = f"{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        head = f"---\n當前時間: 2024-01-01 {clock}\n---\n"
        role = "user" if i % 2 == 0 else "assistant"
        msg = {"role": role, "content": head + f"message {i} " + "lorem ipsum dolor " * 60}
        msgs.append(msg)
        size += len(orjson.dumps(msg)) + 1
        i += 1
    folder = home / "sessions" / sid
    folder.mkdir(parents=True)
    (folder / "history.json").write_bytes(orjson.dumps(msgs))
    return len(msgs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--old", type=Path, help="another checkout to compare with (A/B)")
    args = parser.parse_args()
    if args.old:
        compare(args.runs, args.old)
        return
    # Byte-compile the package as a regular install does (pip compiles on install); with an
    # editable install and PYTHONDONTWRITEBYTECODE set, every run would compile the source.
    import agenvoy_cli

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(agenvoy_cli.__file__)
                    .parent)], check=True)
    home = Path(tempfile.mkdtemp(prefix="agenvoy-bench-"))
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_MAX_HISTORY_BYTES": str(8 << 20)}
    exe = agenvoy_exe()
    count = build_big(home, "big", 5 << 20)
    subprocess.run(exe + ["backfill", "big"], env=env, check=True, stdout=subprocess.DEVNULL)
    base, empty, big = [], [], []
    imports = [sys.executable, "-c", "import click, orjson, sqlite3"]
    here = Path.cwd()
    for n in range(args.runs):  # interleaved, so machine noise hits every series alike
        base.append(timed(imports, env, here))
        empty.append(timed(exe + ["append", f"fresh{n}", "--role", "user", "--content", "hi"],
                           env, here))
        big.append(timed(exe + ["append", "big", "--role", "user", "--content", "hi"], env, here))
    size = (home / "sessions/big/history.json").stat().st_size
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
           for k, v in (("imports", base), ("empty", empty), ("big", big))}
    print(f"runs: {args.runs}; big session: {count} messages, {size / 2**20:.2f} MiB; "
          f"load {os.getloadavg()[0]:.2f}")
    for key, label in (("imports", "python -c 'import click, orjson, sqlite3'"),
                       ("empty", "agenvoy append (empty session)"),
                       ("big", "agenvoy append (~5 MiB history.json)")):
        print(f"{label:42s} median wall {med[key][0] * 1000:7.1f} ms  "
              f"cpu {med[key][1] * 1000:7.1f} ms")
    for label, a, b, target in (("append/imports", "empty", "imports", 1.3),
                                ("big/empty", "big", "empty", 1.3)):
        print(f"ratio {label:15s} wall {med[a][0] / med[b][0]:.2f}  "
              f"cpu {med[a][1] / med[b][1]:.2f}  (target <= {target})")
    shutil.rmtree(home)


if __name__ == "__main__":
    main()
