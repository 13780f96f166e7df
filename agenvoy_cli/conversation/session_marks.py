"""Folder marks: how `session list` knows, from one stat, that a folder did not change.

A writer sets the folder's mtime to now, to the nanosecond, and records that value. Any later
create, rename or removal of an entry in the folder gets the kernel's coarse clock (the last
tick), never that value: while the mtime still equals the record, the folder holds the
entries it held when marked. Agenvoy's own writes (a temp file renamed into place) and its
mkdir of a new session show as a changed mtime.

Each session folder's mark is session_stats.dir_mtime_ns (conversation/sessions.py). The
sessions/ folder's own mark is a row of folder_marks: while it holds, every session folder has
its row in session_stats and the listing reads no directory at all. So it is recorded only
when every folder had its row, and a dropped row clears it (`cleared`, in the dropping
transaction; `gen` counts the drops). Two writers record it:
- `session list`, after a scan that found a row for every folder: the folder is marked before
  the scan (an entry created meanwhile changes the mtime again), and the value is recorded
  afterwards, under the write lock if that is free at once (else the next listing tries
  again), and only if no row was dropped in between (same `gen`) and every folder the scan
  found still has its row (the database may have been replaced meanwhile).
- an append that creates a session's folder: when the mark held just before its mkdir and the
  sessions/ link count grew by exactly one (no other folder came or went meanwhile), the folder
  is marked again and the new value recorded in the transaction that writes the session's row
  (`record_new_folder`, from sessions.write_stats). A crash before it leaves the old value, no
  longer equal: the next listing scans. Not seen: another program renaming a session folder
  within the microseconds between that mkdir and the new mark (the link count stays); any
  later change of sessions/ shows it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import NamedTuple

from agenvoy_cli.home.files import ensure_dir

SESSIONS = "sessions"  # the row of folder_marks for the sessions/ folder


class NewFolder(NamedTuple):
    """A session folder an append created and the sessions/ mark it set: recorded with the
    session's row (record_new_folder), in place of the record it replaces."""

    replaces: int
    mark: int


def mark_folder(folder: Path | str, mark: int | None = None) -> int | None:
    """Set the folder's mtime to now, to the nanosecond, and return it (None when the file
    system does not keep it exactly). A folder still bearing `mark` (the last one set) is left
    as it is: nothing in it changed."""
    try:
        if mark is not None and os.stat(folder, follow_symlinks=False).st_mtime_ns == mark:
            return mark
        now = time.time_ns()
        os.utime(folder, ns=(now, now), follow_symlinks=False)
        return now if os.stat(folder, follow_symlinks=False).st_mtime_ns == now else None
    except OSError:
        return None


def read(conn: sqlite3.Connection | None) -> tuple[int | None, int]:
    """(the recorded mark of sessions/ or None, gen). gen -1: no table to record it in."""
    if conn is None:
        return None, -1
    try:
        row = conn.execute("SELECT mtime_ns, gen FROM folder_marks WHERE folder = ?",
                           (SESSIONS,)).fetchone()
    except sqlite3.OperationalError:  # a database not migrated yet
        return None, -1
    return (row[0], row[1]) if row else (None, 0)


def holds(folder: Path, mark: int | None) -> bool:
    """Whether the folder still bears the recorded mark: no entry created, renamed or
    removed since."""
    if mark is None:
        return False
    try:
        return os.stat(folder, follow_symlinks=False).st_mtime_ns == mark
    except OSError:
        return False


def cleared(conn: sqlite3.Connection) -> None:
    """A row of session_stats is dropped: the mark no longer vouches for the rows."""
    conn.execute("INSERT INTO folder_marks (folder, mtime_ns, gen) VALUES (?, NULL, 1) "
                 "ON CONFLICT (folder) DO UPDATE SET mtime_ns = NULL, gen = gen + 1",
                 (SESSIONS,))


def write_mark(conn: sqlite3.Connection, mark: int, gen: int, names: list[str]) -> None:
    """Record sessions/' mark if no row was dropped since it was set (same gen) and every
    folder of `names` still has its row (session_list.record_listing_mark, under the write lock)."""
    import orjson

    if conn.execute("SELECT 1 FROM json_each(?) WHERE value NOT IN "
                    "(SELECT session_id FROM session_stats) LIMIT 1",
                    (orjson.dumps(names).decode(),)).fetchone() is None:
        conn.execute("INSERT INTO folder_marks (folder, mtime_ns, gen) VALUES (?, ?, ?) "
                     "ON CONFLICT (folder) DO UPDATE SET mtime_ns = excluded.mtime_ns "
                     "WHERE gen = excluded.gen", (SESSIONS, mark, gen))


def make_folder(conn: sqlite3.Connection, folder: Path) -> NewFolder | None:
    """Create a session's folder (ensure_dir). When the sessions/ mark held just before and
    only this folder came, mark sessions/ again and return the mark, for the caller to record
    with the session's row (record_new_folder). Hold the write lock."""
    if folder.is_dir():
        return None
    parent = folder.parent
    mark = read(conn)[0]
    try:
        before = os.stat(parent, follow_symlinks=False)
    except OSError:
        before = None
    ensure_dir(folder)
    if mark is None or before is None or before.st_mtime_ns != mark or before.st_nlink < 2:
        return None
    now = time.time_ns()
    try:
        os.utime(parent, ns=(now, now), follow_symlinks=False)
        after = os.stat(parent, follow_symlinks=False)
    except OSError:
        return None
    if after.st_mtime_ns == now and after.st_nlink == before.st_nlink + 1:
        return NewFolder(mark, now)
    return None


def record_new_folder(conn: sqlite3.Connection, new: NewFolder) -> None:
    """In the transaction writing the row of the session whose folder make_folder created:
    record the mark it set (unless the record changed meanwhile). Safe whenever it runs: at
    that mark every other folder had its row, and a row dropped since cleared the record."""
    conn.execute("UPDATE folder_marks SET mtime_ns = ? WHERE folder = ? AND mtime_ns = ?",
                 (new.mark, SESSIONS, new.replaces))
