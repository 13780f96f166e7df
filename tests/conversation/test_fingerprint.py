"""Issue #29: the identity of the history.json we last wrote or aligned is kept once, in the
session's session_stats row. The append skips reading a file that still has it, `session
list` trusts the row while it holds."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.conversation import sessions, store


def append(run, sid: str, *contents: str) -> None:
    batch = [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
             for i, c in enumerate(contents)]
    res = run("append", sid, "--messages", "-", "--time", "2024-05-01 10:00:00",
              input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr


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
