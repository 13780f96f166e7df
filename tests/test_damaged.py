"""Damaged homes: a clear message, no further damage, and a documented way back."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys

import orjson
import pytest

from tests import words_embedder
from tests.conftest import ROOT
from tests.helpers.home import history, snapshot


def seed(run, sid: str = "s", n: int = 6) -> None:
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} 部署"}
             for i in range(n)]
    assert run("append", sid, "--messages", "-", input=orjson.dumps(batch)).exit_code == 0


def test_corrupt_database_is_refused_and_rebuilt_from_history(run, home):
    seed(run)
    db = home / ".store/history.db"
    for suffix in ("-wal", "-shm"):
        (home / ".store" / f"history.db{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    before = snapshot(home)
    res = run("append", "s", "--role", "user", "--content", "x")
    assert res.exit_code == 4 and "history.db is damaged" in res.stderr
    assert "doctor --repair" in res.stderr
    assert snapshot(home) == before
    assert run("context", "s").exit_code == 0  # the hot path does not need SQLite
    doctor = run("doctor", "--json")
    assert doctor.exit_code == 1 and doctor.json()["problems"][0]["check"] == "sqlite"
    # the documented way back: move the file aside, rebuild the archive from history.json
    db.rename(db.with_name("history.db.damaged"))
    assert run("backfill", "--all").exit_code == 0
    assert run("doctor").exit_code == 0
    assert run("search", "s", "部署", "--mode", "keyword", "--json").json()["results"]


def test_database_locked_by_another_program_is_busy(run, home, monkeypatch):
    seed(run)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(home / '.store/history.db')!r}, isolation_level=None)\n"
         "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, cwd=ROOT)
    assert holder.stdout.readline().strip() == b"locked"
    monkeypatch.setenv("AGENVOY_LOCK_TIMEOUT", "0.5")
    before = history(home)
    res = run("append", "s", "--role", "user", "--content", "x")
    holder.kill()
    holder.wait()
    assert res.exit_code == 75 and "locked" in res.stderr
    assert history(home) == before  # history.json was put back
    assert run("append", "s", "--role", "user", "--content", "x").exit_code == 0
    assert run("doctor").exit_code == 0


def test_immutable_database_fails_cleanly(run, home):
    seed(run)
    db = home / ".store/history.db"
    run("doctor")  # checkpoint: leaves no WAL behind
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        before = history(home)
        res = run("append", "s", "--role", "user", "--content", "x")
        assert res.exit_code == 1 and res.stderr.count("\n") == 1
        assert "read-only" in res.stderr or "readonly" in res.stderr
        assert history(home) == before
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)
    assert run("doctor").exit_code == 0


def test_full_disk(run, home, tmp_path, monkeypatch):
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mount)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        monkeypatch.setenv("AGENVOY_HOME", str(mount / "home"))
        monkeypatch.setenv("AGENVOY_MAX_HISTORY_BYTES", str(1 << 20))
        acked = []
        for i in range(400):
            res = run("append", "s", "--role", "user" if i % 2 == 0 else "assistant",
                      "--content", f"n{i} " + "z" * 2000)
            if res.exit_code != 0:
                break
            acked.append(i)
        else:
            pytest.fail("the disk never filled")
        assert res.exit_code == 1 and res.stderr.count("\n") == 1
        assert f"no space left on {mount / 'home'}" in res.stderr, res.stderr
        hist = orjson.loads((mount / "home/sessions/s/history.json").read_bytes())
        assert len(hist) == len(acked)  # nothing acknowledged lost, nothing half-written
        with sqlite3.connect(mount / "home/.store/history.db") as conn:
            assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == len(acked)
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_damaged_summary_files(run, home):
    seed(run)
    folder = home / "sessions/s"
    (folder / "summary.json").write_text('{"key_decisions": [')
    res = run("context", "s", "--json")
    assert res.exit_code == 0 and "summary.json" in res.stderr
    assert [m["role"] for m in res.json()["messages"]][0] == "user"  # no summary, window intact
    (folder / "summary.meta.json").write_text("nope")
    assert run("summarize", "s", "--llm-command", "false").exit_code == 4
    assert run("doctor").exit_code == 1
    assert run("doctor", "--repair").exit_code == 0
    assert run("doctor").exit_code == 0
    assert list(folder.glob("summary.json.damaged-*"))
    assert list(folder.glob("summary.meta.json.damaged-*"))


def test_missing_chroma_directory_is_rebuilt_by_search(run, home):
    seed(run, n=30)
    assert run("backfill", "s", "--vectors").exit_code == 0
    shutil.rmtree(home / ".store/chroma")
    res = run("search", "s", "m3 部署", "--json")
    assert res.exit_code == 0, res.stderr
    assert res.json()["results"]
    assert run("doctor").exit_code == 0


def test_directory_deleted_under_a_live_client(home, monkeypatch):
    # One process (an agent using the library) keeps chromadb's per-path system alive; a
    # deleted directory must give a fresh index, not "no such table" from the old one.
    from agenvoy_cli.home.layout import Layout
    from agenvoy_cli.vectors import api as vectors
    from agenvoy_cli.vectors.hooks import open_store
    from tests.words_embedder import WordsEmbedder

    words_embedder.use(monkeypatch, WordsEmbedder())
    store = open_store(Layout(home))
    index = vectors.open_index(store, "probe")
    emb = index.embedder
    index.add(["a", "b"], emb.embed_documents(["deploy m3", "lunch menu"]), [{"k": 1}, {"k": 2}])
    assert index.query(emb.embed_query("deploy"), 1)[0].id == "a"
    shutil.rmtree(home / ".store/chroma")
    again = vectors.open_index(store, "probe")
    assert again.collection.count() == 0
    again.add(["c"], emb.embed_documents(["deploy again"]), [{"k": 3}])
    assert [h.id for h in again.query(emb.embed_query("deploy"), 5)] == ["c"]


def test_a_damaged_file_moved_aside_twice_in_one_second_keeps_both(tmp_path, monkeypatch):
    """One move-aside for every damaged file: a second repair within the same second (the
    name already taken) keeps the first damaged copy, and a database's -wal/-shm follow it."""
    import time

    from agenvoy_cli.home import salvage
    from agenvoy_cli.home.files import move_aside

    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20250101-000000")
    path = tmp_path / "history.json"
    kept = []
    for text in ("first", "second", "third"):
        path.write_text(text, "utf-8")
        kept.append(move_aside(path))
    assert [p.read_text("utf-8") for p in kept] == ["first", "second", "third"]
    assert [p.name for p in kept] == ["history.json.damaged-20250101-000000",
                                      "history.json.damaged-20250101-000000-1",
                                      "history.json.damaged-20250101-000000-2"]
    db = tmp_path / "history.db"
    for round_ in range(2):
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / f"history.db{suffix}").write_text(f"{round_}{suffix}", "utf-8")
        target = salvage.move_aside(db)
        assert target.read_text("utf-8") == f"{round_}"
        assert (tmp_path / f"{target.name}-wal").read_text("utf-8") == f"{round_}-wal"
    assert not db.exists() and len(list(tmp_path.glob("history.db.damaged-*"))) == 6


def test_sqlite_errors_become_ours_and_stay_sqlite3_errors(tmp_path):
    """wrap() raises a class deriving from both (the same class every time, built at import),
    whatever sqlite3 class the error is, a subclass made elsewhere included."""
    from agenvoy_cli.errors import AgenvoyError, CorruptStore, StoreBusy
    from agenvoy_cli.home import dbguard

    path = tmp_path / "history.db"
    busy = dbguard.wrap(sqlite3.OperationalError("database is locked"), path)
    again = dbguard.wrap(sqlite3.OperationalError("database is busy"), path)
    assert isinstance(busy, StoreBusy) and isinstance(busy, sqlite3.OperationalError)
    assert type(busy) is type(again) and "locked by another process" in str(busy)

    class Odd(sqlite3.DatabaseError):
        pass

    damaged = dbguard.wrap(Odd("file is not a database"), path)
    assert isinstance(damaged, CorruptStore) and isinstance(damaged, sqlite3.DatabaseError)
    assert type(damaged) is type(dbguard.wrap(sqlite3.DatabaseError("malformed"), path))
    bug = sqlite3.ProgrammingError("no such table: x")
    assert dbguard.wrap(bug, path) is bug and not isinstance(bug, AgenvoyError)
    conn = dbguard.open_guarded(path, path)
    try:
        with pytest.raises(sqlite3.OperationalError) as caught:
            conn.execute("SELECT * FROM missing")
        assert not isinstance(caught.value, AgenvoyError)  # a bug stays a bug
    finally:
        conn.close()
