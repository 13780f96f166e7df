"""`--budget` as a promise (issue #51 item 7): the first `agenvoy search SESSION QUERY
--budget 1` after 400 new long messages, as a subprocess, with the real models.

    python bench/budget.py                       # 3 rounds, budget 1
    python bench/budget.py --rounds 6 --before d299edf --budget 1

A base home (under --work, kept between runs; delete it to rebuild) holds --messages
gendata messages of 600-900 characters, embedded by `agenvoy backfill --vectors` (which
remembers the embedding rate it measured: .store/embed-rates.json), never searched (so
attribution and the floor's second model have the hits' own texts to embed, as on the first
search of a session). Each round copies it afresh for each arm, appends 400 long messages
(1,500-2,500 characters, not timed) and times one search in a new process:

  budget   `search s QUERY --budget B --json` (the catch-up, attribution and the second
           model within B), the rate remembered (a home that was searched or backfilled)
  norate   the same without the remembered rate (the home's first budgeted search ever:
           a probe learns it)
  floor    the same with `--budget 0`: the cold start (imports, models, the query, the
           ranking) with no message embedded; budget - floor is what the embedding cost
  before, before0   (--before COMMIT or DIR: that commit's agenvoy_cli, extracted under
           --work by `git archive`) the budget and floor arms on that code (each arm's
           process runs in its code's directory: `python -m` finds the package there first)

Arms interleaved round by round; medians of wall and CPU (user + system of the child), the
load (`os.getloadavg`) beside them. Byte-compile first (python -m compileall -q agenvoy_cli).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gendata  # bench/ is this script's path[0]

ROOT = Path(__file__).resolve().parent.parent
QUERY = "which deploy timeout did we agree on"
NEW = 400  # long messages appended before the search


def run(cmd: list[str], env: dict[str, str], data: bytes | None = None
        ) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # in the arm's code directory: `python -m` puts the working directory first on the
    # path, ahead of PYTHONPATH (from ROOT, the before arm ran this checkout's code)
    proc = subprocess.run(cmd, env=env, capture_output=True, cwd=env["PYTHONPATH"],
                          input=data)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-800:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu, wall, proc.stdout.decode()


def environ(home: Path, code: Path) -> dict[str, str]:
    env = {**os.environ, "AGENVOY_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": str(code)}
    env.pop("AGENVOY_EMBEDDER", None)  # the default models
    return env


def agenvoy(*args: str) -> list[str]:
    return [sys.executable, "-m", "agenvoy_cli", *args]


def base(work: Path, count: int) -> Path:
    home = work / f"base-unsearched-rated-{count}"
    if (home / "built").exists():
        return home
    home.mkdir(parents=True, exist_ok=True)
    env = environ(home, ROOT)
    run(agenvoy("append", "s", "--messages", "-", "--no-compact"), env,
        messages(0, count, 600, 900))
    run(agenvoy("backfill", "s", "--vectors"), env)  # no search yet: no own-text vectors
    (home / "built").write_text("ok")
    return home


def messages(start: int, count: int, lo: int, hi: int) -> bytes:
    """`count` messages of gendata text, each lo-hi characters."""
    rng = random.Random(start)
    out = []
    for i in range(start, start + count):
        parts: list[str] = []
        size = rng.randint(lo, hi)
        while sum(map(len, parts)) < size:
            parts.append(gendata.text(rng, i))
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": " ".join(parts)})
    return json.dumps(out).encode()


def one(src: Path, work: Path, code: Path, budget: str, new: bytes, rate: bool = True,
        query: str = QUERY) -> dict[str, Any]:
    home = work / "round"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(src, home)
    if not rate:
        (home / ".store" / "embed-rates.json").unlink(missing_ok=True)
    env = environ(home, code)
    run(agenvoy("append", "s", "--messages", "-", "--no-compact"), env, new)
    load = os.getloadavg()[0]
    cpu, wall, out = run(agenvoy("search", "s", query, "--budget", budget, "--json"), env)
    doc = json.loads(out)
    said = " ".join(n["message"] for n in doc.get("notes", []))
    return {"cpu": cpu, "wall": wall, "load": load, "indexed": doc.get("indexed"),
            "notes": [n["code"] for n in doc.get("notes", [])],
            "floor_margin_only": "relevance floor" in said}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", default="1")
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--before", help="a commit (or a copy of agenvoy_cli's parent dir) to "
                    "compare")
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-bench-budget"))
    args = ap.parse_args()
    src = base(args.work, args.messages)
    new = messages(args.messages, NEW, 1500, 2500)
    arms = {"budget": (ROOT, args.budget, True), "norate": (ROOT, args.budget, False),
            "floor": (ROOT, "0", True)}
    if args.before:
        before = checkout(args.before, args.work)
        arms["before"] = (before, args.budget, True)
        arms["before0"] = (before, "0", True)
    rows: dict[str, list[dict[str, Any]]] = {k: [] for k in arms}
    for _ in range(args.rounds):
        for name, (code, budget, rate) in arms.items():
            rows[name].append(one(src, args.work, code, budget, new, rate, args.query))
    med: dict[str, dict[str, Any]] = {
        k: {"wall_s": round(statistics.median(r["wall"] for r in v), 2),
            "cpu_s": round(statistics.median(r["cpu"] for r in v), 2),
            "indexed": [r["indexed"] for r in v], "notes": v[-1]["notes"],
            "walls": [round(r["wall"], 2) for r in v], "cpus": [round(r["cpu"], 2) for r in v],
            "load": [round(r["load"], 2) for r in v],
            "floor_margin_only": [r["floor_margin_only"] for r in v]} for k, v in rows.items()}
    beyond = {f"{arm}_minus_{base}_{what}_s": round(med[arm][f"{what}_s"]
                                                     - med[base][f"{what}_s"], 2)
              for arm, base in (("budget", "floor"), ("norate", "floor"),
                                ("before", "before0"), ("before", "floor"))
              if arm in med for what in ("wall", "cpu")}
    # the same difference within each round (the arms of a round ran back to back)
    paired = {f"{arm}_minus_{base}_wall_paired_median_s": round(statistics.median(
        a["wall"] - b["wall"] for a, b in zip(rows[arm], rows[base])), 2)
        for arm, base in (("budget", "floor"), ("norate", "floor"), ("before", "before0"))
        if arm in rows}
    print(json.dumps({"messages": args.messages, "new_long": NEW, "budget_s": args.budget,
                      "query": args.query,
                      "rounds": args.rounds, **med, **beyond, **paired}, indent=2))


def checkout(before: str, work: Path) -> Path:
    """A directory holding agenvoy_cli as of `before` (a commit, extracted with git
    archive under `work`, or a directory given as is)."""
    if Path(before).is_dir():
        return Path(before)
    dest = work / f"code-{before}"
    if not (dest / "agenvoy_cli").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", before, "agenvoy_cli"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "compileall", "-q", "agenvoy_cli"], cwd=dest,
                       check=True)
    return dest


if __name__ == "__main__":
    main()
