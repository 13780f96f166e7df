"""Invariant 4: kill -9 at random instants, inject failures; nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import select
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.conftest import agenvoy
from tests.helpers.home import snapshot
from tests.helpers.processes import spawn

ITERATIONS = int(os.environ.get("AGENVOY_CRASH_ITERATIONS", "30"))


def archive_counts(home: Path) -> Counter:
    with sqlite3.connect(home / ".store/history.db") as conn:
        return Counter(c.split("\n")[-1].split(" ")[0]
                       for (c,) in conn.execute("SELECT content FROM messages"))


def test_kill_9_during_append_compact_backfill(home, run, monkeypatch):
    rng = random.Random(1234)
    env = {"AGENVOY_MAX_HISTORY_BYTES": "4096"}
    # doctor runs in this process (the killed ones are the real program): the same code a
    # fresh process runs, without its start-up twice an iteration
    monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", "4096")
    acked: set[str] = set()
    agenvoy("append", "s", "--role", "user", "--content", "seed", env=env)
    kinds = Counter()
    for it in range(ITERATIONS):
        kind = ("append", "compact", "backfill")[it % 3]
        kinds[kind] += 1
        if kind == "append":
            proc = spawn("append", "s", f"i{it}", "200", env=env)
        elif kind == "compact":
            proc = spawn("compact", "s", "200", "1024", env=env)
            extra = spawn("append", "s", f"i{it}", "200", env=env)
        else:
            # An outside writer extended history.json; backfill must archive it exactly once.
            path = home / "sessions/s/history.json"
            hist = orjson.loads(path.read_bytes())
            new = [f"b{it}-{k}" for k in range(5)]
            hist += [{"role": "user" if k % 2 == 0 else "assistant", "content": f"{n} y"}
                     for k, n in enumerate(new)]
            path.write_bytes(orjson.dumps(hist))
            acked.update(new)
            proc = spawn("backfill", "200", env=env)
        time.sleep(rng.uniform(0.3, 0.9))  # past interpreter start-up, into the writes
        victims = [proc] + ([extra] if kind == "compact" else [])
        for victim in victims:
            victim.send_signal(signal.SIGKILL)
        for victim in victims:
            out, _ = victim.communicate()
            acked.update(line for line in out.decode().split() if line.startswith("i"))
        repaired = run("doctor", "--repair", "--json")
        assert repaired.exit_code == 0, repaired.stdout + repaired.stderr
        assert run("doctor").exit_code == 0
        orjson.loads((home / "sessions/s/history.json").read_bytes())  # parses
        counts = archive_counts(home)
        lost = [a for a in acked if counts[a] != 1]
        assert not lost, f"iteration {it}: acknowledged but not archived once: {lost[:5]}"
        assert max(counts.values()) == 1, "a message was archived twice"
    assert len(acked) > ITERATIONS  # the kills landed after real work
    print(f"crash iterations: {dict(kinds)}, acknowledged messages: {len(acked)}")


def test_failed_replace_leaves_previous_state(run, home, monkeypatch):
    run("append", "s", "--role", "user", "--content", "before")
    before = snapshot(home)

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    res = run("append", "s", "--role", "user", "--content", "after")
    assert res.exit_code == 1 and f"no space left on {home}" in res.stderr
    monkeypatch.undo()
    assert snapshot(home) == before
    assert not list((home / "sessions/s").glob(".*.tmp"))


def test_failed_sqlite_write_restores_history(run, home, monkeypatch):
    run("append", "s", "--role", "user", "--content", "before")
    before = snapshot(home)
    from agenvoy_cli.conversation import archive

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(archive, "insert", broken)
    res = run("append", "s", "--role", "user", "--content", "after")
    assert res.exit_code != 0 and "disk I/O error" in res.stderr
    monkeypatch.undo()
    assert snapshot(home) == before
    assert run("doctor").exit_code == 0


@pytest.mark.parametrize("step", ["set_start", "write_history"])
def test_failed_compaction_loses_nothing(run, home, monkeypatch, step):
    batch = [{"role": r, "content": f"{r} {i} " + "z" * 200}
             for i in range(20) for r in ("user", "assistant")]
    run("append", "s", "--messages", "-", "--no-compact", input=orjson.dumps(batch))
    from agenvoy_cli.conversation import compaction

    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(compaction if step == "write_history" else compaction.archive, step,
                        broken)
    res = run("compact", "s", "--max-bytes", "2048")
    assert res.exit_code != 0
    monkeypatch.undo()
    assert len(orjson.loads((home / "sessions/s/history.json").read_bytes())) == 40
    assert run("doctor", "--repair").exit_code == 0
    assert run("doctor").exit_code == 0
    assert sum(archive_counts(home).values()) == 40


def _repaired(run) -> None:
    """doctor --repair exits 0 and doctor is then clean (in this process: the killed ones
    are the real program)."""
    res = run("doctor", "--repair", "--json")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert run("doctor").exit_code == 0


def _first_line(proc, timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline().decode() if ready else "(nothing within the timeout)"


def test_kill_9_during_summarize_errors_rag_and_reset(home, tmp_path, run):
    from tests.llm_server import FakeLLM

    rng = random.Random(99)
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(30):
        (docs / f"note{i}.md").write_text(f"# Note {i}\n\n部署 deploy note number {i}.\n")
    assert agenvoy("rag", "create", "notes", "--path", str(docs), "--no-index").returncode == 0
    recorded: set[str] = set()
    with FakeLLM() as llm:
        env = {"AGENVOY_LLM_BASE_URL": llm.url, "AGENVOY_LLM_MODEL": "fake"}
        for it in range(4):
            batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"c{it}-{i}"}
                     for i in range(40)]
            agenvoy("append", "chat", "--messages", "-", input=orjson.dumps(batch))
            (docs / f"note{it}.md").write_text(f"# Note {it}\n\nedited in round {it}\n")
            victims = [spawn("summarize", "50", env=env), spawn("errors", f"e{it}", "50"),
                       spawn("rag-sync", "notes", "50"), spawn("reset", "50")]
            # Past model load and into the writes, however slow the machine: wait for the
            # first acknowledged record, then kill at a random point after it.
            first = _first_line(victims[1], timeout=120)
            assert first.startswith("rec "), first
            recorded.add(first.split()[1])
            time.sleep(rng.uniform(0.0, 1.5))
            for victim in victims:
                victim.send_signal(signal.SIGKILL)
            for victim in victims:
                out, _ = victim.communicate()
                recorded.update(line.split()[1] for line in out.decode().splitlines()
                                if line.startswith("rec "))
            _repaired(run)
            for path in (home / "sessions/chat").glob("summary*.json"):
                orjson.loads(path.read_bytes())  # parses
        assert agenvoy("summarize", "chat", env=env).returncode == 0
    for record_id in recorded:  # in this process (a start-up per record otherwise)
        assert run("errors", "show", record_id).exit_code == 0, record_id
    assert agenvoy("rag", "sync", "notes").returncode == 0
    files = orjson.loads(agenvoy("rag", "files", "notes", "--json").stdout)
    assert len(files["files"]) == 30
    _repaired(run)
