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


def test_one_holder_nests_its_locks_and_two_holders_exclude_each_other(tmp_path):
    """Locks (home/locking.py): nested uses through one holder are counted, never re-locked
    (two descriptors on one file conflict even inside one process); another holder in the
    same process waits like another process (a short timeout: busy at once, no hang)."""
    import pytest

    from agenvoy_cli.errors import StoreBusy
    from agenvoy_cli.home.locking import Locks

    path = tmp_path / "agenvoy.lock"
    locks = Locks()
    with locks.hold(path, 0.05):
        with locks.hold(path, 0.05), locks.hold(path, 0.05, shared=True):
            assert locks.is_held(path, exclusive=True)
        for shared in (False, True):
            other = Locks()
            with pytest.raises(StoreBusy), other.hold(path, 0.05, shared=shared):
                pass
            assert not other.is_held(path)
        assert locks.is_held(path)
    assert not locks.is_held(path)
    with Locks().hold(path, 0.05):  # released: another holder takes it at once
        pass
    with locks.hold(path, 0.05, shared=True), pytest.raises(RuntimeError, match="upgrade"), \
            locks.hold(path, 0.05):
        pass


def test_a_store_opened_under_another_stores_lock_shares_its_locks(run, home, monkeypatch):
    """Reading a folder of the home being imported into (transfer/agenvoy.py opens a second
    Store of that home) under the importing Store's lock: given the importer's Locks, the
    second Store nests; with Locks of its own it would wait for itself (busy, here at once)."""
    import pytest

    from agenvoy_cli.errors import StoreBusy
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.transfer import agenvoy as agenvoy_transfer
    from agenvoy_cli.vectors.hooks import open_store

    assert run("append", "s", "--role", "user", "--content", "kept").exit_code == 0
    monkeypatch.setenv("AGENVOY_LOCK_TIMEOUT", "0.05")
    store = open_store(Layout(home))
    try:
        with store.write_lock():
            lines = agenvoy_transfer.folder_lines(home / "sessions" / "s", store.locks)
            assert [x["message"]["content"].endswith("kept") for x in lines
                    if x["type"] == "message"] == [True]
            with pytest.raises(StoreBusy):
                agenvoy_transfer.folder_lines(home / "sessions" / "s")  # a holder of its own
    finally:
        store.close()
