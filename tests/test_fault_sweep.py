"""Every write path of a home, failed at its injection points (tests/helpers/fault_sweep.py).

The default run checks a sample: AGENVOY_FAULT_CASES cases (default 4: a minute on two busy
cores) drawn with a seed (AGENVOY_FAULT_SEED, else a fresh one; printed, so a failing draw
can be replayed) from every (path, point, failure); AGENVOY_FAULT_PATHS (names, comma-
separated) and AGENVOY_FAULT_FAILURES (enospc, eio, kill, interrupt, timelimit; comma-
separated) narrow it. The full sweep runs every case of every path:

    AGENVOY_FAULT_SWEEP=full .venv/bin/python -m pytest -q -s tests/test_fault_sweep.py

(docs/reliability.md has the numbers of the last full run).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from tests.helpers import fault_sweep
from tests.llm_server import FakeLLM

FULL = os.environ.get("AGENVOY_FAULT_SWEEP") == "full"
CASES = int(os.environ.get("AGENVOY_FAULT_CASES", "4"))
ONLY = [p for p in os.environ.get("AGENVOY_FAULT_PATHS", "").split(",") if p]
FAILURES = [f for f in os.environ.get("AGENVOY_FAULT_FAILURES", "").split(",") if f] \
    or list(fault_sweep.FAILURES)
# read here: the home fixture clears AGENVOY_* before each test
SEED = os.environ.get("AGENVOY_FAULT_SEED")


@pytest.fixture(scope="module")
def llm_url():
    with FakeLLM() as server:
        yield server.url


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fault-sweep")


def _seed() -> int:
    return int(SEED) if SEED else random.SystemRandom().randrange(1 << 30)


def test_every_write_path_at_its_injection_points(llm_url: str, workdir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Taipei")
    paths = [p for p in fault_sweep.paths(llm_url) if not ONLY or p.name in ONLY]
    seed = _seed()
    rng = random.Random(seed)
    if FULL:
        chosen = {p.name: None for p in paths}
    else:  # a sample of paths first (each costs a base home and a reference run)
        names = rng.sample([p.name for p in paths], min(CASES, len(paths)))
        chosen = {n: 1 + (CASES - len(names) > i) for i, n in enumerate(names)}
    print(f"\nfault sweep: seed {seed} ({'full' if FULL else f'{CASES} sampled cases'}; "
          f"replay with AGENVOY_FAULT_SEED={seed})")
    started = time.monotonic()
    cases, failed, points = 0, [], 0
    for path in paths:
        if path.name not in chosen:
            continue
        ref = fault_sweep.reference(path, workdir)
        points += len(ref.points)
        every = [(at, f) for at in range(1, len(ref.points) + 1) for f in FAILURES
                 if path.takes(f)]
        draw = every if chosen[path.name] is None else rng.sample(
            every, min(chosen[path.name] or 1, len(every)))
        for at, failure in draw:
            cases += 1
            problems = fault_sweep.check_case(ref, at, failure, workdir)
            failed += problems
            print(f"  {path.name} @{at} {failure}: {'FAIL' if problems else 'ok'}")
    print(f"fault sweep: {len(chosen)} path(s), {points} injection point(s), {cases} case(s), "
          f"{len(failed)} problem(s), {time.monotonic() - started:.0f} s")
    assert not failed, "\n".join(failed)


def test_every_path_says_whether_it_is_a_hook_before_its_inputs_exist() -> None:
    """A sampled draw asked `errors forget` before its error id was written (CI, seed 574167135)."""
    kinds = {p.name: p.hook for p in fault_sweep.paths("http://127.0.0.1:9/v1")}
    assert kinds["errors forget"] is False
    assert any(kinds.values()) and not all(kinds.values())
