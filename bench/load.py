"""bench/load: many processes mixing every command on one home for a bounded time.

Each worker runs the real CLI in-process in a loop (as a long-lived agent would), one kind
of command per worker, and reports every call's latency and exit code. Afterwards `doctor`
must be clean, and every Chroma collection's metadata and HNSW layers must agree (checked by a
fresh process). Vector writers (`backfill S --vectors`, `backfill --all --vectors`) run beside
the semantic searches. Prints throughput and p50/p99 latency per command; any exit code other
than 0 or 75 (busy, retryable) is an error.

Usage: python bench/load.py [--procs 16] [--seconds 30] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["append", "append", "keyword", "append", "semantic", "compact", "append", "summarize",
         "errors-record", "keyword", "errors-lookup", "append", "hybrid", "vectors-all", "append",
         "vectors"]
SESSIONS = 4
# Each append worker makes at least this many calls, past the deadline if the machine is slow:
# the appends must really interleave with the other commands however busy the cores are.
MIN_APPENDS = 3


def invoke(args: list[str]) -> int:
    from agenvoy_cli.cli import cli

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = cli.main(args, prog_name="agenvoy", standalone_mode=False)
        except SystemExit as exc:
            code = exc.code
    return int(code or 0)


def worker(kind: str, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    words = ["deploy", "部署", "database", "記憶", "password", "rotation", "nomad", "錯誤"]
    deadline = time.monotonic() + seconds
    calls: list[tuple[str, float, int]] = []
    n = 0
    while time.monotonic() < deadline or (kind == "append" and n < MIN_APPENDS):
        sid = f"s{rng.randrange(SESSIONS)}"
        word = rng.choice(words)
        if kind == "append":
            args = ["append", sid, "--role", "user" if n % 2 == 0 else "assistant", "--content",
                    f"{kind}{seed}-{n} {word} " + " ".join(rng.choices(words, k=30))]
        elif kind in ("keyword", "semantic", "hybrid"):
            args = ["search", sid, word, "--mode", kind]
        elif kind == "compact":
            args = ["compact", "--all"]
        elif kind == "vectors":  # a vector writer: one session's catch-up, full check
            args = ["backfill", sid, "--vectors"]
        elif kind == "vectors-all":
            args = ["backfill", "--all", "--vectors"]
        elif kind == "summarize":
            args = ["summarize", "--pending"]
        elif kind == "errors-record":
            args = ["errors", "record", "--tool", rng.choice(["web_fetch", "shell"]),
                    "--keyword", word, "--symptom", f"{word} timeout after 30s ({n})",
                    "--action", "retry with a longer timeout", "--outcome", "resolved"]
        else:
            args = ["errors", "lookup", "--tool", "web_fetch", f"{word} timeout"]
        start = time.perf_counter()
        code = invoke(args)
        calls.append((kind, time.perf_counter() - start, code))
        n += 1
    sys.stdout.write(orjson.dumps(calls).decode())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(procs: int, seconds: float, home: Path | None = None) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.llm_server import FakeLLM

    home = home or Path(tempfile.mkdtemp(prefix="agenvoy-load-")) / "home"
    env = {**os.environ, "AGENVOY_HOME": str(home), "AGENVOY_MAX_HISTORY_BYTES": "65536",
           "AGENVOY_LOCK_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}
    seed_batch = [{"role": "user" if i % 2 == 0 else "assistant",
                   "content": f"seed {i} deploy 部署 database password rotation"}
                  for i in range(40)]
    for s in range(SESSIONS):
        subprocess.run([sys.executable, "-m", "agenvoy_cli", "append", f"s{s}", "--messages",
                        "-"], input=orjson.dumps(seed_batch), env=env, check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
    with FakeLLM() as llm:
        env["AGENVOY_LLM_BASE_URL"] = llm.url
        env["AGENVOY_LLM_MODEL"] = "fake"
        children = [subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker",
                                      KINDS[i % len(KINDS)], "--seconds", str(seconds),
                                      "--seed", str(i)], env=env, cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    for i in range(procs)]
        calls = []
        for child in children:
            out, err = child.communicate(timeout=seconds + 300)
            if child.returncode != 0:
                raise RuntimeError(f"worker died ({child.returncode}): {err.decode()[-2000:]}")
            calls += orjson.loads(out)
    doctor = subprocess.run([sys.executable, "-m", "agenvoy_cli", "doctor", "--json"], env=env,
                            capture_output=True, cwd=ROOT)
    from tests.vector_workers import check

    layers = check(str(home / ".store" / "chroma")) if (home / ".store/chroma").is_dir() else \
        {"collections": {}}
    vector_problems = [{"collection": name, **col} for name, col in layers["collections"].items()
                       if col["error"] or col["missing"] or col.get("duplicates")
                       or not col["count"] == col["ids"] == col["hnsw"]]
    report: dict = {"procs": procs, "seconds": seconds, "doctor": doctor.returncode,
                    "vector_collections": len(layers["collections"]),
                    "vector_problems": vector_problems,
                    "doctor_problems": orjson.loads(doctor.stdout)["problems"]
                    if doctor.stdout else doctor.stderr.decode(), "commands": {}}
    for kind in sorted({c[0] for c in calls}):
        mine = [c for c in calls if c[0] == kind]
        lat = [c[1] for c in mine]
        codes: dict[str, int] = {}
        for c in mine:
            codes[str(c[2])] = codes.get(str(c[2]), 0) + 1
        report["commands"][kind] = {
            "calls": len(mine), "per_s": round(len(mine) / seconds, 2),
            "p50_ms": round(statistics.median(lat) * 1000, 1),
            "p99_ms": round(percentile(lat, 0.99) * 1000, 1), "exit_codes": codes}
    report["errors"] = sum(n for k in report["commands"].values()
                           for code, n in k["exit_codes"].items() if code not in ("0", "75")
                           ) + len(vector_problems)
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.seconds, args.seed)
        return
    report = run(args.procs, args.seconds)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{args.procs} processes for {args.seconds:g} s; doctor exit {report['doctor']}; "
          f"errors (exit not 0/75, or a vector inconsistency): {report['errors']}")
    print(f"Chroma: {report['vector_collections']} collection(s), every layer checked by a "
          f"fresh process: {report['vector_problems'] or 'metadata = HNSW, no id missing'}")
    print(f"{'command':15} {'calls':>6} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8}  exit codes")
    for kind, row in report["commands"].items():
        print(f"{kind:15} {row['calls']:>6} {row['per_s']:>8} {row['p50_ms']:>8} "
              f"{row['p99_ms']:>8}  {row['exit_codes']}")


if __name__ == "__main__":
    main()
