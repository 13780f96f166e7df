"""bench/context_pairs: `agenvoy context S --json` on a session of tool-call turns, this tree
against another checkout (issue #49, 2: context regroups results written out of their call's
place, which costs a pass over the window).

The session: TURNS turns of a user prompt, an assistant message with three parallel calls,
their results with a system message between two of them (as Codex writes a developer
message), and an answer; the window is the whole of it (--max-messages). Both trees run
interleaved (new, old, new, old...) on the same home, with the same interpreter as
`python -m agenvoy_cli` from their folder; medians of wall and child CPU time, and the
ratios new/old. The number of calls fed is printed too (old: those it drops).

Usage: python bench/context_pairs.py --old /work/main [--runs 15] [--turns 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent


def turn(i: int) -> list[dict]:
    calls = [{"id": f"c{i}-{k}", "type": "function",
              "function": {"name": "shell", "arguments": orjson.dumps({"n": k}).decode()}}
             for k in range(3)]
    return [{"role": "user", "content": f"step {i}: look at the files"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": f"c{i}-0", "content": f"result {i} 0"},
            {"role": "system", "content": "approved for this session"},
            {"role": "tool", "tool_call_id": f"c{i}-1", "content": f"result {i} 1"},
            {"role": "tool", "tool_call_id": f"c{i}-2", "content": f"result {i} 2"},
            {"role": "assistant", "content": f"step {i} done"}]


def run(tree: Path, home: Path, args: list[str]) -> tuple[float, float, bytes]:
    env = {**os.environ, "AGENVOY_HOME": str(home), "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "agenvoy_cli", *args], cwd=tree, env=env,
                         capture_output=True, check=True)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return took, cpu, res.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--turns", type=int, default=300)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        batch = Path(tmp) / "batch.json"
        batch.write_bytes(orjson.dumps([m for i in range(opts.turns) for m in turn(i)]))
        run(ROOT, home, ["append", "s", "--messages", str(batch)])
        args = ["context", "s", "--json", "--max-messages", str(7 * opts.turns)]
        times: dict[str, list[tuple[float, float]]] = {"new": [], "old": []}
        fed = {}
        for _ in range(opts.runs):
            for name, tree in (("new", ROOT), ("old", opts.old)):
                took, cpu, out = run(tree, home, args)
                times[name].append((took, cpu))
                msgs = orjson.loads(out)["messages"]
                fed[name] = sum(len(m.get("tool_calls") or []) for m in msgs)
        load = os.getloadavg()
        print(f"context of {7 * opts.turns} messages ({3 * opts.turns} calls), "
              f"{opts.runs} runs each, load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
        med = {n: (statistics.median(t for t, _ in v), statistics.median(c for _, c in v))
               for n, v in times.items()}
        for name in ("new", "old"):
            print(f"  {name}: wall {med[name][0] * 1000:.0f} ms, cpu {med[name][1] * 1000:.0f} ms,"
                  f" calls fed {fed[name]}")
        print(f"  ratio new/old: wall {med['new'][0] / med['old'][0]:.2f}, "
              f"cpu {med['new'][1] / med['old'][1]:.2f}")


if __name__ == "__main__":
    main()
