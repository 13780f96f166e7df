"""Issue #29: the identity of the history.json we last wrote or aligned is kept once, in the
session's session_stats row. The append skips reading a file that still has it, `session
list` trusts the row while it holds, and a home of the older layout (session_meta.hist_*
beside the row) migrates without losing either."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.conversation import sessions, store
from tests.helpers.home import append
from tests.old_schemas import V14_FINGERPRINT_TWICE


def listed(run) -> dict[str, tuple[int, int]]:
    res = run("session", "list", "--json")
    assert res.exit_code == 0, res.stderr
    return {s["session_id"]: (s["message_count"], s["bytes"]) for s in res.json()["sessions"]}


def on_disk(home: Path, sid: str) -> tuple[int, int]:
    path = home / "sessions" / sid / "history.json"
    return len(orjson.loads(path.read_bytes())), path.stat().st_size


def agenvoy_write(path: Path, data: bytes) -> None:
    """As Agenvoy writes history.json: `<path>.tmp` written, then renamed over the file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.rename(tmp, path)


def agenvoy_adds(home: Path, sid: str, text: str) -> None:
    path = home / "sessions" / sid / "history.json"
    messages = orjson.loads(path.read_bytes())
    messages.append({"role": "user", "content": f"---\n當前時間: 2024-07-01 09:30:00\n---\n{text}"})
    agenvoy_write(path, orjson.dumps(messages))


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """Sessions whose history.json an append read (its fast path not taken)."""
    seen: list[str] = []
    real = store.Store._history_for_append

    def noting(self, conn, session_id, rows):
        history, count = real(self, conn, session_id, rows)
        if history.raw is not None or count == 0:
            seen.append(session_id)
        return history, count

    monkeypatch.setattr(store.Store, "_history_for_append", noting)
    return seen


def db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / ".store" / "history.db")


def identity(home: Path, sid: str) -> tuple[int, int, int]:
    st = (home / "sessions" / sid / "history.json").stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def old_release_skips(home: Path, sid: str) -> bool:
    """Would a release before migration 015 skip reading this history.json (its check:
    session_meta.hist_* equal to the file's inode, size and mtime)?"""
    with db(home) as conn:
        row = conn.execute("SELECT hist_ino, hist_size, hist_mtime_ns FROM session_meta "
                           "WHERE session_id = ?", (sid,)).fetchone()
    return row is not None and row[0] is not None and tuple(row) == identity(home, sid)


def archived(home: Path, sid: str) -> list[str]:
    with db(home) as conn:
        return [r[0] for r in conn.execute(
            "SELECT content FROM messages WHERE session_id = ? AND gone = 0 ORDER BY seq",
            (sid,))]


def test_an_append_after_an_alignment_reads_no_file(run, home, parses):
    """The row an alignment wrote vouches for the file as an append's does (before #29 only
    the append's own record did: the next append parsed the file again)."""
    append(run, "alpha", "one", "two")
    agenvoy_adds(home, "alpha", "from agenvoy")
    assert run("backfill", "alpha").exit_code == 0
    parses.clear()
    append(run, "alpha", "three")
    append(run, "alpha", "four")
    assert parses == []
    assert archived(home, "alpha")[-3:] == [
        "---\n當前時間: 2024-07-01 09:30:00\n---\nfrom agenvoy",
        "---\n當前時間: 2024-05-01 10:00:00\n---\nthree",
        "---\n當前時間: 2024-05-01 10:00:00\n---\nfour"]
    assert listed(run)["alpha"] == on_disk(home, "alpha") and on_disk(home, "alpha")[0] == 5
    with db(home) as conn:  # written nowhere else
        assert conn.execute("SELECT count(*) FROM session_meta WHERE hist_ino IS NOT NULL "
                            "OR hist_count IS NOT NULL").fetchone()[0] == 0


def test_a_file_agenvoy_rewrote_is_read(run, home, parses):
    append(run, "alpha", "one", "two")
    parses.clear()
    agenvoy_adds(home, "alpha", "from agenvoy")
    assert listed(run)["alpha"] == on_disk(home, "alpha")
    append(run, "alpha", "three")
    assert parses == ["alpha"]
    assert len(archived(home, "alpha")) == 4 == on_disk(home, "alpha")[0]
    assert listed(run)["alpha"] == on_disk(home, "alpha")


def test_a_file_replaced_while_the_row_is_written_is_not_vouched_for(run, home, parses,
                                                                        monkeypatch):
    """Agenvoy takes no lock of ours: a history.json it replaces between our read and the
    row's stat must not get the count of the file we read (the append would skip reading
    it and never archive what Agenvoy added; the listing would show the old count)."""
    append(run, "alpha", "one", "two")
    real = sessions.mark_folder
    raced: list[int] = []

    def racing(folder, mark=None):
        if not raced:
            raced.append(1)
            agenvoy_adds(home, "alpha", "in between")
        return real(folder, mark)

    with monkeypatch.context() as patched:
        patched.setattr(sessions, "mark_folder", racing)
        assert run("backfill", "alpha").exit_code == 0
    assert raced
    assert listed(run)["alpha"] == on_disk(home, "alpha") and on_disk(home, "alpha")[0] == 3
    parses.clear()
    append(run, "alpha", "three")
    assert parses == ["alpha"]
    assert len(archived(home, "alpha")) == 4 == on_disk(home, "alpha")[0]
    parses.clear()
    append(run, "alpha", "four")
    assert parses == []  # our own write vouches again


def test_a_home_of_the_older_layout_keeps_its_fast_path_and_listing(run, home, parses):
    """Schema 14: session_meta.hist_* (the last append's file) beside session_stats. alpha's
    last write was an append (both agree); beta's a backfill of what Agenvoy wrote (only the
    row describes the file); gamma was made by a release before migration 007 (no row)."""
    from agenvoy_cli.home.schema import SCHEMA_VERSION

    append(run, "alpha", "one", "two")
    append(run, "beta", "uno")
    append(run, "gamma", "eins", "zwei", "drei")
    beta_before = identity(home, "beta")
    agenvoy_adds(home, "beta", "dos")
    assert run("backfill", "beta").exit_code == 0
    with db(home) as conn:
        conn.execute("INSERT INTO session_meta (session_id, hist_ino, hist_size, hist_mtime_ns, "
                     "hist_count) VALUES ('beta', ?, ?, ?, 1) ON CONFLICT(session_id) DO UPDATE "
                     "SET hist_ino = excluded.hist_ino, hist_size = excluded.hist_size, "
                     "hist_mtime_ns = excluded.hist_mtime_ns, hist_count = 1", beta_before)
        conn.executescript(V14_FINGERPRINT_TWICE)
        conn.execute("DELETE FROM session_stats WHERE session_id = 'gamma'")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 14
    assert old_release_skips(home, "alpha") and old_release_skips(home, "gamma")
    assert not old_release_skips(home, "beta")

    got = listed(run)  # migrates first (under the write lock)
    assert got == {sid: on_disk(home, sid) for sid in ("alpha", "beta", "gamma")}
    with db(home) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("SELECT count(*) FROM session_meta WHERE hist_ino IS NOT NULL "
                            "OR hist_count IS NOT NULL").fetchone()[0] == 0
        stats = {r[0]: r[1:] for r in conn.execute(
            "SELECT session_id, hist_ino, bytes, hist_mtime_ns, messages FROM session_stats")}
    for sid in ("alpha", "beta", "gamma"):
        assert stats[sid] == (*identity(home, sid), on_disk(home, sid)[0])
    parses.clear()
    for sid in ("alpha", "beta", "gamma"):
        append(run, sid, "more")
    assert parses == []  # beta: the older layout's hist_* were stale and would have read it
    assert listed(run) == {sid: on_disk(home, sid) for sid in ("alpha", "beta", "gamma")}
    for sid in ("alpha", "beta", "gamma"):
        assert len(archived(home, sid)) == on_disk(home, sid)[0]
        assert not old_release_skips(home, sid)  # an older release reads the file we wrote
    # and the row still gives way to Agenvoy's writes after the migration
    agenvoy_adds(home, "gamma", "vier")
    assert listed(run)["gamma"] == on_disk(home, "gamma")
    append(run, "gamma", "fünf")
    assert parses == ["gamma"]
    assert len(archived(home, "gamma")) == on_disk(home, "gamma")[0] == 6


def test_the_indexer_sees_every_session_grow(run, home):
    """The server's indexer finds the sessions that grew by archive.next_seqs, which used to
    list session_meta alone: every append wrote its fingerprint there, so every session had
    a row. A session never trimmed has none now; its session_stats row names it."""
    from agenvoy_cli.conversation import archive

    append(run, "alpha", "one")
    append(run, "beta", "uno", "dos")
    with db(home) as conn:
        assert conn.execute("SELECT count(*) FROM session_meta").fetchone()[0] == 0
        assert archive.next_seqs(conn) == {"alpha": 1, "beta": 2}
    append(run, "alpha", "two")
    with db(home) as conn:
        assert archive.next_seqs(conn) == {"alpha": 2, "beta": 2}
