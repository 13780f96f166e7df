"""`session list`: every session of a home from the session_stats rows, reading a folder only
when its mark no longer holds (conversation/sessions.py keeps the rows, conversation/
session_marks.py the marks). Above the Store: it reads through one."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

from agenvoy_cli.conversation import session_marks, sessions
from agenvoy_cli.conversation.session_marks import mark_folder
from agenvoy_cli.conversation.store import Store
from agenvoy_cli.errors import AgenvoyError, CorruptStore

_SHOWN = "session_id, messages, bytes, last_send_at, summary, dir_mtime_ns"


def list_all(store: Store) -> list[sessions.Entry]:
    """Every session, as `session list` shows them (takes the read lock). A listing that had
    to read the sessions/ folder and found every folder's row records afterwards the mark it
    set before (session_marks): the next listing reads no folder, unless one changed."""
    with store.read_lock():
        out, mark = _session_rows(store, None)
    if mark is not None:
        record_listing_mark(store, *mark)
    return out


def session_documents(store: Store, only: str | None = None) -> list[dict[str, Any]]:
    """Every session (or `only`), as `session list` shows them. Hold the read lock."""
    return sessions.as_dicts(_session_rows(store, only)[0])


def _session_rows(store: Store, only: str | None
             ) -> tuple[list[sessions.Entry], tuple[int, int, list[str]] | None]:
    """The entries and the mark to record, if any. The sessions are the rows of
    session_stats and, unless sessions/ still bears its mark, every folder in it too (a scan,
    the folder marked first). A session whose folder still bears its row's mark costs one
    stat; the others go through sessions.from_row (their files compared, or read)."""
    try:
        conn = store.db_readonly()
    except CorruptStore:
        conn = None  # sessions of a damaged archive are still listed from their files
    shown = _stats_rows(conn, only)
    folder = store.layout.sessions
    ids, rows, to_record = _listed(conn, only, shown, folder)
    # nothing created, renamed or removed in a folder since its row: the row as it is
    out: list[sessions.Entry | None] = [
        (sid, row[1], row[2], row[3], row[4] == 1, None)
        if row is not None and mtime is not None and row[5] == mtime and row[4] is not None
        else None for sid, row, mtime in zip(ids, rows, _mtimes(folder, ids))]
    later = [i for i, entry in enumerate(out) if entry is None]
    full = sessions.raw_rows(conn) if len(later) > 200 else {}
    prefix = f"{folder}/"
    for i in later:
        sid = ids[i]
        row = full.get(sid) if full else sessions.raw_rows(conn, sid).get(sid)
        out[i] = sessions.from_row(sid, row, prefix + sid) or from_files(store, sid)
    return out, to_record  # type: ignore[return-value]


def _stats_rows(conn: sqlite3.Connection | None, only: str | None) -> list[tuple[Any, ...]]:
    """session_stats' rows as `session list` shows them (all, or `only`'s)."""
    shown: list[tuple[Any, ...]] = []
    if conn is not None:
        sql, args = f"SELECT {_SHOWN} FROM session_stats", ()  # type: tuple[str, tuple[str, ...]]
        if only is not None:
            sql, args = sql + " WHERE session_id = ?", (only,)
        with contextlib.suppress(sqlite3.OperationalError):  # not migrated yet (readonly)
            shown = conn.execute(sql + " ORDER BY session_id", args).fetchall()
    return shown


def _listed(conn: sqlite3.Connection | None, only: str | None, shown: list[tuple[Any, ...]],
            folder: Path) -> tuple[list[str], list[tuple[Any, ...] | None],
                                   tuple[int, int, list[str]] | None]:
    """(the sessions' ids, their rows or None, the mark to record): the rows alone while
    sessions/ bears its mark, else every folder in it too (the folder marked first)."""
    if only is not None:
        return [only], [shown[0] if shown else None], None
    mark, gen = session_marks.read(conn)
    if session_marks.holds(folder, mark):  # no folder came, went or was renamed
        return [r[0] for r in shown], list(shown), None
    new = mark_folder(folder) if gen >= 0 else None  # before the scan
    names = sessions.folder_names(folder)
    by_id = {r[0]: r for r in shown}
    ids = sorted(set(names).union(by_id))
    rows: list[tuple[Any, ...] | None] = [by_id.get(sid) for sid in ids]
    to_record = (new, gen, names) if new is not None and all(
        name in by_id for name in names) else None
    return ids, rows, to_record


def _mtimes(folder: Path, names: list[str]) -> list[int | None]:
    """The mtime of each folder in `folder` (None when missing): one stat each."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return [None] * len(names)
    stat = os.stat
    try:
        try:
            return [stat(name, dir_fd=fd).st_mtime_ns for name in names]
        except OSError:  # some are gone: one at a time
            out: list[int | None] = []
            for name in names:
                try:
                    out.append(stat(name, dir_fd=fd).st_mtime_ns)
                except OSError:
                    out.append(None)
            return out
    finally:
        os.close(fd)


def from_files(store: Store, session_id: str) -> sessions.Entry:
    """The entry read from the session's files (a session nobody recorded yet)."""
    from agenvoy_cli.conversation.summary import read_summary

    count = size = 0
    last = problem = None
    has_summary = False
    try:
        history = store.history(session_id)
        recent = store.recent(session_id, history)
        count, size = len(recent), history.size
        if recent:
            last = recent[-1].send_at
    except CorruptStore as exc:
        problem = str(exc)
    try:
        has_summary = read_summary(store.layout.summary(session_id)) is not None
    except CorruptStore as exc:
        problem = problem or str(exc)
    return session_id, count, size, last, has_summary, problem


def record_listing_mark(store: Store, mark: int, gen: int, names: list[str]) -> None:
    """Record the mark a listing set before a scan that found `names` (every folder) with a
    row each, if the write lock is free at once, no row was dropped since (same gen) and each
    still has its row (the database may have been replaced meanwhile: doctor's salvage).
    Best effort: a busy, read-only or damaged home just keeps its listings scanning."""

    with contextlib.suppress(AgenvoyError, OSError, sqlite3.Error), \
            store.locks.hold(store.layout.lock, 0), store.write_lock(), \
            store.transaction() as conn:
        session_marks.write_mark(conn, mark, gen, names)
