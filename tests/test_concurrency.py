"""Invariant 5: many processes on one home; writes serialized, nothing lost or doubled."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import orjson

from tests.conftest import agenvoy
from tests.helpers.processes import spawn


def archived(home: Path) -> Counter:
    with sqlite3.connect(home / ".store/history.db") as conn:
        return Counter(c.split("\n")[-1].split(" ")[0]
                       for (c,) in conn.execute("SELECT content FROM messages"))


def finish(procs: list[subprocess.Popen]) -> list[str]:
    lines = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err.decode()
        lines += out.decode().split()
    assert not [line for line in lines if line.startswith("FAILED")], lines
    return lines


def test_eight_processes_one_session(home):
    procs = [spawn("append", "shared", f"p{n}", "50") for n in range(8)]
    acked = finish(procs)
    assert len(acked) == 400
    hist = orjson.loads((home / "sessions/shared/history.json").read_bytes())
    assert len(hist) == 400
    counts = archived(home)
    assert all(counts[a] == 1 for a in acked) and sum(counts.values()) == 400
    assert agenvoy("doctor").returncode == 0


def test_eight_processes_eight_sessions(home):
    procs = [spawn("append", f"s{n}", f"p{n}", "50") for n in range(8)]
    acked = finish(procs)
    assert len(acked) == 400
    for n in range(8):
        hist = orjson.loads((home / f"sessions/s{n}/history.json").read_bytes())
        assert len(hist) == 50
    counts = archived(home)
    assert all(counts[a] == 1 for a in acked) and sum(counts.values()) == 400
    assert agenvoy("doctor").returncode == 0


def test_appends_while_compaction_triggers(home):
    # A long lock timeout: on a loaded machine a bounded wait (exit 75) is not what this
    # test is about. Compaction starts once the session exists (before, exit 3 is right).
    env = {"AGENVOY_MAX_HISTORY_BYTES": "4096", "AGENVOY_LOCK_TIMEOUT": "120"}
    procs = [spawn("append", "s", f"p{n}", "40", env=env) for n in range(4)]
    deadline = time.monotonic() + 120
    while not (home / "sessions/s/history.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    procs.append(spawn("compact", "s", "40", "2048", env=env))
    lines = finish(procs)
    acked = [line for line in lines if line.startswith("p")]
    assert len(acked) == 160
    counts = archived(home)
    assert all(counts[a] == 1 for a in acked) and sum(counts.values()) == 160
    assert (home / "sessions/s/history.json").stat().st_size <= 4096
    assert agenvoy("doctor").returncode == 0


def test_lock_contention_fails_busy_after_bounded_wait(home):
    agenvoy("append", "s", "--role", "user", "--content", "first")
    holder = spawn("hold-lock", "30")
    assert holder.stdout.readline().strip() == b"locked"
    started = time.monotonic()
    res = agenvoy("append", "s", "--role", "user", "--content", "blocked",
                  env={"AGENVOY_LOCK_TIMEOUT": "0.5"})
    waited = time.monotonic() - started
    still_holding = holder.poll() is None  # gave up before the holder let go (its 30 s)
    holder.kill()
    holder.wait()
    assert res.returncode == 75
    assert b"busy" in res.stderr and res.stderr.count(b"\n") == 1
    assert waited >= 0.5 and still_holding  # waited as told, and not for the holder
    hist = orjson.loads((home / "sessions/s/history.json").read_bytes())
    assert len(hist) == 1
    # Once the holder is gone the same command succeeds: busy is retryable.
    assert agenvoy("append", "s", "--role", "user", "--content", "retry").returncode == 0
