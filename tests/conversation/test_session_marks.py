"""Issue #16: `session list` of a home whose sessions/ folder did not change reads no
directory; any folder created, removed or renamed there since (by Agenvoy, a shell, anyone)
shows in the next listing. The sessions/ folder's mark: conversation/session_marks.py."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import orjson
import pytest

from agenvoy_cli.conversation import session_list, session_marks, sessions
from agenvoy_cli.home.layout import Layout
from agenvoy_cli.vectors.hooks import open_store


def append(run, sid: str, *contents: str) -> None:
    batch = [{"role": "user", "content": c} for c in contents]
    res = run("append", sid, "--messages", "-", "--time", "2024-05-01 10:00:00",
              input=orjson.dumps(batch))
    assert res.exit_code == 0, res.stderr


@pytest.fixture
def scans(monkeypatch, home):
    """Directories of the home read (os.scandir / os.listdir calls, in this process)."""
    seen: list[str] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def note(path) -> None:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(str(home)):
            seen.append(os.fspath(path))

    def scandir(path=".", *args):
        note(path)
        return real_scandir(path, *args)

    def listdir(path=".", *args):
        note(path)
        return real_listdir(path, *args)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    return seen


def listed(run) -> dict[str, tuple]:
    res = run("session", "list", "--json")
    assert res.exit_code == 0, res.stderr
    return {s["session_id"]: (s["message_count"], s["bytes"], s["has_summary"])
            for s in res.json()["sessions"]}


def recorded(home: Path) -> tuple:
    conn = sqlite3.connect(home / ".store" / "history.db")
    try:
        return conn.execute("SELECT mtime_ns, gen FROM folder_marks").fetchone()
    finally:
        conn.close()


def scanned_truth(run, home: Path) -> dict[str, tuple]:
    """The listing with the mark forgotten: every folder read."""
    conn = sqlite3.connect(home / ".store" / "history.db")
    with conn:
        conn.execute("UPDATE folder_marks SET mtime_ns = NULL")
    conn.close()
    return listed(run)


def seeded(run, home: Path) -> None:
    append(run, "alpha", "one", "two")
    append(run, "beta", "uno")
    append(run, "gamma", "eins", "zwei", "drei")
    listed(run)  # the first listing scans and marks sessions/
    assert recorded(home)[0] == (home / "sessions").stat().st_mtime_ns


def test_an_unchanged_home_is_listed_without_reading_a_directory(run, home, scans):
    seeded(run, home)
    scans.clear()
    got = listed(run)
    assert set(got) == {"alpha", "beta", "gamma"} and got["gamma"][0] == 3
    assert scans == []  # before the mark: one scandir of sessions/ per listing
    assert run("session", "list").exit_code == 0
    assert scans == []


def test_our_append_of_a_new_session_keeps_the_mark(run, home, scans):
    seeded(run, home)
    append(run, "delta", "new")
    scans.clear()
    got = listed(run)
    assert scans == [] and got["delta"] == (1, got["delta"][1], False)
    assert got == scanned_truth(run, home)


def agenvoy_new_session(folder: Path) -> None:
    """As Agenvoy starts a session: mkdir (another process: the kernel's clock), then
    history.json written to a temp file renamed into place."""
    subprocess.run(["mkdir", str(folder)], check=True)
    tmp = folder / "history.json.tmp"
    tmp.write_bytes(orjson.dumps([{"role": "user", "content": "hi from Agenvoy"}]))
    os.rename(tmp, folder / "history.json")


@pytest.mark.parametrize("change", ["agenvoy mkdir", "empty mkdir", "rmdir", "rename",
                                    "rename over", "file"])
def test_a_foreign_change_of_the_sessions_folder_shows_at_once(run, home, scans, change):
    seeded(run, home)
    root = home / "sessions"
    if change == "agenvoy mkdir":
        agenvoy_new_session(root / "zeta")
    elif change == "empty mkdir":
        (root / "zeta").mkdir()
    elif change == "rmdir":
        shutil.rmtree(root / "beta")
    elif change == "rename":
        os.rename(root / "beta", root / "zeta")
    elif change == "rename over":  # a folder replaced by another one: same entry names
        shutil.rmtree(root / "beta")
        os.rename(root / "gamma", root / "beta")
    else:
        (root / "notes.txt").write_text("not a session")
    scans.clear()
    got = listed(run)
    assert str(root) in scans  # the mark no longer held: sessions/ read again
    if change.endswith("mkdir") or change == "rename":
        assert "zeta" in got
    if change == "agenvoy mkdir":
        assert got["zeta"][0] == 1
    if change == "rename over":
        assert got["beta"][0] == 3
    assert got == scanned_truth(run, home)
    # that listing found every folder's row? then it marked again (else it keeps scanning)
    scans.clear()
    assert listed(run) == got
    assert (scans == []) == (change in ("rmdir", "rename over", "file"))


def test_a_dropped_row_clears_the_mark(run, home, scans):
    """A row dropped while its folder stays (a `session remove` that died between its
    transaction and the folder's removal) must not vanish from the listing."""
    seeded(run, home)
    store = open_store(Layout(home))
    try:
        with store.write_lock(), store.transaction() as conn:
            sessions.drop(conn, "beta")
    finally:
        store.close()
    mark, gen = recorded(home)
    assert mark is None and gen == 1
    scans.clear()
    got = listed(run)
    assert scans and got["beta"][0] == 1  # read from its files


def test_a_listing_records_its_mark_only_if_no_row_was_dropped_meanwhile(run, home):
    append(run, "alpha", "one")
    append(run, "beta", "uno")
    store = open_store(Layout(home))
    try:
        with store.read_lock():
            entries, mark = session_list._session_rows(store, None)
        assert mark is not None and [e[0] for e in entries] == ["alpha", "beta"]
        with store.write_lock(), store.transaction() as conn:  # `session reset beta`
            sessions.drop(conn, "beta")
        session_list.record_listing_mark(store, *mark)
    finally:
        store.close()
    assert recorded(home) == (None, 1)


def test_a_busy_home_lists_at_once_and_records_nothing(run, home):
    import fcntl

    append(run, "alpha", "one")
    store = open_store(Layout(home))
    try:
        with store.read_lock():
            _, mark = session_list._session_rows(store, None)
        assert mark is not None
        fd = os.open(home / ".store" / "agenvoy.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # as another process writing
            session_list.record_listing_mark(store, *mark)  # not waited for
        finally:
            os.close(fd)
    finally:
        store.close()
    assert recorded(home) is None


def test_a_folder_without_a_row_keeps_the_listing_scanning(run, home, scans):
    append(run, "alpha", "one")
    agenvoy_new_session(home / "sessions" / "zeta")  # never archived by us
    for _ in range(2):
        scans.clear()
        got = listed(run)
        assert scans and got["zeta"][0] == 1
    assert (recorded(home) or (None,))[0] is None
    assert run("backfill", "zeta").exit_code == 0  # now it has its row
    listed(run)
    scans.clear()
    assert listed(run)["zeta"][0] == 1 and scans == []


def test_our_append_does_not_hide_a_folder_another_program_made_meanwhile(run, home, scans,
                                                                           monkeypatch):
    seeded(run, home)
    real = session_marks.ensure_dir

    def racing(folder):  # Agenvoy makes a session in the same moment as our mkdir
        (folder.parent / "zeta").mkdir()
        real(folder)

    monkeypatch.setattr(session_marks, "ensure_dir", racing)
    append(run, "delta", "new")
    scans.clear()
    got = listed(run)
    assert scans and {"delta", "zeta"} <= set(got)


def test_migration_012_on_a_home_of_schema_11(run, home, scans):
    from agenvoy_cli.home.schema import SCHEMA_VERSION

    append(run, "alpha", "one")
    conn = sqlite3.connect(home / ".store" / "history.db")
    with conn:
        conn.execute("DROP TABLE folder_marks")
        conn.execute("DELETE FROM agenvoy_migrations WHERE name = '012_folder_marks'")
        conn.execute("PRAGMA user_version = 11")
    conn.close()
    assert set(listed(run)) == {"alpha"}  # upgrades first, then lists and marks
    conn = sqlite3.connect(home / ".store" / "history.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    assert recorded(home)[0] == (home / "sessions").stat().st_mtime_ns
    scans.clear()
    assert set(listed(run)) == {"alpha"} and scans == []


def test_a_folder_made_while_a_listing_scans_shows_in_the_next(run, home, monkeypatch):
    """The listing marks sessions/ before its scan: a folder created after the scan read the
    entries (yet before the mark is recorded) leaves the mark broken, not trusted."""
    append(run, "alpha", "one")
    real = sessions.folder_names

    def scan_then_race(root):
        names = real(root)
        agenvoy_new_session(root / "late")
        return names

    with monkeypatch.context() as patched:
        patched.setattr(sessions, "folder_names", scan_then_race)
        assert set(listed(run)) == {"alpha"}
    assert recorded(home)[0] is not None  # recorded, but no longer the folder's mtime
    assert listed(run)["late"][0] == 1


def test_a_listing_records_nothing_into_a_database_replaced_meanwhile(run, home):
    """doctor's salvage replaces history.db (session_stats is not carried over) between a
    listing's scan and its record: the mark would vouch for rows that are gone."""
    append(run, "alpha", "one")
    append(run, "beta", "uno")
    store = open_store(Layout(home))
    try:
        with store.read_lock():
            _, mark = session_list._session_rows(store, None)
        assert mark is not None
        conn = sqlite3.connect(home / ".store" / "history.db")
        with conn:  # as a fresh database: no rows, no mark, gen 0
            conn.execute("DELETE FROM session_stats WHERE session_id = 'beta'")
            conn.execute("DELETE FROM folder_marks")
        conn.close()
        session_list.record_listing_mark(store, *mark)
    finally:
        store.close()
    assert recorded(home) is None
    assert listed(run)["beta"][0] == 1
