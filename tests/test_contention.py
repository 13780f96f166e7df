"""Library use under contention (issue #51 item 3): a program that imports the library and
sets no OpenMP variables keeps its search speed when two busy processes share the machine.
The library picks its models' threads itself (models/local.py OpenMPThreads), never through
its host's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "helpers" / "contended_search.py"


def test_a_library_search_with_two_busy_competitors_keeps_its_speed(tmp_path):
    """Medians of quiet and loaded searches, interleaved in one process (the competitors
    paused and resumed). On the code before, a query's embedding spun against them: 2.6x
    the quiet wall time at load 12, and 0.67 s of CPU per search instead of 0.06 s (more on
    an idle machine, where the quiet search does not spin). The target is 2x
    (bench/contention.py); the wall bound is generous because a machine saturated by other
    work stretches the loaded searches by their share of the CPU alone (3.2x at load 21,
    the CPU time unchanged); the CPU time is the steady part."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "home"), "5"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    med = json.loads(proc.stdout.strip().splitlines()[-1])
    quiet, loaded = med["quiet"], med["loaded"]
    assert loaded["wall"] <= 4.0 * quiet["wall"], med
    assert loaded["cpu"] <= 2.0 * quiet["cpu"], med


def test_the_models_threads_are_the_ones_the_process_chose():
    """One thread in a host that chose nothing (its OpenMP would spin); the CPUs where it
    waits passively (the CLI, environment.start_program); OMP_NUM_THREADS where it is set."""
    from agenvoy_cli.settings import Settings

    assert Settings({}).openmp_threads(4) == 1
    assert Settings({"OMP_WAIT_POLICY": "passive"}).openmp_threads(4) == 4
    assert Settings({"OMP_NUM_THREADS": "3"}).openmp_threads(4) == 3
    assert Settings({"OMP_NUM_THREADS": "junk", "OMP_WAIT_POLICY": "ACTIVE"}).openmp_threads(4) == 1
